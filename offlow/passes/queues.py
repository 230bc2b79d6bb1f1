"""Insert a queue on every edge that crosses between segments."""

from __future__ import annotations

from dataclasses import replace

from offlow.ir import Graph, Queue


def insert_queues(g: Graph) -> Graph:
    """Each crossing edge gets a Queue; which fields it carries is decided by liveness."""
    queues = []
    for e in g.edges:
        a, b = g.node(e.src).segment, g.node(e.dst).segment
        if a == b:
            continue
        crosses = g.segment(a).device != g.segment(b).device
        name = f"{e.src}_{e.src_port}__{e.dst}".replace(".", "_")
        queues.append(Queue(name=name, edge=e, src_segment=a, dst_segment=b,
                            crosses_device=crosses, ring_size=g.ring_size, batch=g.batch))
    return replace(g, queues=tuple(queues))
