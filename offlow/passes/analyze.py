"""Analyse every element's C body with a real C parser (see cbody.py) and record
which per-packet fields it reads, writes and kills, and which ports it emits on."""

from __future__ import annotations

from dataclasses import replace

from offlow.errors import OfflowError
from offlow.ir import BodyFacts, Graph
from offlow.passes.cbody import BodyError, analyze_body


def analyze_bodies(g: Graph) -> Graph:
    """Attach BodyFacts to every element node."""
    fields = {f.name: f.ctype for f in g.state}
    nodes = []
    for n in g.nodes:
        if n.kind != "element":
            nodes.append(replace(n, facts=BodyFacts(uses_pkt=True, reads_ts=True)))
            continue
        names = [p[0] for p in n.params] + [t[0] for t in n.tables]
        try:
            info = analyze_body(
                n.body, element=n.name, outputs=[p.name for p in n.outputs],
                fields=fields, names=names,
            )
        except BodyError as err:
            raise OfflowError(str(err)) from None
        facts = BodyFacts(
            reads=frozenset(info.reads), writes=frozenset(info.writes),
            kills=frozenset(info.kills), emits=frozenset(info.emits), uses_pkt=info.uses_pkt,
            reads_ts=info.reads_ts,
        )
        nodes.append(replace(n, facts=facts))
    for c in g.channels:  # handler bodies: parsed for their errors; they touch no packet
        h = c.handler
        try:
            analyze_body(h.body, element=h.name, outputs=[], fields={},
                         names=["msg", "len", *(p[0] for p in h.params),
                                *(t[0] for t in h.tables)])
        except BodyError as err:
            raise OfflowError(f"channel `{c.name}`: {err}") from None
    return replace(g, nodes=tuple(nodes))
