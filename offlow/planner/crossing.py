"""Calibrating a queue crossing between two threads (two processes: the host and the
emulated NIC), as the elements are calibrated: a short measured run on this machine.

The element calibration runs every segment on one thread, where a ring's entries stay
in that core's cache. Across two CPUs each entry's cache lines move from the producer's
core to the consumer's, and the doorbells and ownership flags bounce between them: the
producer and the consumer each pay more per entry, growing with its bytes. The probe
is the smallest program with one crossing (a source, a queue of its packets, a sink),
run at a few frame sizes twice: both segments on host core 0 (one thread), then the
source on the NIC and the sink on the host. Each side's busy CPU time per packet in the
split run, less the same side's in the one-thread run, is that side's extra cost of the
crossing; the median of `repeats` runs of each is taken, and a line a + b * bytes is
fitted per side (least squares) so any entry size can be priced."""

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
    on each end (this host's ns, integer work), at the batch and ring size measured."""

    batch: int
    ring_size: int
    push: Line  # the producer's extra
    pop: Line  # the consumer's extra
    points: tuple[tuple[float, float, float], ...]  # measured: (bytes, push ns, pop ns)


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


def sides(stats: dict[str, Any]) -> tuple[float, float, float]:
    """From a probe run's stats: the entry bytes, and the busy CPU ns per packet of the
    producer (its reading of the packets left out) and of the consumer."""
    cores = {c["segment"]: c for d in stats.values() for c in d.get("cores", [])}
    a, b = cores["a"], cores["b"]
    n = a["pkts_in"]
    if not n or not b["pkts_in"]:
        raise OfflowError("the crossing calibration moved no packets")
    out = next(q for q in a.get("queues", []) if q["side"] == "out")
    reading = a.get("elements", {}).get("rx", {}).get("ns", 0)
    return out["bytes"] / out["pushed"], (a["busy_cpu_ns"] - reading) / n, b["busy_cpu_ns"] / n


def measure(batch: int = 32, ring_size: int = 1024, packets: int = 200_000,
            repeats: int = 3, sizes: Sequence[int] = SIZES) -> CrossingCost:
    """Probe runs at each frame size, one thread then split, `repeats` times each
    (alternating, so a neighbour's burst hits both), medians fitted per side."""
    if repeats < 1 or packets < 1_000:
        raise OfflowError("the crossing calibration needs at least one repeat of 1000 "
                          "packets or more")
    builds = {}
    points = []
    for size in sizes:
        # profile "host": busy CPU time counted, nothing slowed
        opts = RunOptions(count=min(packets, 20_000), loops=max(1, -(-packets // 20_000)),
                          sizes=f"{size}:1", profile="host")
        runs: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
        for _ in range(repeats):
            for split in (False, True):
                if (split, size) not in builds:
                    builds[(split, size)] = build_for(probe(split, batch, ring_size), opts)
                res = run(builds[(split, size)], opts)
                if not res.ok:
                    raise OfflowError("the crossing calibration run failed: "
                                      + "; ".join(res.errors))
                runs[split].append(sides(res.stats))
        nbytes = statistics.median(r[0] for r in runs[True])
        med = {s: (statistics.median(r[1] for r in runs[s]),
                   statistics.median(r[2] for r in runs[s])) for s in runs}
        points.append((nbytes, med[True][0] - med[False][0], med[True][1] - med[False][1]))
    return CrossingCost(batch, ring_size, fit([(x, p) for x, p, _ in points]),
                        fit([(x, q) for x, _, q in points]), tuple(points))
