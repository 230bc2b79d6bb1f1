"""Liveness of per-packet fields: each channel of a queue carries only the fields that
are read after it (before being overwritten) and that something before it may have
written.  The packet bytes cross only if an element after it touches `pkt` or a sink
does; the packet's timestamp only if an element after it reads `pkt->ts_ns` (or hands
`pkt` itself to other code) or a sink (which writes it) follows."""

from __future__ import annotations

from dataclasses import replace

from offlow.ir import Graph
from offlow.ir.graph import topological
from offlow.passes.state_check import written_before


def live_in(g: Graph) -> tuple[dict[str, frozenset[str]], dict[str, bool], dict[str, bool]]:
    """Fields live on entry to each node, and whether the packet bytes and the packet's
    timestamp are (a sink writes both)."""
    fields: dict[str, frozenset[str]] = {}
    data: dict[str, bool] = {}
    ts: dict[str, bool] = {}
    for name in reversed(topological(g)):
        n = g.node(name)
        out: set[str] = set()
        out_data = out_ts = False
        for e in g.out_edges(name):
            out |= fields[e.dst]
            out_data = out_data or data[e.dst]
            out_ts = out_ts or ts[e.dst]
        facts = n.facts
        assert facts is not None, "analyze_bodies must run before liveness"
        fields[name] = frozenset(facts.reads | (out - facts.kills))
        data[name] = facts.uses_pkt or n.kind == "sink" or out_data
        ts[name] = facts.reads_ts or n.kind == "sink" or out_ts
    return fields, data, ts


def liveness(g: Graph) -> Graph:
    """Fill in, for each channel of each queue, its fields and whether it carries the
    packet bytes."""
    fields, data, ts = live_in(g)
    before = written_before(g)
    by_name = {f.name: f for f in g.state}
    queues = []
    for q in g.queues:
        chans = []
        for c in q.channels:
            src = g.node(c.edge.src)
            avail = before[src.name] | (src.facts.writes if src.facts else frozenset())
            live = sorted(fields[c.edge.dst] & avail)
            chans.append(replace(c, fields=tuple(by_name[f] for f in live),
                                 carries_data=data[c.edge.dst], carries_ts=ts[c.edge.dst]))
        queues.append(replace(q, channels=tuple(chans)))
    return replace(g, queues=tuple(queues))
