"""`offlow bench seeds`' Figure 4 runs on the real stream operators
(examples/streams_query.py) over a capture of the seed's tuples. No timing asserted."""

from __future__ import annotations

from pathlib import Path

from benchmarks import seeds


def test_figure_4_calibrates_the_streams_query_and_predicts_every_row(tmp_path: Path) -> None:
    res = seeds.active_nic(5000, tmp_path)
    assert res["filter_ns"] > 0 and res["aggregate_ns"] > 0
    segments = {e["segment"] for e in res["elements"]}
    assert segments == {"select", "aggregate"}
    names = {e["name"] for e in res["elements"]}
    assert {"tuples", "select", "average", "back"} <= names
    assert [(r["profile"], r["nic_cores"]) for r in res["rows"]] == [
        (p, k) for p in ("cmp-nic-200", "cmp-nic-400") for k in range(1, 5)]
    assert all(r["speedup"] > 0 for r in res["rows"])
