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


def test_the_tuned_query_is_the_example_with_the_seeds_kind_of_parameters(tmp_path: Path) -> None:
    # The tuned run calibrates examples/streams_query.py's own program() with TUNED:
    # the same four elements, Figure 4's rows for both profiles.
    res = seeds.active_nic(5000, tmp_path, seeds.tuned_query(tmp_path, seeds.TUNED))
    assert {e["name"] for e in res["elements"]} >= {"tuples", "select", "average", "back"}
    assert len(res["rows"]) == 8 and all(r["speedup"] > 0 for r in res["rows"])


def test_the_peak_is_the_fewest_cores_at_the_highest_speedup() -> None:
    # By hand: 200 MHz rises to 1.17 at 3 cores and stays (the host bounds it): peak 3;
    # 400 MHz peaks at 2; a profile still rising at 4 peaks at 4.
    rows = [{"profile": p, "nic_cores": k, "speedup": s}
            for p, ss in (("a", [0.4, 0.8, 1.17, 1.171]), ("b", [0.8, 1.3, 1.3, 1.3]),
                          ("c", [0.1, 0.2, 0.3, 0.4]))
            for k, s in enumerate(ss, 1)]
    assert seeds.peaks(rows) == {"a": 3, "b": 2, "c": 4}
