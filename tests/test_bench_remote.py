"""`offlow bench remote` runs a tiny sweep between two namespaces: its JSON has every row
and the round trip, each moved what it claims (counts, not timings), and no namespace
is left behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks import remote
from benchmarks.common.netns import namespaces

TINY = remote.Sweep(entries=3000, batches=(1, 16), sizes=(64, 200), rtt_iters=200,
                    rtt_size=64, warm=20, reps=2)


def test_tiny_sweep_counts_every_entry_and_leaves_no_namespace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "remote.json"
    res = remote.run(quick=True, out_json=out, out_png=tmp_path / "remote.png", sweep=TINY)
    doc = json.loads(out.read_text())
    assert doc["rows"] == res["rows"] and doc["benchmark"] == "remote"
    rows = doc["rows"]
    assert {(r["batch"], r["entry_size"]) for r in rows} == {(1, 64), (16, 64), (1, 200),
                                                             (16, 200)}
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
    v = doc["verdict"]
    if doc["perftest"]:
        assert v["bw_min_ratio"] == min(r["ratio"] for r in rows)
        assert v["bw_meets"] == (v["bw_min_ratio"] >= 0.8)
        assert v["lat_meets"] == (rtt["ratio"] <= 1.2)
    assert (tmp_path / "remote.png").stat().st_size > 0
    text = capsys.readouterr().out
    assert text.startswith("machine: ") and "CPU features" in text.splitlines()[0]
    assert len([ln for ln in text.splitlines() if ln.startswith("verdict:")]) == 2
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for ns in namespaces(remote.NS_PREFIX):
        assert ns not in listed.split()


def test_verdicts_take_the_worst_ring_row_and_say_when_not_judged() -> None:
    rows = [{"ratio": 0.9}, {"ratio": 0.79}, {"ratio": 1.3}]
    v = remote.verdicts(rows, {"ratio": 1.2})
    assert (v["bw_min_ratio"], v["bw_meets"], v["lat_meets"]) == (0.79, False, True)
    v = remote.verdicts([{"ratio": 0.8}], {"ratio": 1.21})
    assert (v["bw_meets"], v["lat_meets"]) == (True, False)
    v = remote.verdicts([{"perftest": None}], {"perftest": None})
    assert v["bw_meets"] is None and v["lat_meets"] is None
    assert all("not judged" in ln for ln in remote.verdict_lines(v))
