"""Live reads add up: a read of a running two-process run (NIC + host) never shows more
packets forwarded, dropped or consumed than read, though each process answers on its
own while its cores run (offlow/live.py, read)."""

from __future__ import annotations

from typing import Any

from offlow.dsl.loader import load_program
from offlow.runner import Run, RunOptions, build_for, progress_totals
from tests.e2e import EXAMPLE

READS = 50


def consumed(stats: dict[str, Any]) -> int:
    """The packets elements consumed (neither forwarded nor dropped)."""
    return sum(e.get("consumed", 0) for dev in stats.values() for c in dev.get("cores", [])
               for e in c.get("elements", {}).values())


def test_no_live_read_counts_more_packets_out_than_read() -> None:
    """examples/ttl_pipeline.py (the source on the NIC, the sink on the host) at full
    speed, read live 50 times while it runs: in each read, as the progress line shows
    it, forwarded + dropped + consumed <= read. (Before live reads asked twice, 14 to
    38 of 50 such reads showed the host's sink ahead of the NIC's source.)"""
    o = RunOptions(duration=60, timeout=120)
    r = Run(build_for(load_program(EXAMPLE), o, werror=True), o)
    r.start()
    shown: list[tuple[int, int]] = []  # (read, forwarded + dropped + consumed)
    try:
        while len(shown) < READS:
            stats, up = r.live_stats(timeout=10)
            assert up, "the run ended (or did not answer) before 50 reads"
            t = progress_totals(stats)
            if t["read"]:
                shown.append((t["read"], t["forwarded"] + t["dropped"] + consumed(stats)))
    finally:
        r.stop()
        res = r.wait()
    assert res.ok, res.errors
    assert shown[-1][1] > 0  # packets went through while it was read
    over = [(read, out) for read, out in shown if out > read]
    assert not over, f"{len(over)} of {READS} reads counted more out than read: {over[:5]}"
