"""Insert the logical queues: every edge from segment A to segment B is a channel of
one queue A->B, mapped onto `instances` rings per producer core (Program.queue)."""

from __future__ import annotations

from dataclasses import replace

from offlow.errors import OfflowError
from offlow.ir import Graph, Queue, QueueChannel, QueueSpec
from offlow.ir.graph import ENQUEUE_MODES, MAX_INSTANCES
from offlow.passes.state_check import written_before


def queue_name(src_segment: str, dst_segment: str) -> str:
    """The name of the logical queue between two segments (`--set A->B.instances=4`)."""
    return f"{src_segment}->{dst_segment}"


def consumer_cores(g: Graph, segment: str) -> int:
    """Cores that take batches from a queue into `segment`: every core of a
    data-parallel segment, only the master of a core group."""
    dst = g.segment(segment)
    return 1 if dst.group else len(dst.cores)


def insert_queues(g: Graph) -> Graph:
    """One Queue per pair of segments with edges between them, its channels in edge
    order; the mapping from the program's queue settings, else the defaults (one
    instance per consumer core, steered like the destination segment, blocking)."""
    pairs: dict[tuple[str, str], list[QueueChannel]] = {}
    for e in g.edges:
        a, b = g.node(e.src).segment, g.node(e.dst).segment
        if a != b:
            pairs.setdefault((a, b), []).append(QueueChannel(e))
    specs = _specs(g, pairs)
    queues = []
    for (a, b), chans in pairs.items():
        spec = specs.get((a, b), QueueSpec(a, b))
        steer = g.segment(b).steer if spec.steer is None else spec.steer
        queues.append(Queue(
            name=queue_name(a, b), src_segment=a, dst_segment=b,
            crosses_device=g.segment(a).device != g.segment(b).device,
            channels=tuple(chans), ring_size=g.ring_size, batch=g.batch,
            instances=spec.instances or consumer_cores(g, b), steer=steer,
            enqueue=spec.enqueue))
    g = replace(g, queues=tuple(queues))
    _check_steer(g, specs)
    return g


def _specs(g: Graph, pairs: dict[tuple[str, str], list[QueueChannel]]
           ) -> dict[tuple[str, str], QueueSpec]:
    """The program's queue settings by segment pair, checked."""
    segments = {s.name for s in g.segments}
    out: dict[tuple[str, str], QueueSpec] = {}
    for s in g.queue_specs:
        name = queue_name(s.src_segment, s.dst_segment)
        for seg in (s.src_segment, s.dst_segment):
            if seg not in segments:
                raise OfflowError(f"queue `{name}`: no segment `{seg}`; segments: "
                                  f"{', '.join(sorted(segments))}")
        if (s.src_segment, s.dst_segment) not in pairs:
            raise OfflowError(f"queue `{name}`: no element of segment `{s.src_segment}` sends "
                              f"to segment `{s.dst_segment}`, so there is no such queue")
        if not 0 <= s.instances <= MAX_INSTANCES:
            raise OfflowError(f"queue `{name}`: instances must be 1..{MAX_INSTANCES}, "
                              f"not {s.instances}")
        if s.enqueue not in ENQUEUE_MODES:
            raise OfflowError(f"queue `{name}`: enqueue `{s.enqueue}`: expected "
                              f"{' or '.join(ENQUEUE_MODES)}")
        out[(s.src_segment, s.dst_segment)] = s
    return out


def _check_steer(g: Graph, specs: dict[tuple[str, str], QueueSpec]) -> None:
    """A queue's own steering field (a segment's is checked by check_state) is an
    integer per-packet field written before every channel's packets enter the queue."""
    fields = {f.name: f for f in g.state}
    before = written_before(g)
    for q in g.queues:
        spec = specs.get((q.src_segment, q.dst_segment))
        if spec is None or not spec.steer:
            continue
        f = fields.get(q.steer)
        if f is None or f.count != 1 or not f.ctype.startswith(("uint", "int")):
            raise OfflowError(f"queue `{q.name}` is steered by `{q.steer}`, which is not an "
                              "integer per-packet field; declare it in an element's fields")
        for c in q.channels:
            src = g.node(c.edge.src)
            written = before[src.name] | (src.facts.writes if src.facts else frozenset())
            if q.steer not in written:
                raise OfflowError(
                    f"queue `{q.name}` is steered by `{q.steer}`, but packets from "
                    f"`{c.edge}` enter it before any element writes `state->{q.steer}`")
