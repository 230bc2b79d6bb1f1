"""Analyse every element's C body with a real C parser (see cbody.py) and record
which per-packet fields it reads, writes and kills, and which ports it emits on."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from offlow.errors import OfflowError
from offlow.ir import BodyFacts, Graph, Node
from offlow.ir.graph import FAILED, MADE_TOO_LONG, MAX_DROP_REASONS, NO_OUTPUT
from offlow.passes.cbody import BodyError, BodyInfo, Site, analyze_body
from offlow.passes.mapvalue import MapLocal


def analyze_bodies(g: Graph) -> Graph:
    """Attach BodyFacts to every element node (and the macros each handler defines)."""
    fields = {f.name: f.ctype for f in g.state}
    values = {t.name: t.map_value for t in g.shared if t.is_map}
    keys = {t.name: t.map_key for t in g.shared if t.is_map}
    records = {t.name: t.map_record for t in g.shared if t.is_map}
    nodes = []
    for n in g.nodes:
        if n.kind != "element":
            nodes.append(replace(n, facts=BodyFacts(uses_pkt=True, reads_ts=True)))
            continue
        names = [p[0] for p in n.params] + [t[0] for t in n.tables]
        args = {"element": n.name, "outputs": [p.name for p in n.outputs], "fields": fields,
                "names": names, "tables": [t[0] for t in n.tables],
                "maps": {local: MapLocal(t, values[t], keys[t], records[t]) for local, t in n.tables
                         if t in values}}
        try:
            # (an element with only a batch body runs it on one packet where needed)
            info = (analyze_body(n.body, **args, **_written(n))
                    if n.body.strip() or not n.batch_body else None)
            batch = (analyze_body(n.batch_body, **args, **_written(n, batch=True), vector=True)
                     if n.batch_body else None)
            end = analyze_body(n.end_body, **args, **_written(n)) if n.end_body else None
        except BodyError as err:
            raise OfflowError(str(err)) from None
        facts = replace(_facts(info, batch), **_adds(info, batch, end))
        if end is not None:
            if end.fails:
                raise OfflowError(f"element `{n.name}`: FAIL() is for a body given a packet; "
                                  "its at_end code has none (a core's failure there is "
                                  "not supported yet)")
            if end.sends or end.writes or end.drops or end.emits - end.makes:
                raise OfflowError(f"element `{n.name}`: its at_end code has no packet to "
                                  "emit, send, drop or change (EMIT, SEND, DROP, CONSUME, "
                                  "writing the state): make new ones with MAKE(port, p), "
                                  "or return to send nothing")
            facts = replace(facts, makes=facts.makes | end.makes)
        drops = n.drops
        if facts.makes and MADE_TOO_LONG[0] not in dict(drops):
            drops = (*drops, MADE_TOO_LONG)  # counted by the MAKE function (codegen)
        if facts.fails:
            if FAILED[0] in dict(drops):
                raise OfflowError(f"element `{n.name}`: its drop reason `{FAILED[0]}` is the "
                                  "one FAIL() counts its packet under: name yours otherwise")
            drops = (*drops, FAILED)  # FAIL's packet (body.h)
        if len(n.outputs) > 1 and (batch is not None or info is None
                                   or info.may_fall_through):
            if NO_OUTPUT[0] in dict(drops):
                raise OfflowError(f"element `{n.name}`: its drop reason `{NO_OUTPUT[0]}` is "
                                  "the one the compiler counts a packet under whose body "
                                  "chose no output: name yours otherwise")
            drops = (*drops, NO_OUTPUT)  # a body that chose nothing (codegen)
            if batch is None and info is not None and not info.sends:
                facts = replace(facts, unchosen_at=info.end_at or "its body")
        if len(drops) > MAX_DROP_REASONS:  # (a reason's number is a byte of the mask)
            added = ", ".join(r for r, _ in drops[len(n.drops):])
            raise OfflowError(f"element `{n.name}`: {len(drops)} drop reasons with those the "
                              f"compiler adds ({added}); at most {MAX_DROP_REASONS}")
        nodes.append(replace(n, facts=facts, drops=drops,
                             batch_facts=_facts(batch, None) if batch else None))
    channels = []
    for c in g.channels:  # handler bodies: parsed for their errors; they touch no packet
        h = c.handler
        try:
            info = analyze_body(h.body, element=h.name, outputs=[], fields={},
                                names=["msg", "len", *(p[0] for p in h.params),
                                       *(t[0] for t in h.tables)], **_written(h))
        except BodyError as err:
            raise OfflowError(f"channel `{c.name}`: {err}") from None
        if info.fails:
            raise OfflowError(f"channel `{c.name}`: its handler `{h.name}` cannot FAIL(): it "
                              "has no packet and runs beside the cores (answer with an error "
                              "instead)")
        channels.append(replace(c, handler=replace(h, facts=BodyFacts(macros=info.macros))))
    return replace(g, nodes=tuple(nodes), channels=tuple(channels))


def _facts(one: BodyInfo | None, batch: BodyInfo | None) -> BodyFacts:
    """What an element does to the state: its per-packet body's facts (else its batch
    body's), with what its batch body reads, writes and emits added (the compiler runs
    either, so queues carry what both need); a field the batch body reads is not
    killed."""
    first = one or batch
    assert first is not None
    other = batch if one is not None else None
    none: frozenset[str] = frozenset()
    return BodyFacts(
        reads=frozenset(first.reads | (other.reads if other else none)),
        writes=frozenset(first.writes | (other.writes if other else none)),
        kills=frozenset(first.kills - (other.reads if other else none)),
        emits=frozenset(first.emits | (other.emits if other else none)),
        uses_pkt=first.uses_pkt or bool(other and other.uses_pkt),
        reads_ts=first.reads_ts or bool(other and other.reads_ts),
        macros=first.macros, makes=first.makes, sends=first.sends,
        fails=first.fails or bool(other and other.fails))


def _adds(*bodies: BodyInfo | None) -> dict[str, Any]:
    """The shared arrays the element's bodies only add to: added to in one, used
    otherwise in none; every add builtin they call; the arrays any of them updates
    with a plain read-modify-write."""
    got = [b for b in bodies if b is not None]
    other = frozenset().union(*(b.table_other for b in got))
    return {"adds_only": frozenset().union(*(b.adds_only for b in got)) - other,
            "atomic_adds": frozenset().union(*(b.atomic_adds for b in got)),
            "plain_updates": frozenset().union(*(b.plain_updates for b in got)),
            "plain_via": frozenset().union(*(b.plain_via for b in got)),
            "plain_at": frozenset().union(*(b.plain_at for b in got)),
            "unseen_calls": frozenset().union(*(b.unseen_calls for b in got)),
            "unseen_stores": frozenset().union(*(b.unseen_stores for b in got))}


def _written(n: Node, batch: bool = False) -> dict[str, Any]:
    """Where the node's body (or batch body) and helpers are written, and the helpers."""
    return {"site": Site(n.origin, n.batch_line if batch else n.body_line),
            "helpers": n.helpers, "helpers_site": Site(n.origin, n.helpers_line),
            "reasons": [r for r, _ in n.drops]}
