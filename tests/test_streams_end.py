"""What the stream operators let out when a finite stream ends (their at_end): an
Aggregate's windows still open and a Resample's left tuples still waiting come out,
values worked out by hand here; a stream that brings them no tuple gives nothing; the
same with the stream split across two NIC cores before them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import Element, Program, Sink, Source
from offlow.elements.streams import Aggregate, Filter, Resample, TupleIn
from offlow.report import summarize
from offlow.runner import RunOptions, build_for, run
from offlow.streams.tuples import Tuple, generate, values_of, write_pcap
from tests import stream_oracles as ref
from tests.test_streams import LEFT, RIGHT, run_ops

# ts in ns, windows of 3 us every 1 us
STREAM = [(500_123, (1, 10), LEFT), (1_200_457, (2, -4), LEFT), (1_700_009, (1, 3), LEFT),
          (2_500_311, (2, 7), RIGHT)]
T1, T2 = 1_200_457, 2_500_311
# (ts, window start in us, group, {fn: result}, count), in the order they come out:
# [-2, 1) us is done by the tuple at 1.2 us, [-1, 2) by the one at 2.5 us; windows 0, 1
# and 2 are still open at the end and come out with the last tuple's ts (2.5 us)
RESULTS = [(T1, -2, 1, {"avg": 10, "min": 10, "max": 10}, 1),
           (T2, -1, 1, {"avg": 6, "min": 3, "max": 10}, 2),
           (T2, -1, 2, {"avg": -4, "min": -4, "max": -4}, 1),
           (T2, 0, 1, {"avg": 6, "min": 3, "max": 10}, 2),
           (T2, 0, 2, {"avg": 1, "min": -4, "max": 7}, 2),
           (T2, 1, 2, {"avg": 1, "min": -4, "max": 7}, 2),
           (T2, 1, 1, {"avg": 3, "min": 3, "max": 3}, 1),
           (T2, 2, 2, {"avg": 7, "min": 7, "max": 7}, 1)]


def dports(path: Path) -> list[int]:
    with open(path, "rb") as f:
        return [dpkt.ethernet.Ethernet(buf).data.data.dport for _, buf in dpkt.pcap.Reader(f)]


@pytest.mark.parametrize("placement", ["host", "nic"])
@pytest.mark.parametrize("fn", ["avg", "min", "max"])
def test_an_aggregates_windows_still_open_at_the_end_come_out(fn: str, placement: str,
                                                              tmp_path: Path) -> None:
    """Overlapping windows (3 us every 1 us), two groups; the end's results carry the last
    tuple's headers (its port) and ts, the others the headers of the tuple that closed
    their window."""
    op = Aggregate("open_at_end", fn=fn, attr=2, size=3_000_000, advance=1_000_000, group=1)
    got, s = run_ops(tmp_path, [op], STREAM, placement)
    want = [(ts, (g, n, *ref.i64(res[fn]), *ref.i64(start * 1_000_000)))
            for ts, start, g, res, n in RESULTS]
    assert got == want
    assert dports(tmp_path / "out.pcap") == [LEFT] + [RIGHT] * 7
    assert s["elements"]["open_at_end"]["made"] == len(RESULTS)


# left (port LEFT) and right (RIGHT) tuples, ts in us; windows of +-2 us: the left at 1 us
# is done by the right at 5 us; the lefts at 4, 6.5 and 20 us still wait at the end
RESAMPLE = [(1_000_000, (5,), LEFT), (2_000_000, (10,), RIGHT), (4_000_000, (6,), LEFT),
            (5_000_000, (20,), RIGHT), (6_500_000, (7,), LEFT), (6_000_000, (30,), RIGHT),
            (20_000_000, (8,), LEFT)]


@pytest.mark.parametrize("placement", ["host", "nic", "split"])
def test_a_resamples_left_tuples_still_waiting_at_the_end_come_out(placement: str,
                                                                    tmp_path: Path) -> None:
    """At the end the left at 4 us has the rights at 2, 5 and 6 us near (avg of 10, 20,
    30), the one at 6.5 us those at 5 and 6 us (avg 25); the one at 20 us has none and
    ends there (the semijoin)."""
    op = Resample("near", size=2_000_000, left_port=LEFT, right_port=RIGHT, attr=1)
    got, s = run_ops(tmp_path, [op], RESAMPLE, placement)
    assert got == [(1_000_000, (5, 1, 10)), (4_000_000, (6, 3, 20)), (6_500_000, (7, 2, 25))]
    assert s["elements"]["near"]["made"] == 3


@pytest.mark.parametrize("placement", ["host", "nic"])
def test_operators_that_saw_no_tuple_give_nothing_at_the_end(placement: str,
                                                             tmp_path: Path) -> None:
    stream = [(k * 1000, (k % 7, 1), (LEFT, RIGHT)[k % 2]) for k in range(50)]
    ops: list[Element] = [
        Filter("none", attr=1, op=">", value=100),
        Aggregate("agg", fn="sum", attr=2, size=5000, advance=1000, group=1),
        Resample("rs", size=5000, left_port=LEFT, right_port=RIGHT, attr=2)]
    got, s = run_ops(tmp_path, ops, stream, placement)
    assert got == []
    assert s["accounting"]["consumed"] == {"none": 50}
    assert s["accounting"]["made"] == 0


def split_run(tmp: Path, op: Element, tuples: list[tuple[Tuple, int]]) -> list[tuple[int, ...]]:
    """Source and TupleIn on NIC cores 0 and 1 (the capture split between them), `op` and
    the sink on the host: the values written out."""
    write_pcap(tmp / "in.pcap", tuples)
    p = Program("split_end")
    src, tin, out = Source("rx"), TupleIn("tin"), Sink("tx")
    src >> tin >> op >> out
    p.segment("rx", [src, tin], device="nic", cores=[0, 1])
    p.segment("app", [op, out], device="host", cores=[0])
    o = RunOptions(input=tmp / "in.pcap", output=tmp / "out.pcap", timeout=120)
    b = build_for(p, o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    s: dict[str, Any] = summarize(b.plan, res.stats)
    assert s["accounting"]["unaccounted"] == 0 and not s["accounting"]["dropped"]
    with open(tmp / "out.pcap", "rb") as f:
        return [values_of(bytes(buf)) or () for _, buf in dpkt.pcap.Reader(f)]


def test_after_two_cores_an_aggregate_gives_its_open_window_at_the_end(tmp_path: Path) -> None:
    """Over v1, 0 in every tuple: one window holds them all, whatever the order the two
    cores' rings interleave them in, and only the end closes it: one sum per group."""
    tuples = [Tuple(t.ts, (0, *t.v)) for t in generate(31, 600, values=2, low=0, high=4)]
    got = split_run(tmp_path, Aggregate("all", fn="sum", attr=3, size=1, advance=1, order=1,
                                        group=2), [(t, LEFT) for t in tuples])
    sums: Counter[int] = Counter()
    for t in tuples:
        sums[t.v[1]] += t.v[2]
    count = Counter(t.v[1] for t in tuples)
    assert sorted(got) == sorted((g, count[g], *ref.i64(sums[g]), 0, 0) for g in sums)
    assert len(got) == 5


def test_after_two_cores_a_resample_lets_every_waiting_left_tuple_out(tmp_path: Path) -> None:
    """Over v1, 0 in every tuple: no right tuple passes a left one's window, so every left
    comes out at the end with every right tuple (their count and average)."""
    tuples = [Tuple(t.ts, (0, *t.v)) for t in generate(32, 500, values=2, low=-50, high=50)]
    sides = [(t, (LEFT, RIGHT)[k % 3 == 0]) for k, t in enumerate(tuples)]
    got = split_run(tmp_path, Resample("rs", size=0, left_port=LEFT, right_port=RIGHT, attr=3,
                                       order=1), sides)
    rights = [t.v[2] for t, port in sides if port == RIGHT]
    avg = ref.trunc_div(sum(rights), len(rights))
    assert Counter(got) == Counter((*t.v, len(rights), avg) for t, port in sides
                                   if port == LEFT)
