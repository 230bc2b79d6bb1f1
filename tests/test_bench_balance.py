"""`offlow bench balance` on a small capture: the capture's phases are what the bench
says, every design runs and processes every packet, the static splits keep their share.
No timing asserted."""

from __future__ import annotations

from pathlib import Path

from benchmarks import balance
from tests.e2e import read_frames


def test_the_capture_changes_its_mix_in_phases(tmp_path: Path) -> None:
    cap = tmp_path / "mix.pcap"
    assert balance.write_capture(cap, [(5, 128), (3, 512), (2, 130)]) == 10
    assert [len(f) for f in read_frames(cap)] == [128] * 5 + [512] * 3 + [130] * 2


def test_every_design_runs_and_the_static_splits_keep_their_share(tmp_path: Path) -> None:
    res = balance.measure(900, 1, tmp_path, progress=False)
    rows = {r["design"]: r for r in res["rows"]}
    assert list(rows) == ([f"static {s:.1f}" for s in balance.SHARES]
                          + ["adaptive cpu", "adaptive wall"])
    for r in rows.values():
        assert r["errors"] == [] and r["mpps"] > 0, r
    assert rows["static 0.0"]["mean_share"] == 0.0
    assert rows["static 1.0"]["mean_share"] == 1.0
    assert res["best_static"] in rows
    assert all(q["best"] > 0 for q in res["ratios"].values())
    # the phases' balance points differ: no one static split is right for the whole run
    small, large = res["balance_points"].values()
    assert 0 < small < large < 1
    report = balance.format_report(res)
    for name, q in res["ratios"].items():
        assert f"{name} / best static" in report
        assert (f"{name} WINS over it" in report) == (q["best"] > 1)
