"""`offlow bench tsp` on a few climbs: every row (host x1, host x all CPUs, nic, gpu on
PoCL, the one-core ceiling, the plain climb) with its best length and the seed's
Table 3 in the report, the JSON and the plot written; a row whose tour is not a tour
fails the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import tsp
from offlow.errors import OfflowError
from tests.test_tsp import KROA100, WHY


def test_bench_tsp_rows_report_and_files(tmp_path: Path) -> None:
    res = tsp.measure(KROA100, 200, 2, 2)
    names = [r["name"] for r in res["rows"]]
    assert names[:3] == ["host, 1 climber thread", f"host, {res['machine']['cpus']} climber "
                         "threads" if res["machine"]["cpus"] > 1 else "host, 1 climber thread",
                         f"nic, {res['machine']['cpus']} climber thread"
                         + ("s" if res["machine"]["cpus"] > 1 else "")]
    gpu_rows = [n for n in names if n.startswith("gpu")]
    assert len(gpu_rows) == (0 if WHY else 2), names
    assert names[-2].startswith("ceiling") and names[-1].startswith("plain")
    # the same seeds on every placement give the same best length
    assert len({r["best"] for r in res["rows"][:-1]}) == 1
    assert all(r["runs"] == 2 for r in res["rows"][:3])
    report = tsp.format_report(res)
    assert "NFP 27.53 s, host 13.37 s, GPU 0.33 s" in report
    assert "per 10,000 climbs (target <= 1.0 s" in report
    tsp.plot(res, tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 1000
    json.dumps(res)


def test_a_wrong_tour_fails_the_bench() -> None:
    from offlow.tsp import clib

    cities = clib.load(KROA100)
    tour = tuple(range(100))
    with pytest.raises(OfflowError, match="not a tour of length"):
        tsp._checked(cities, tour, 1, "x")
    with pytest.raises(OfflowError, match="not a tour"):
        tsp._checked(cities, (0,) * 100, 0, "x")
