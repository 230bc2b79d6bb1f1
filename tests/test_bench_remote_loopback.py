"""`offlow bench remote --loopback`: both sides in this network namespace over 127.0.0.1
(a machine whose namespaces cannot be made, such as a container, or a user without
root). A tiny sweep makes no namespace (making one fails the test), needs no root, and
still counts every entry, round trip, transfer and request; without --loopback a user
who cannot make namespaces is told of it before anything is built."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import remote, remote_kvs
from offlow.errors import OfflowError

TINY = remote.Sweep(entries=2000, batches=(8,), sizes=(64,), rings=(256,), rtt_iters=100,
                    rtt_size=64, warm=10, reps=1, kvs_hosts=(2,), kvs_count=300, kvs_loops=1,
                    bulk_sizes=(50_001,), bulk_bytes=100_002)


def _no_namespaces(*_: object) -> None:
    raise AssertionError("a loopback run made a network namespace")


def test_a_loopback_sweep_makes_no_namespace_needs_no_root_and_counts_everything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "two_namespaces", _no_namespaces)
    monkeypatch.setattr(remote_kvs, "star_namespaces", _no_namespaces)
    monkeypatch.setattr(remote.os, "geteuid", lambda: 1000)   # as a user without root
    out = tmp_path / "remote.json"
    remote.run(quick=True, out_json=out, sweep=TINY, loopback=True)
    doc = json.loads(out.read_text())
    assert doc["loopback"] is True
    [row] = doc["rows"]
    [run] = row["runs"]
    assert run["sent"] == run["received"] == 2000 and run["bad"] == 0
    assert doc["rtt"]["answered"] == 110
    assert [(b["direction"], b["transfers"]) for b in doc["bulk"]] == [("up", 2), ("down", 2)]
    if doc["perftest"]:   # ucx_perftest ran beside it over the same loopback
        assert row["perftest"]["bw_mbs"] > 0 and doc["rtt"]["perftest"]["lat_p50_us"] > 0
    nic, two = doc["kvs"]   # two store servers on 127.0.0.1, every request answered once
    assert (nic["where"], two["where"]) == ("nic", "2 remote hosts")
    assert two["replies"] == two["requests"] == nic["requests"] >= 300
    assert all(two["by_instance"]) and two["items"] == nic["items"]


def test_without_loopback_a_user_who_cannot_make_namespaces_is_told_so_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(remote, "build", _no_namespaces)   # nothing is built first
    with pytest.raises(OfflowError, match=r"needs root .*--loopback"):
        remote.run(quick=True, out_json=None, sweep=TINY)
    remote.check_hosts(loopback=True)   # (which --loopback does not need)


def test_loopback_is_an_option_of_the_remote_bench_only() -> None:
    res = subprocess.run([sys.executable, "-m", "offlow.cli", "bench", "queue", "--loopback"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and res.stdout == ""
    assert "--loopback: `offlow bench queue` does not read it (it is for remote)" in res.stderr
