"""`offlow bench groups` on a slice of the table: every row measured, the one-core
rows define the scaling baseline, oversubscription is flagged. No timing asserted."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from benchmarks import groups
from benchmarks.router import DEFAULT_PREFIXES


def test_group_sweep_is_well_formed(tmp_path: Path) -> None:
    lines = gzip.decompress(DEFAULT_PREFIXES.read_bytes()).decode().splitlines()
    table = tmp_path / "slice.txt"
    table.write_text("\n".join(lines[::300]) + "\n")
    res = groups.measure(table, groups.GroupSweep(sizes=(1, 3), packets=20_000, reps=1),
                         progress=False)
    rows = res["rows"]
    assert [(r["cores"], r["grouped"]) for r in rows] == [
        (1, True), (3, True), (1, False), (3, False)]
    for r in rows:
        assert r["errors"] == [] and r["mpps"] > 0, r
        assert r["efficiency"] > 0
        if r["cores"] + 2 > (os.cpu_count() or 1):  # lookup cores plus rx and tx
            assert r["oversubscribed"]
    assert [r["efficiency"] for r in rows if r["cores"] == 1] == [1.0, 1.0]
    text = groups.format_report(res)
    assert text.count("oversubscribed") == sum(r["oversubscribed"] for r in rows)
