"""`offlow bench crypto` on a tiny sweep: every operation measured beside libcrypto with
its ratio and target, the Figure 6 rows complete (the decrypted stream went through
whole: a run that drops anything is an error row), the one-core rows the baseline, the
seed's figures beside, oversubscription flagged. No timing asserted."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks import crypto

TINY = crypto.Sweep(sizes=(64, 1000), count=8, seconds=0.01, reps=2, cores=(1, 2),
                    datagrams=400, fig_reps=1)
OPS = ["md5", "md5_chains_1", "md5_chains_2", "md5_chains_4", "md5_chains_8",
       "aes_128_cbc_enc", "aes_128_cbc_dec", "bf_cbc_dec"]


def test_crypto_bench_is_well_formed(tmp_path: Path) -> None:
    rows = crypto.per_core(TINY, 0)
    assert [(r["op"], r["size"]) for r in rows] == [(op, s) for s in (64, 1000) for op in OPS]
    for r in rows:
        assert r["offlow"]["median"] > 0 and r["openssl"]["median"] > 0 and r["ratio"] > 0
        # (each side's spread says how many repetitions it summarizes)
        assert r["offlow"]["n"] == r["openssl"]["n"] == TINY.reps
    assert {r["op"]: r["target"] for r in rows if r["target"]} == crypto.TARGETS
    fig = crypto.figure6(TINY, tmp_path)
    assert [(r["work"], r["cores"]) for r in fig] == [
        ("md5", 1), ("md5", 2), ("blowfish", 1), ("blowfish", 2)]
    for r in fig:
        assert r["errors"] == [] and r["mbps"] > 0, r
        if r["cores"] + 2 > (os.cpu_count() or 1):  # work cores plus rx and the host
            assert r["oversubscribed"]
    assert [r["speedup"] for r in fig if r["cores"] == 1] == [1.0, 1.0]
    res = {"machine": {"cpu": "x", "cpus": 2, "kernel": "k"}, "features": ["aes"],
           "busy": {}, "reps": 2, "rows": rows, "figure6": fig}
    text = crypto.format_report(res)
    assert "1.98x" in text and "features: aes" in text
    assert text.count("oversubscribed") == sum(r["oversubscribed"] for r in fig)
