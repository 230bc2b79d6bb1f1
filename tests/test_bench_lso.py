"""`offlow bench lso` runs (a tiny sweep) and its tables hold what they say: offlow and
rte_gso made the same packets, every row has its rates and ratio, the instruction
counts of every message kind, the clock table, the verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import lso
from offlow.paths import DATA

TINY = lso.Sweep(sends=2, reps=1, min_time=0.01, move_sizes=(1500,), count_sends=1)


def test_the_clock_formula_gives_the_seeds_own_figures() -> None:
    """The seed: 8,127,438 packets/s of 1500 B at 100 Gb/s, and 148 MHz for it (Table
    3) is about 18 RISC instructions a packet, its Table 2's 14-23."""
    assert lso.clock_mhz(1.0, 100, 1500) == pytest.approx(8.127438, rel=1e-6)
    assert 14 <= 148 / lso.clock_mhz(1.0, 100, 1500) <= 23
    assert 14 <= 423 / lso.clock_mhz(1.0, 100, 512) <= 25


@pytest.mark.skipif(not (DATA / "bgp-full-table.txt.gz").exists(),
                    reason=f"shared data not found in {DATA}")
def test_tiny_bench_fills_every_table(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lso, "QUICK", TINY)
    doc = lso.run(quick=True, out_json=tmp_path / "lso.json")
    assert json.loads((tmp_path / "lso.json").read_text()) == json.loads(json.dumps(doc))
    rows = doc["rates"]
    assert {(r["proto"], r["mtu"], r["checksums"], r["move"]) for r in rows} == {
        (p, m, c, mv) for p in lso.PROTOS for m in lso.MTUS
        for c in ("offloaded", "computed") for mv in ("place", "pio")}
    for r in rows:
        assert r["offlow_mpps"]["median"] > 0 and r["offlow_gbps"]["median"] > 0
        assert r["offlow_mpps"]["n"] == r["offlow_gbps"]["n"] == TINY.reps
        if "ratio" in r:   # DPDK here: both cut the same packets
            assert r["same_count"] and r["ratio"]["median"] > 0
    mv = doc["move"]["rows"]
    assert [r["mtu"] for r in mv] == [1500] and mv[0]["dma_mpps"]["median"] > 0
    ins = doc["instructions"]
    if "skipped" not in ins:
        for p in lso.PROTOS:
            for mtu in lso.MTUS:
                kinds = ins[p]["in place"][mtu]["kinds"]
                assert all(kinds[k] and kinds[k] > 0 for k in lso.KINDS), (p, mtu, kinds)
                assert ins[p]["pio, checksums"][mtu]["per_packet"] > \
                    ins[p]["in place"][mtu]["per_packet"] > 0
    text = capsys.readouterr().out
    assert "CPU features:" in text and "seed 1500" in text and "seed MHz 100G" in text
    assert sum(line.startswith("target") for line in text.splitlines()) == 4
