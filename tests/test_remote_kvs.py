"""The key-value store (examples/kvs.py) with its store segment on a remote device
(docs/remote.md): a user's request mix in a capture is answered as a real memcached
answers the same requests over UDP, and as with the store on nic, over 127.0.0.1 and
across two network namespaces (UCX over TCP)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from offlow.kvs.tools import memcached, setup_memcached
from tests.e2e import ROOT, read_frames
from tests.kvs_replay import memcached_replies, replies_in, request_mix, write_capture
from tests.netns import ADDR_B
from tests.test_remote import counts, run, secret_file, serve

KVS = ROOT / "examples" / "kvs.py"
REQUESTS = request_mix(400, keys=23, seed=28)

pytestmark = pytest.mark.skipif(not Path("/usr/include/ucp/api/ucp.h").exists(),
                                reason="remote: UCX (libucx-dev) is not installed")


@pytest.fixture(scope="module")
def expected() -> Iterator[dict[int, bytes]]:
    """What memcached answers to REQUESTS, request id -> reply."""
    path, why = setup_memcached()
    if not path:
        pytest.skip(f"memcached unavailable: {why}")
    with memcached(threads=1) as m:
        yield memcached_replies(m.port, REQUESTS)


def kvs(capture: Path, out: Path, *more: str) -> list[str]:
    return [str(KVS), "--input", str(capture), "--output", str(out), *more]


def test_the_store_on_a_remote_device_answers_as_memcached_and_as_on_nic(
        expected: dict[int, bytes], tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    capture = tmp_path / "req.pcap"
    write_capture(capture, REQUESTS)
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret)
    rc, nic, err = run(procs, kvs(capture, tmp_path / "nic.pcap", "--set", "store.device=nic"))
    assert rc == 0 and nic["ok"], err
    rc, rem, err = run(procs, kvs(capture, tmp_path / "remote.pcap", "--set",
                                  "store.device=remote:kv1", "--remote",
                                  f"kv1=127.0.0.1:{port}", "--secret-file", str(secret)))
    assert rc == 0 and rem["ok"], err
    assert [x["device"] for x in rem["segments"]] == ["host", "remote:kv1"]
    assert replies_in(tmp_path / "remote.pcap") == expected
    assert read_frames(tmp_path / "remote.pcap") == read_frames(tmp_path / "nic.pcap")
    assert counts(rem) == counts(nic)


def test_the_store_across_two_namespaces_answers_as_memcached(
        expected: dict[int, bytes], two_hosts: tuple[str, str], tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    host, device = two_hosts
    capture = tmp_path / "req.pcap"
    write_capture(capture, REQUESTS)
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret, ADDR_B, device)
    rc, rem, err = run(procs, kvs(capture, tmp_path / "remote.pcap", "--set",
                                  "store.device=remote:b", "--remote", f"b={ADDR_B}:{port}",
                                  "--secret-file", str(secret)), host)
    assert rc == 0 and rem["ok"], err
    assert rem["tables"]["store"]["gets"] > 0
    assert replies_in(tmp_path / "remote.pcap") == expected
