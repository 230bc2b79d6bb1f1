"""`offlow bench remote` runs a tiny sweep between two namespaces: its JSON has every row
and the round trip, each moved what it claims (counts, not timings), and no namespace
is left behind."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import remote, remote_kvs
from benchmarks.common.netns import namespaces

TINY = remote.Sweep(entries=3000, batches=(1, 16), sizes=(64, 200), rings=(64, 1024),
                    rtt_iters=200,
                    rtt_size=64, warm=20, reps=2, kvs_hosts=(1, 2), kvs_count=300, kvs_loops=2,
                    bulk_sizes=(100_003,), bulk_bytes=300_000)


def test_tiny_sweep_counts_every_entry_and_leaves_no_namespace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "remote.json"
    res = remote.run(quick=True, out_json=out, out_png=tmp_path / "remote.png", sweep=TINY)
    doc = json.loads(out.read_text())
    assert doc["rows"] == res["rows"] and doc["benchmark"] == "remote"
    rows = doc["rows"]
    assert {(r["ring_size"], r["batch"], r["entry_size"]) for r in rows} == {
        (ring, b, s) for ring in (64, 1024) for b in (1, 16) for s in (64, 200)}
    for r in rows:
        assert r["entries"] == 3000 and len(r["runs"]) == 2
        for run in r["runs"]:
            assert run["sent"] == run["received"] == 3000 and run["bad"] == 0
            assert run["msgs"] == run["msgs_in"]
            # batches: at least entries / batch messages, at most one per entry and
            # the close (which may travel alone)
            assert -(-3000 // r["batch"]) <= run["msgs"] <= 3001
        assert 0 < r["mbs_min"] <= r["mbs"] <= r["mbs_max"] and r["entries_per_s"] > 0
        if doc["perftest"]:
            assert len(r["perftest"]["bw_mbs_all"]) == 2
            assert r["perftest"]["bw_mbs"] > 0 and r["ratio"] > 0
    rtt = doc["rtt"]
    assert rtt["answered"] == 220 and rtt["iterations"] == 200
    assert 0 < rtt["rtt_p50_ns"] <= rtt["rtt_p99_ns"]
    bulk = doc["bulk"]   # a bulk channel each way: every transfer arrived whole
    assert [(b["direction"], b["size"], b["transfers"]) for b in bulk] == [
        ("up", 100_003, 2), ("down", 100_003, 2)]
    for b in bulk:
        assert len(b["runs"]) == 2 and 0 < b["mbs_min"] <= b["mbs"] <= b["mbs_max"]
        if doc["perftest"]:
            assert b["perftest"]["bw_mbs"] > 0 and b["ratio"] > 0
    v = doc["verdict"]
    if doc["perftest"]:
        for b in v["bw"]:
            assert b["min_ratio"] == min(r["ratio"] for r in rows
                                         if r["ring_size"] == b["ring_size"])
            assert b["meets"] == (b["min_ratio"] >= 0.8)
        assert [b["ring_size"] for b in v["bw"]] == [64, 1024]
        assert v["lat_meets"] == (rtt["ratio"] <= 1.2)
    kvs = doc["kvs"]
    assert [(r["where"], r["hosts"]) for r in kvs] == [("nic", 0), ("1 remote host", 1),
                                                        ("2 remote hosts", 2)]
    for r in kvs:  # every request answered once; the shards hold the keys the nic store holds
        assert r["replies"] == r["requests"] == kvs[0]["requests"] > 600
        assert sum(r["by_instance"]) == r["requests"] and all(r["by_instance"])
        assert r["items"] == kvs[0]["items"] and r["ops_per_s"] > 0
    assert kvs[2]["vs_one_host"] == kvs[2]["ops_per_s"] / kvs[1]["ops_per_s"]
    assert (tmp_path / "remote.png").stat().st_size > 0
    text = capsys.readouterr().out
    assert text.startswith("machine: ") and "CPU features" in text.splitlines()[0]
    assert len([ln for ln in text.splitlines() if ln.startswith("verdict:")]) == 3
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for ns in namespaces(remote.NS_PREFIX):
        assert ns not in listed.split()
    mine = f"{remote_kvs.NS_PREFIX}{os.getpid() % 100000}"  # (star_namespaces' names)
    assert not [ns for ns in listed.split() if ns.startswith(mine)]


def test_verdicts_take_the_worst_row_per_ring_size_and_say_when_not_judged() -> None:
    rows = [{"ring_size": 1024, "ratio": 0.9}, {"ring_size": 1024, "ratio": 0.79},
            {"ring_size": 64, "ratio": 1.3}, {"ring_size": 64, "ratio": 0.8}]
    v = remote.verdicts(rows, {"ratio": 1.2})
    assert v["bw"] == [{"ring_size": 64, "min_ratio": 0.8, "meets": True},
                       {"ring_size": 1024, "min_ratio": 0.79, "meets": False}]
    assert v["lat_meets"] is True
    lines = remote.verdict_lines(v)
    assert lines[0].endswith("0.80: meets") and lines[1].endswith("0.79: misses")
    v = remote.verdicts(rows, {"ratio": 1.21})
    assert v["lat_meets"] is False and remote.verdict_lines(v)[2].endswith("1.21: misses")
    v = remote.verdicts([{"ring_size": 64, "ratio": None}], {"perftest": None})
    assert v["bw"][0]["meets"] is None and v["lat_meets"] is None
    assert all("not judged" in ln for ln in remote.verdict_lines(v))
