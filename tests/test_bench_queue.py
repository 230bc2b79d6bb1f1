"""`offlow bench queue` runs, and its rows are well formed and count every entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import queue

KEYS = {"batch", "entry_size", "ring_size", "entries", "reps", "offlow_received",
        "ceiling_received", "offlow_mps", "offlow_mps_min", "offlow_mps_max", "ceiling_mps",
        "ceiling_mps_min", "ceiling_mps_max", "ratio", "lat_iters", "offlow_lat_p50_ns",
        "offlow_lat_p99_ns", "ceiling_lat_p50_ns", "ceiling_lat_p99_ns", "lat_ratio",
        "st_offlow_ns", "st_next_ns", "st_ceiling_ns", "st_ratio", "st_runs", "ratio_all",
        "pairs", "clean_pairs", "share_min", "share_median"}


def test_quick_bench_rows_count_every_entry(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "queue.json"
    rows = queue.run(quick=True, out_json=str(out), entries=5000)
    configs = {(b, s) for b in queue.QUICK.batches for s in queue.QUICK.sizes}
    assert {(r["batch"], r["entry_size"]) for r in rows} == configs
    assert any(b >= queue.TARGET_BATCH for b in queue.QUICK.batches)
    for r in rows:
        assert KEYS <= r.keys()
        assert r["entries"] == 5000
        assert r["offlow_received"] == r["entries"] == r["ceiling_received"]
        assert r["offlow_mps"] > 0 and r["ceiling_mps"] > 0
        assert r["offlow_mps_min"] <= r["offlow_mps"] <= r["offlow_mps_max"]
        # Pairs run until `reps` undisturbed ones, or 3 x reps in all.
        assert 1 <= r["pairs"] <= 3 * r["reps"] and 0 <= r["clean_pairs"] <= r["reps"]
        assert r["clean_pairs"] == r["reps"] or r["pairs"] == 3 * r["reps"]
        assert r["clean_pairs"] <= r["pairs"] and queue.judged(r) == (r["clean_pairs"] == r["reps"])
        # A thread's CPU time over the transfer's wall time: at most 1 (give or take the
        # two clocks), and as little as 0 for a tiny transfer on a loaded machine.
        assert 0 <= r["share_min"] <= r["share_median"] <= 1.1
        # Latency: samples taken, percentiles positive and ordered (no thresholds).
        assert r["lat_iters"] == queue.QUICK.lat_iters
        for side in ("offlow", "ceiling"):
            p50, p99 = r[f"{side}_lat_p50_ns"], r[f"{side}_lat_p99_ns"]
            assert isinstance(p50, int) and isinstance(p99, int)
            assert 0 < p50 <= p99
        assert r["lat_ratio"] == pytest.approx(
            r["offlow_lat_p50_ns"] / r["ceiling_lat_p50_ns"], rel=1e-3)
        # Single thread: each ring's CPU per entry measured (no thresholds).
        assert min(r["st_offlow_ns"], r["st_next_ns"], r["st_ceiling_ns"], r["st_ratio"]) > 0
    doc = json.loads(out.read_text())
    assert doc["rows"] == rows
    v = doc["verdict"]
    big = [r for r in rows if r["batch"] >= 32]
    ok = [r["ratio"] for r in big if queue.judged(r)]
    assert v["min_batch"] == 32 and v["target_ratio"] == 0.5
    assert v["unjudged"] == [[r["batch"], r["entry_size"]] for r in big if not queue.judged(r)]
    assert v["min_ratio"] == (min(ok) if ok else None)
    assert v["meets"] == (None if v["unjudged"] or not ok else min(ok) >= 0.5)
    assert v["st_min_ratio"] == min(r["st_ratio"] for r in big)
    text = capsys.readouterr().out
    assert "ratio" in text and "p50/p99" in text and "single thread" in text
    verdict = [line for line in text.splitlines() if line.startswith("verdict:")]
    assert len(verdict) == 1 and verdict[0].endswith(("meets", "misses", "not judged"))
    assert "single thread (CPU time, load-robust)" in verdict[0]


def _row(batch: int, size: int, ratio: float, clean: int = 5, st: float = 0.4) -> dict:
    return {"batch": batch, "entry_size": size, "ratio": ratio, "reps": 5,
            "clean_pairs": clean, "st_ratio": st}


def test_verdict_takes_the_worst_row_at_batch_32_and_up() -> None:
    rows = [_row(1, 16, 0.1), _row(32, 16, 0.6), _row(256, 64, 0.55), _row(64, 256, 0.9)]
    v = queue.verdict(rows)
    assert (v.min_ratio, v.batch, v.entry_size, v.meets) == (0.55, 256, 64, True)
    assert v.line().endswith("meets") and "0.55 (batch 256, 64 B)" in v.line()
    v = queue.verdict([*rows, _row(32, 64, 0.49)])
    assert (v.min_ratio, v.meets) == (0.49, False) and v.line().endswith("misses")
    v = queue.verdict([_row(16, 16, 0.2)])
    assert v.meets is None and v.min_ratio is None and "no configuration" in v.line()
    assert v.to_json()["meets"] is None


def test_verdict_names_rows_without_enough_undisturbed_pairs() -> None:
    # A row whose pairs were disturbed by other load is not judged, whatever its ratio
    # says, and the verdict is None; the single-thread minimum is given beside it.
    rows = [_row(32, 16, 0.7), _row(256, 16, 0.2, clean=2, st=0.6), _row(32, 256, 0.8, st=0.3)]
    v = queue.verdict(rows)
    assert v.unjudged == ((256, 16),) and v.meets is None
    assert (v.min_ratio, v.batch, v.entry_size) == (0.7, 32, 16)
    assert (v.st_min_ratio, v.st_batch, v.st_entry_size) == (0.3, 32, 256)
    line = v.line()
    assert line.endswith("not judged") and "batch 256 16 B" in line
    assert "ceiling / offlow >= 0.30 (batch 32, 256 B)" in line
    assert v.to_json()["unjudged"] == [[256, 16]] and v.to_json()["meets"] is None
    # Every row disturbed: no two-core minimum at all.
    v = queue.verdict([_row(32, 16, 0.9, clean=0)])
    assert v.min_ratio is None and v.meets is None and v.line().endswith("not judged")
    # Judged again once the row has its pairs: the worst judged row decides.
    v = queue.verdict([_row(32, 16, 0.7), _row(256, 16, 0.45)])
    assert v.unjudged == () and (v.min_ratio, v.meets) == (0.45, False)
    assert queue.judged(_row(32, 16, 0.1)) and not queue.judged(_row(32, 16, 0.1, clean=4))
