"""The Python channel API on a stand-alone region, both ends in this process (one
per thread): direct messages, bulk transfers from bytes, memoryviews and NumPy
arrays in both directions, and the errors."""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from offlow import OfflowError
from offlow.channels import SIDE_B, ChannelError, ChannelTimeout, Region


@pytest.fixture
def region(tmp_path: Path) -> Any:
    r = Region.create(tmp_path / "window", ["a", "b"])
    yield r
    r.close()


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["value"] = fn()
        except Exception as e:  # handed to the test thread
            out["error"] = e

    t = threading.Thread(target=body)
    t.start()
    return t, out


def test_direct_messages_both_ways(region: Region) -> None:
    host, dev = region.channel("a"), region.channel("a", SIDE_B)
    t, out = in_thread(lambda: dev.send(dev.recv(timeout=5)[::-1], timeout=5))
    assert host.request(b"abc") == b"cba"
    t.join()
    assert "error" not in out


def test_bulk_both_directions_without_python_copies(region: Region) -> None:
    host, dev = region.channel("b"), region.channel("b", SIDE_B)
    data = np.random.default_rng(1).integers(0, 256, 3 * 4096 + 123, dtype=np.uint8)
    t, out = in_thread(lambda: dev.bulk_recv(len(data), timeout=10))
    host.bulk_send(memoryview(data.tobytes()), timeout=10)
    t.join()
    assert bytes(out["value"]) == data.tobytes()

    back = np.zeros(1000, dtype=np.float64)
    src = np.arange(1000, dtype=np.float64)
    t, out = in_thread(lambda: dev.bulk_send(src, timeout=10))
    host.bulk_recv(back, timeout=10)
    t.join()
    assert "error" not in out and np.array_equal(back, src)


def test_bulk_size_mismatch_fails_on_both_sides(region: Region) -> None:
    host, dev = region.channel("b"), region.channel("b", SIDE_B)
    t, out = in_thread(lambda: dev.bulk_recv(100, timeout=5))
    with pytest.raises(ChannelError) as e:
        host.bulk_send(b"x" * 99, timeout=5)
    t.join()
    assert e.value.errno == errno.EMSGSIZE
    assert isinstance(out["error"], ChannelError) and out["error"].errno == errno.EMSGSIZE


def test_errors(region: Region) -> None:
    host = region.channel("a")
    with pytest.raises(ChannelTimeout):
        host.recv(timeout=0.05)
    with pytest.raises(ChannelTimeout):
        host.send(b"nobody takes this", timeout=0.05)
    with pytest.raises(ChannelError) as e:
        host.send(bytes(57))
    assert e.value.errno == errno.EMSGSIZE
    with pytest.raises(OfflowError, match="writable"):
        host.bulk_recv(b"read-only", timeout=0.05)
    with pytest.raises(ChannelError, match="channel `nope`"):
        region.channel("nope")
