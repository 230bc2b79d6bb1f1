"""Analyse every element's C body with a real C parser (see cbody.py) and record
which per-packet fields it reads, writes and kills, and which ports it emits on."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from offlow.errors import OfflowError
from offlow.ir import BodyFacts, Graph, Node
from offlow.ir.graph import MADE_TOO_LONG
from offlow.passes.cbody import BodyError, Site, analyze_body


def analyze_bodies(g: Graph) -> Graph:
    """Attach BodyFacts to every element node (and the macros each handler defines)."""
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
                fields=fields, names=names, **_written(n),
            )
        except BodyError as err:
            raise OfflowError(str(err)) from None
        facts = BodyFacts(
            reads=frozenset(info.reads), writes=frozenset(info.writes),
            kills=frozenset(info.kills), emits=frozenset(info.emits), uses_pkt=info.uses_pkt,
            reads_ts=info.reads_ts, macros=info.macros, makes=info.makes,
        )
        drops = n.drops
        if info.makes and MADE_TOO_LONG[0] not in dict(drops):
            drops = (*drops, MADE_TOO_LONG)  # counted by the MAKE function (codegen)
        nodes.append(replace(n, facts=facts, drops=drops))
    channels = []
    for c in g.channels:  # handler bodies: parsed for their errors; they touch no packet
        h = c.handler
        try:
            info = analyze_body(h.body, element=h.name, outputs=[], fields={},
                                names=["msg", "len", *(p[0] for p in h.params),
                                       *(t[0] for t in h.tables)], **_written(h))
        except BodyError as err:
            raise OfflowError(f"channel `{c.name}`: {err}") from None
        channels.append(replace(c, handler=replace(h, facts=BodyFacts(macros=info.macros))))
    return replace(g, nodes=tuple(nodes), channels=tuple(channels))


def _written(n: Node) -> dict[str, Any]:
    """Where the node's body and helpers are written, and the helpers."""
    return {"site": Site(n.origin, n.body_line), "helpers": n.helpers,
            "helpers_site": Site(n.origin, n.helpers_line), "reasons": [r for r, _ in n.drops]}
