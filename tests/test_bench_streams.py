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


def test_one_run_holds_the_word_count_designs_the_crypto_rows_and_the_plot(tmp_path) -> None:
    from benchmarks import crypto
    tiny_crypto = crypto.Sweep(sizes=(64,), count=8, seconds=0.01, reps=1, cores=(1,),
                               datagrams=500, fig_reps=1)
    sw = streams.Sweep(nic_cores=(0,), operators=("pass",), duration=0.15, reps=1,
                       tuples=1000, lines=1000, crypto=tiny_crypto)
    doc = streams.measure_all(sw, progress=False)
    wc = doc["wordcount"]
    assert [r["design"] for r in wc] == list(streams.DESIGNS)
    assert all(r["errors"] == [] and r["mbps"] > 0 for r in wc), wc
    assert wc[0]["vs_first"] == 1.0 and wc[1]["vs_first"] > 0
    assert {r["op"] for r in doc["crypto"]["rows"]} >= set(crypto.TARGETS)
    assert [(r["work"], r["cores"]) for r in doc["crypto"]["figure6"]] == [
        ("md5", 1), ("blowfish", 1)]
    text = streams.report(doc)
    assert "bolts on the NIC" in text and "aes_128_cbc_enc" in text and "Figure 6" in text
    streams.plot(json.loads(json.dumps(doc)), tmp_path / "streams.png")
    head = (tmp_path / "streams.png").read_bytes()[:8]
    assert head == b"\x89PNG\r\n\x1a\n"
