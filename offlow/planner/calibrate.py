"""Calibration: each element's cost per packet on this host, measured by a short run.

The program runs with every segment on host core 0 (one thread: nothing waits for
another core, so the run's time is all work), built with element timing (the
`element_time` flags of runtime/build.toml: each body's time-stamp counter ticks,
OFL_ETIME_* in runtime/core's gen.h). From its stats: per element the packets it saw
per packet read (`visits`) and its time per visit less the timer's own cost; the
sources' time reading packets (the capture or the generator: the wire, which the model
leaves out); per segment its loop's time per packet read (the turns' time outside the
element bodies and the copies: the loop, the rings' bookkeeping) and its copy engine's
copies between its rings and its buffers (the emulated DMA, never slowed), counted
as profile-scaled emulation counts them (the run is one with `--profile host`: every
factor 1), so that each segment is charged its own loop, as the emulation stretches
it; per queue the packets and bytes it moved per packet read. Then each queue
geometry's crossing between two threads is calibrated (offlow.planner.crossing): what
the one-thread run cannot see."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dpkt

from offlow.build import compile_program
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.planner import crossing
from offlow.planner.crossing import CrossingCost
from offlow.planner.model import COPY
from offlow.runner import RunOptions, build_for, run


@dataclass(frozen=True)
class ElementCost:
    name: str
    segment: str
    kind: str  # work kind (offlow.planner.profile.WORK_KINDS)
    visits: float  # packets it sees per packet read
    ns: float  # its time per packet it sees, on this host


@dataclass(frozen=True)
class QueueCost:
    name: str
    src: str  # segments
    dst: str
    packets: float  # per packet read
    bytes: float  # per packet read (entries' used bytes, packet data included)
    batch: int = 32  # its geometry (which crossing calibration prices it)
    ring_size: int = 1024


@dataclass(frozen=True)
class Calibration:
    program: str
    packets: int  # read in the calibration run
    frame_bytes: float  # mean frame size read
    elements: tuple[ElementCost, ...]
    queues: tuple[QueueCost, ...]
    source_ns: float  # per packet read, reading it (the capture, the generator): the
    #                   wire's work, outside the model (a device's port receives packets)
    loops: tuple[tuple[str, float], ...]  # per segment, its loop (outside the element
    #                                       bodies and the reading) per packet read
    crossings: tuple[CrossingCost, ...] = ()  # per queue geometry (batch, ring size)
    copies: tuple[tuple[str, float], ...] = ()  # per segment, its copy engine's copies
    #                                             (the emulated DMA) per packet read

    @property
    def overhead_ns(self) -> float:
        """The loops and copies of all segments per packet read."""
        return sum(ns for _, ns in self.loops) + sum(ns for _, ns in self.copies)

    def with_segments(self, other: Calibration, segments: set[str]) -> Calibration:
        """This calibration with the elements' ns per visit and the loops of `segments`
        taken from `other` (a calibration of the same program under a profile's
        slow-down: for the segments a placement puts on the slowed device), and their
        copies."""
        ns = {e.name: e.ns for e in other.elements}

        def take(mine: tuple[tuple[str, float], ...],
                 theirs: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
            got = dict(theirs)
            return tuple((seg, got.get(seg, v)) if seg in segments else (seg, v)
                         for seg, v in mine)

        return replace(self, elements=tuple(
            replace(e, ns=ns.get(e.name, e.ns)) if e.segment in segments else e
            for e in self.elements), loops=take(self.loops, other.loops),
            copies=take(self.copies, other.copies))

    def crossing(self, q: QueueCost) -> CrossingCost | None:
        """The crossing calibration of queue `q`'s geometry (None: not measured)."""
        return next((c for c in self.crossings
                     if (c.batch, c.ring_size) == (q.batch, q.ring_size)), None)

    def segment_ns(self, segment: str) -> dict[str, float]:
        """Per work kind, a segment's time per packet read on this host: its elements',
        its loop's as integer work and its copies' (COPY)."""
        out: dict[str, float] = {}
        for e in self.elements:
            if e.segment == segment:
                out[e.kind] = out.get(e.kind, 0.0) + e.visits * e.ns
        loop = dict(self.loops).get(segment, 0.0)
        if loop:
            out["integer"] = out.get("integer", 0.0) + loop
        copies = dict(self.copies).get(segment, 0.0)
        if copies:
            out[COPY] = copies
        return out


def work_kind(g: Graph, node: str, overrides: dict[str, str]) -> str:
    """An element's kind of work: given (`--work NAME=KIND`, else its class's `work`),
    else `lookup` for one that uses a shared table, else `integer`."""
    return overrides.get(node) or g.node(node).work_kind


def all_on_host(g: Graph) -> list[str]:
    """The --set lines that put every segment of `g` on host core 0, one at a time."""
    out = []
    for s in g.segments:
        out += [f"{s.name}.device=host", f"{s.name}.cores=0", f"{s.name}.group=off"]
    return out


def calibrate(path: Path, settings: list[str], capture: Path | None, packets: int = 100_000,
              work: dict[str, str] | None = None, sizes: str | None = None,
              crossing_repeats: int = 3, runs: int = 3, slowed_as: str = "",
              slowed_segments: tuple[str, ...] = ()) -> Calibration:
    """Run the program of file `path` (with `settings`, then every segment on host core
    0) over `capture` (None: the synthetic generator, its frame `sizes` as `offlow run
    --sizes` takes them) for about `packets` packets, timed per element, `runs` times
    (the medians: see `median`); then calibrate its queues' crossings between threads
    (the median of `crossing_repeats` runs each; 0: not measured, the model then prices
    crossings as one thread's rings). `slowed_as`: a profile whose slow-down the one
    thread runs under, as profile-scaled emulation slows the NIC's cores (each turn
    stretched by spinning; what is measured is the work before the stretch, which the
    spins' lost caches lengthen: docs/planner.md); "": nothing slowed.
    `slowed_segments`: only those segments are slowed (the ones a placement puts on the
    device; their neighbours on the one thread are timed at this host's speed); ():
    every segment."""
    g0 = compile_program(load_program(path, settings))
    prog = load_program(path, [*settings, *all_on_host(g0)])
    # profile "host": each turn's loop counted as the emulation counts it, nothing slowed
    opts = workload_options(capture, packets, profile=slowed_as or "host", slowed="host",
                            slowed_segments=slowed_segments,
                            **({"sizes": sizes} if sizes else {}))
    b = build_for(prog, opts)
    cals = []
    for _ in range(max(1, runs)):
        res = run(b, opts)
        if not res.ok:
            raise OfflowError(f"the calibration run of `{g0.name}` failed: "
                              + "; ".join(res.errors))
        cals.append(from_stats(b.graph, res.stats, work or {}))
    cal = median(cals)
    if not crossing_repeats:
        return cal
    geometries = sorted({(q.batch, q.ring_size) for q in cal.queues})
    return replace(cal, crossings=tuple(
        crossing.measure(batch, ring, repeats=crossing_repeats) for batch, ring in geometries))


def median(cals: Sequence[Calibration]) -> Calibration:
    """Timed runs of one program over the same packets as one calibration: each
    element's ns per visit, each segment's loop and the reading the median of the
    runs' (one run's moved by ~30% from the next under this shared machine's load, and
    a row of `plan --validate` whose calibration and measured run do the very same
    work missed by as much); what the packets decide (visits, queues, frames) is the
    first run's."""
    first = cals[0]
    if len(cals) == 1:
        return first
    per_el = {e.name: statistics.median({x.name: x.ns for x in c.elements}.get(e.name, e.ns)
                                        for c in cals) for e in first.elements}
    loops = [(seg, statistics.median(dict(c.loops).get(seg, 0.0) for c in cals))
             for seg, _ in first.loops]
    copies = [(seg, statistics.median(dict(c.copies).get(seg, 0.0) for c in cals))
              for seg, _ in first.copies]
    return replace(first, elements=tuple(replace(e, ns=per_el[e.name]) for e in first.elements),
                   loops=tuple(loops), copies=tuple(copies),
                   source_ns=statistics.median(c.source_ns for c in cals))


def workload_options(capture: Path | None, packets: int, **kw: Any) -> RunOptions:
    """The run options that read about `packets` packets of the workload: `capture`'s
    frames replayed (None: the synthetic generator), and `kw` (profile, slowed, sizes):
    the calibration and the validation's measured runs read the same packets."""
    if capture is None:
        return RunOptions(count=min(packets, 20_000), loops=max(1, -(-packets // 20_000)),
                          **kw)
    return RunOptions(input=capture, loops=max(1, -(-packets // max(1, _frames(capture)))),
                      **kw)


def _frames(capture: Path) -> int:
    """The frames of a capture (to size the calibration's loops)."""
    try:
        with capture.open("rb") as f:
            return sum(1 for _ in dpkt.pcap.Reader(f))
    except (ValueError, dpkt.dpkt.Error, OSError) as e:
        raise OfflowError(f"--workload {capture}: not a readable pcap file ({e})") from None


def from_stats(g: Graph, stats: dict[str, Any], work: dict[str, str]) -> Calibration:
    """A calibration from the stats of a timed run of `g` with every segment on one
    thread (see the module's doc)."""
    cores = [c for dev in stats.values() for c in dev.get("cores", [])]
    seen: dict[str, dict[str, float]] = {}
    timer = max((c.get("timer_ns", 0.0) for c in cores), default=0.0)
    for c in cores:
        for el, v in c.get("elements", {}).items():
            acc = seen.setdefault(el, {"in": 0, "ns": 0})
            acc["in"] += v["in"]
            acc["ns"] += v.get("ns", 0)
    sources = [n.name for n in g.nodes if n.kind == "source"]
    read = sum(seen.get(s, {"in": 0})["in"] for s in sources)
    if not read:
        raise OfflowError(f"the calibration run of `{g.name}` read no packets")
    frame = sum(c["bytes_in"] for c in cores if c["segment"] in
                {g.node(s).segment for s in sources}) / read
    reading = sum(seen.get(s, {"ns": 0})["ns"] for s in sources)
    elements = []
    for n in g.nodes:
        v = seen.get(n.name)
        if not v or n.kind == "source" or not v["in"]:
            continue
        ns = max(0.0, v["ns"] / v["in"] - timer)
        elements.append(ElementCost(n.name, n.segment, work_kind(g, n.name, work),
                                    v["in"] / read, ns))
    if any("loop_ns" not in c for c in cores):
        raise OfflowError(f"the calibration run of `{g.name}` counted no loop time (it "
                          "must run with --profile host)")
    loops: dict[str, float] = {}
    copies: dict[str, float] = {}
    for c in cores:
        loops[c["segment"]] = loops.get(c["segment"], 0.0) + c["loop_ns"] / read
        copies[c["segment"]] = copies.get(c["segment"], 0.0) + c.get("copy_ns", 0) / read
    queues = []
    for q in g.queues:
        outs = [x for c in cores for x in c.get("queues", [])
                if x["queue"] == q.name and x["side"] == "out"]
        queues.append(QueueCost(q.name, q.src_segment, q.dst_segment,
                                sum(x["pushed"] for x in outs) / read,
                                sum(x.get("bytes", 0) for x in outs) / read,
                                q.batch, q.ring_size))
    return Calibration(program=g.name, packets=read, frame_bytes=frame,
                       source_ns=reading / read,
                       elements=tuple(elements), queues=tuple(queues),
                       loops=tuple(sorted(loops.items())),
                       copies=tuple(sorted(copies.items())))
