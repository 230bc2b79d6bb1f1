"""Calibrating a queue crossing between two threads (two processes: the host and the
emulated NIC), as the elements are calibrated: a short measured run on this machine.

The element calibration runs every segment on one thread, where a ring's entries stay
in that core's cache. Across two CPUs each entry's cache lines move from the producer's
core to the consumer's, and the doorbells and ownership flags bounce between them: the
producer and the consumer each pay more per entry, growing with its bytes. The probe
is the smallest program with one crossing (a source, a queue of its packets, a sink),
run at a few frame sizes twice: both segments on host core 0 (one thread), then the
source on the NIC and the sink on the host (CPUs 1 and 0: two CPUs, as a split run
has them). Each side's time per packet in the split run (its work and its loop and
rings, before any stretch; apart from them its copy engine's copies, which are never
stretched), less the same side's in the one-thread run, is that side's extra cost of
the crossing, the loop's and the copies' apart: the median over `repeats` rounds of
the split run less the one-thread run of the same round (so that both see the machine
alike); a line a + b * bytes is fitted to each (least squares) so any entry size can
be priced. For
`plan --validate` the split runs under the device's profile (measure's `profile`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from offlow import Program, Sink, Source
from offlow.errors import OfflowError
from offlow.runner import RunOptions, build_for, run

SIZES = (64, 512, 1500)  # the probe's frame sizes


@dataclass(frozen=True)
class Line:
    """ns per entry = at0 + per_byte * bytes (never below 0)."""

    at0: float
    per_byte: float

    def ns(self, nbytes: float) -> float:
        return max(0.0, self.at0 + self.per_byte * nbytes)


@dataclass(frozen=True)
class CrossingCost:
    """The extra cost per entry of a queue whose two ends are on different threads,
    on each end (this host's ns: its loop's, integer work, and its copies', the emulated
    DMA's), at the batch and ring size measured."""

    batch: int
    ring_size: int
    push: Line  # the producer's extra, its loop's
    pop: Line  # the consumer's extra, its loop's
    # measured: (bytes, push ns, pop ns, push copies ns, pop copies ns)
    points: tuple[tuple[float, float, float, float, float], ...]
    push_copy: Line = Line(0.0, 0.0)  # the producer's extra, its copies'
    pop_copy: Line = Line(0.0, 0.0)


def fit(points: Sequence[tuple[float, float]]) -> Line:
    """The least-squares line through (x, y) points (a flat line through one point)."""
    if not points:
        raise ValueError("no points to fit")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return Line(my, 0.0)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return Line(my - b * mx, b)


def probe(split: bool, batch: int, ring_size: int) -> Program:
    """A source, a queue of its packets and a sink; `split`: the source on the NIC."""
    p = Program("xprobe", batch=batch, ring_size=ring_size)
    src, out = Source("rx"), Sink("tx")
    src >> out
    p.segment("a", [src], device="nic" if split else "host", cores=[0])
    p.segment("b", [out], device="host", cores=[0])
    return p


def sides(stats: dict[str, Any]) -> tuple[float, float, float, float, float]:
    """From a probe run's stats: the entry bytes, the ns per packet of the producer and
    of the consumer before any stretch (their elements' work and their loops and rings:
    the busy time less the reading of the packets, the copies and the spins), and the
    ns per packet of the producer's and the consumer's copies."""
    cores = {c["segment"]: c for d in stats.values() for c in d.get("cores", [])}
    a, b = cores["a"], cores["b"]
    n = a["pkts_in"]
    if not n or not b["pkts_in"]:
        raise OfflowError("the crossing calibration moved no packets")
    out = next(q for q in a.get("queues", []) if q["side"] == "out")
    return (out["bytes"] / out["pushed"], (a.get("work_ns", 0) + a["loop_ns"]) / n,
            (b.get("work_ns", 0) + b["loop_ns"]) / n, a.get("copy_ns", 0) / n,
            b.get("copy_ns", 0) / n)


# The probe's runs: one thread not slowed, split (the source's end on the NIC, under
# the profile as a run is), and one thread under the profile's slow-down.
ONE, SPLIT, ONE_SLOWED = "one", "split", "one slowed"


def measure(batch: int = 32, ring_size: int = 1024, packets: int = 200_000,
            repeats: int = 5, sizes: Sequence[int] = SIZES, profile: str = "") -> CrossingCost:
    """Probe runs at each frame size, one thread then split, `repeats` times each
    (alternating, so a neighbour's burst hits both), medians fitted per side.
    `profile`: the split runs with the NIC slowed to it and its link emulated, as a
    profile-scaled run of a program has its crossings (a slowed producer feeds its
    consumer at its own pace); the producer's extra is then taken over the one thread
    slowed alike (as the device's segments are calibrated for --validate), the
    consumer's over the one thread not slowed (the host's segments'); the copies' extra
    of each side over the one thread not slowed (copies are never slowed)."""
    if repeats < 1 or packets < 1_000:
        raise OfflowError("the crossing calibration needs at least one repeat of 1000 "
                          "packets or more")
    kinds = (ONE, SPLIT, ONE_SLOWED) if profile else (ONE, SPLIT)
    builds = {}
    points = []
    for size in sizes:
        base = {"count": min(packets, 20_000), "loops": max(1, -(-packets // 20_000)),
                "sizes": f"{size}:1"}
        # profile "host": each side's time counted, nothing slowed
        opts = {ONE: RunOptions(**base, profile="host"),
                SPLIT: RunOptions(**base, profile=profile or "host"),
                ONE_SLOWED: RunOptions(**base, profile=profile or "host", slowed="host",
                                       slowed_segments=("a",))}
        runs: dict[str, list[tuple[float, ...]]] = {k: [] for k in kinds}
        for _ in range(repeats):
            for kind in kinds:
                if (kind, size) not in builds:
                    builds[(kind, size)] = build_for(probe(kind == SPLIT, batch, ring_size),
                                                     opts[kind])
                res = run(builds[(kind, size)], opts[kind])
                if not res.ok:
                    raise OfflowError("the crossing calibration run failed: "
                                      + "; ".join(res.errors))
                runs[kind].append(sides(res.stats))
        nbytes = statistics.median(r[0] for r in runs[SPLIT])
        # each repeat's split less the one-thread runs beside it in time, then the
        # median: this machine's speed moves by a quarter between seconds, and a
        # difference of medians taken over a minute once made 1520 B +207 ns a side
        pushes = [s[1] - o[1] for s, o in zip(runs[SPLIT], runs[ONE_SLOWED if profile else ONE],
                                              strict=True)]
        pops = [s[2] - o[2] for s, o in zip(runs[SPLIT], runs[ONE], strict=True)]
        copies = [[s[k] - o[k] for s, o in zip(runs[SPLIT], runs[ONE], strict=True)]
                  for k in (3, 4)]
        points.append((nbytes, statistics.median(pushes), statistics.median(pops),
                       statistics.median(copies[0]), statistics.median(copies[1])))
    return CrossingCost(batch, ring_size, *(fit([(p[0], p[k]) for p in points]) for k in (1, 2)),
                        tuple(points), *(fit([(p[0], p[k]) for p in points]) for k in (3, 4)))
