"""`offlow bench streams` on a tiny sweep: every row measured, the ceiling and host-alone
ratios defined, oversubscription flagged, the report and JSON well formed. No timing
asserted."""

from __future__ import annotations

import json
import os

from benchmarks import streams


def test_streams_sweep_is_well_formed() -> None:
    sw = streams.Sweep(nic_cores=(0, 1, 2), operators=("pass", "filter", "join"),
                       duration=0.15, reps=1, tuples=2000)
    doc = streams.measure_all(sw, progress=False)
    rows = doc["operators"]
    assert [(r["operator"], r["nic_cores"]) for r in rows] == [
        (op, k) for op in sw.operators for k in sw.nic_cores]
    for r in rows:
        assert r["errors"] == [] and r["mbps"] > 0 and r["host_mbps"] > 0, r
        assert r["oversubscribed"] == (r["streams"] > (os.cpu_count() or 1)), r
    assert [r["vs_host_alone"] for r in rows if r["nic_cores"] == 0] == [1.0] * 3
    assert [r["vs_ceiling"] for r in rows if r["operator"] == "pass"] == [1.0] * 3
    pipe = doc["pipeline"]
    assert [r["nic_cores"] for r in pipe] == [0, 1, 2] and pipe[0]["speedup"] == 1.0
    assert all(r["errors"] == [] and r["mbps"] > 0 for r in pipe)
    text = streams.report(doc)
    assert "CPU features:" in text and "50.3 MB/s" in text  # the seed's Join beside ours
    assert text.count("oversubscribed") == (sum(r["oversubscribed"] for r in rows)
                                            + sum(r["oversubscribed"] for r in pipe))
    json.dumps(doc)  # the JSON output


def test_five_independent_aggregates_take_all_their_options() -> None:
    """Five streams, each with its source's and its Aggregate's options (over 64 --opt in
    all, the runtime's old limit), run and count every stream."""
    sw = streams.Sweep(nic_cores=(4,), operators=("aggregate",), duration=0.1, reps=1,
                       tuples=1000)
    doc = streams.measure_all(sw, progress=False)
    (row,) = doc["operators"]
    assert row["errors"] == [] and row["mbps"] > 0 and row["streams"] == 5
