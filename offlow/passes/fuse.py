"""Fuse each segment into one loop: which packets enter it (sources and incoming
queues), which queues leave it, the order in which its element functions are defined
so that each is declared before the elements that call it, and whether its vector
elements run their batch bodies.

A segment takes its packets in batches (a source's, or a ring's). Where it can, the
loop runs each batch in stages: every packet goes through the elements before the
vector elements and waits at the one it reaches; each vector element then runs its
batch body over the packets waiting at it; then every packet goes on, in the order the
batch brought them. That keeps the order of what leaves the segment when every path
from where packets enter it to where they leave it (a sink, a queue) crosses exactly
one vector element, and when no element of it sends copies (SEND), makes packets
(MAKE) or is a compiler-made one with code of its own (a cache's); else its elements
run per packet, and the plan says why.

A sink of a segment with sources on one core takes the packets of a source's batch that
reach it when the batch is done, in one burst (its port's checks and counters once a burst);
any other packet that reaches it (a copy, a made packet, a ring's) sends those waiting
first, so the order it writes is the order they reached it."""

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
    vector: tuple[str, ...] = ()  # the nodes that run their batch bodies, in flow order
    per_packet: str = ""  # why its elements with batch bodies run per packet, if they do
    # offload (a target that runs batches, gpu): packets per batch and batches in
    # flight, the target's defaults filled in by the plan; 0 elsewhere
    batch: int = 0
    depth: int = 0
    ordered: bool = False  # a core group whose master sends every output on, in order
    # the sinks that take the packets of a source's batch that reach them in one burst
    # when the batch is done (a segment with sources on one core: with several, a
    # packet must be written when it reaches the sink, where an element's lock may
    # order it among the other cores' packets, as the sequencer's does)
    bursts: tuple[str, ...] = ()


def fuse(g: Graph) -> tuple[SegmentPlan, ...]:
    """One plan per segment, in program order."""
    order = topological(g)
    plans = []
    for s in g.segments:
        members = [n for n in order if g.node(n).segment == s.name]
        vector, why = _vector(g, s.name, members) if s.vector else ((), "")
        if not s.vector and any(g.node(n).batch_body for n in members):
            why = "vector=off"
        sources = tuple(n for n in members if g.node(n).kind == "source")
        plans.append(SegmentPlan(
            name=s.name, device=s.device, cores=s.cores, group=s.group,
            nodes=tuple(reversed(members)), sources=sources,
            inputs=tuple(q for q in g.queues if q.dst_segment == s.name),
            outputs=tuple(q for q in g.queues if q.src_segment == s.name),
            vector=vector, per_packet=why, batch=s.batch, depth=s.depth, ordered=s.ordered,
            bursts=tuple(n for n in members if g.node(n).kind == "sink"
                         and not (g.node(n).at_end or g.node(n).end_body))
            if sources and not s.group and len(s.cores) == 1 else (),
        ))
    return tuple(plans)


def _vector(g: Graph, segment: str, members: list[str]) -> tuple[tuple[str, ...], str]:
    """The nodes of `segment` (`members`, in flow order) that run their batch bodies,
    or none and why (see the module's doc)."""
    vec = [n for n in members if g.node(n).batch_body]
    if not vec:
        return (), ""
    for n in members:
        node = g.node(n)
        facts = node.facts
        if node.prelude or node.at_end or node.end_body:
            return (), f"`{n}` is made by the compiler with code of its own"
        if facts and (facts.sends or facts.makes):
            return (), f"`{n}` " + ("makes packets (MAKE)" if facts.makes
                                    else "sends copies (SEND)")
    # the vector elements crossed on the way to each element: 0, 1 or "2 or more"
    crossed: dict[str, set[int]] = {}
    for n in members:
        node = g.node(n)
        came = ({0} if node.kind == "source" or any(g.node(e.src).segment != segment
                                                    for e in g.in_edges(n)) else set())
        for e in g.in_edges(n):
            came |= crossed.get(e.src, set()) if g.node(e.src).segment == segment else set()
        crossed[n] = {min(c + (n in vec), 2) for c in came}
        if n in vec and 2 in crossed[n]:  # (it would wait twice in one batch)
            return (), f"packets cross another vector element before `{n}`"
        leaves = node.kind == "sink" or any(g.node(e.dst).segment != segment
                                            for e in g.out_edges(n))
        if leaves and 0 in crossed[n]:
            return (), (f"packets reach `{n}`, where they leave the segment, without crossing "
                        "a vector element")
    return tuple(vec), ""


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
            key = (s.core_device(k), c)
            if s.group or key not in shared:
                if not s.group:
                    shared[key] = len(out)
                out.append(CoreThread(key[0], c, ((s.name, k),)))
            else:
                t = out[shared[key]]
                out[shared[key]] = CoreThread(t.device, t.core, (*t.loops, (s.name, k)))
    return tuple(out)
