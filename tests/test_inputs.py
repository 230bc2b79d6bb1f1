"""A run's inputs checked before it starts (offlow/inputs.py): the tool that reads them
as the sources will is asked once per process for the same files as they are, and again
once a file changed: a run checks its options when its build is made and again when the
Run is, and a process (a test worker, a host program) starts many runs."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import inputs
from offlow.errors import OfflowError
from offlow.runner import RunOptions, check_options


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The tool's runs in this test (its answers forgotten first)."""
    inputs._answer.cache_clear()
    tool = str(inputs._tool())
    calls: list[list[str]] = []
    real = subprocess.run

    def counted(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        if cmd[0] == tool:
            calls.append(cmd[1:])
        return real(cmd, **kw)

    monkeypatch.setattr(inputs.subprocess, "run", counted)
    return calls


def _capture(path: Path, sizes: list[int]) -> None:
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for k, n in enumerate(sizes):
            w.writepkt(bytes(n), ts=k)


def test_the_same_options_ask_the_tool_once(asked: list[list[str]]) -> None:
    o = RunOptions(count=10, sizes="64:1,1500:1")
    assert check_options(o) == check_options(o)
    assert asked == [["synth", "64:1,1500:1"]]


def test_a_capture_that_changed_is_read_again(tmp_path: Path,
                                              asked: list[list[str]]) -> None:
    cap = tmp_path / "in.pcap"
    _capture(cap, [60, 3000])
    assert check_options(RunOptions(input=cap))[0] == 3000
    _capture(cap, [60, 5000, 70])   # (rewritten in place: another size, another time)
    assert check_options(RunOptions(input=cap))[0] == 5000
    cap.write_bytes(b"no capture at all")
    for _ in range(2):   # (a refusal is said every time it is asked)
        with pytest.raises(OfflowError, match="^--input: "):
            check_options(RunOptions(input=cap))
    assert len(asked) == 3
