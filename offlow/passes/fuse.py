"""Fuse each segment into one loop: which packets enter it (sources and incoming
queues), which queues leave it, and the order in which its element functions are
defined so that each is declared before the elements that call it."""

from __future__ import annotations

from dataclasses import dataclass

from offlow.ir import Graph, Queue
from offlow.ir.graph import topological


@dataclass(frozen=True)
class SegmentPlan:
    name: str
    device: str
    cores: tuple[int, ...]
    group: bool
    nodes: tuple[str, ...]  # callees first
    sources: tuple[str, ...]
    inputs: tuple[Queue, ...]
    outputs: tuple[Queue, ...]


def fuse(g: Graph) -> tuple[SegmentPlan, ...]:
    """One plan per segment, in program order."""
    order = topological(g)
    plans = []
    for s in g.segments:
        members = [n for n in order if g.node(n).segment == s.name]
        plans.append(SegmentPlan(
            name=s.name, device=s.device, cores=s.cores, group=s.group,
            nodes=tuple(reversed(members)),
            sources=tuple(n for n in members if g.node(n).kind == "source"),
            inputs=tuple(q for q in g.queues if q.dst_segment == s.name),
            outputs=tuple(q for q in g.queues if q.src_segment == s.name),
        ))
    return tuple(plans)


@dataclass(frozen=True)
class CoreThread:
    """One thread of a device process: the (segment, core index) loops it runs. Segment
    cores placed on the same device core share one thread that gives each loop a turn
    in a round (co-scheduled: no hand-off between threads on one CPU); a core group's
    cores always have threads of their own."""

    device: str
    core: int
    loops: tuple[tuple[str, int], ...]  # (segment, index of the core in its cores)


def threads(g: Graph) -> tuple[CoreThread, ...]:
    """The threads every device process runs, in segment order."""
    out: list[CoreThread] = []
    shared: dict[tuple[str, int], int] = {}
    for s in g.segments:
        for k, c in enumerate(s.cores):
            key = (s.device, c)
            if s.group or key not in shared:
                if not s.group:
                    shared[key] = len(out)
                out.append(CoreThread(s.device, c, ((s.name, k),)))
            else:
                t = out[shared[key]]
                out[shared[key]] = CoreThread(t.device, t.core, (*t.loops, (s.name, k)))
    return tuple(out)
