"""`offlow bench queue` runs, and its rows are well formed and count every entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offlow.bench import queue

KEYS = {"batch", "entry_size", "ring_size", "entries", "reps", "offlow_received",
        "ceiling_received", "offlow_mps", "offlow_mps_min", "offlow_mps_max", "ceiling_mps",
        "ceiling_mps_min", "ceiling_mps_max", "ratio"}


def test_quick_bench_rows_count_every_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "queue.json"
    rows = queue.run(quick=True, out_json=str(out), entries=5000)
    configs = {(b, s) for b in queue.QUICK.batches for s in queue.QUICK.sizes}
    assert {(r["batch"], r["entry_size"]) for r in rows} == configs
    for r in rows:
        assert KEYS <= r.keys()
        assert r["entries"] == 5000
        assert r["offlow_received"] == r["entries"] == r["ceiling_received"]
        assert r["offlow_mps"] > 0 and r["ceiling_mps"] > 0
        assert r["offlow_mps_min"] <= r["offlow_mps"] <= r["offlow_mps_max"]
    assert json.loads(out.read_text())["rows"] == rows
    assert "ratio" in capsys.readouterr().out
