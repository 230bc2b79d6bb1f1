"""Check that every per-packet field an element reads is written before it."""

from __future__ import annotations

from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.ir.graph import topological


def written_before(g: Graph) -> dict[str, frozenset[str]]:
    """For each node, the fields some element on some path before it may write."""
    before: dict[str, frozenset[str]] = {}
    for name in topological(g):
        acc: set[str] = set()
        for e in g.in_edges(name):
            src = g.node(e.src)
            acc |= before[e.src] | (src.facts.writes if src.facts else frozenset())
        before[name] = frozenset(acc)
    return before


def check_state(g: Graph) -> Graph:
    """Raise for a field read by an element when no element before it (or itself) writes it."""
    before = written_before(g)
    for name in topological(g):
        n = g.node(name)
        if n.facts is None:
            continue
        for f in sorted(n.facts.reads - before[name] - n.facts.writes):
            raise OfflowError(
                f"element `{name}` reads per-packet field `{f}` but no element before it "
                f"writes it; write `state->{f}` in an earlier element or stop reading it"
            )
    _check_steering(g, before)
    return g


def _check_steering(g: Graph, before: dict[str, frozenset[str]]) -> None:
    """A steered segment's field is an integer field written before every packet
    enters it from another segment."""
    fields = {f.name: f for f in g.state}
    for s in g.segments:
        if not s.steer:
            continue
        f = fields.get(s.steer)
        if s.group:
            raise OfflowError(f"segment `{s.name}` is a core group and steered by "
                              f"`{s.steer}`; a group's master takes every batch: drop one")
        if f is None or f.count != 1 or not f.ctype.startswith(("uint", "int")):
            raise OfflowError(f"segment `{s.name}` is steered by `{s.steer}`, which is not an "
                              "integer per-packet field; declare it in an element's fields")
        for e in g.edges:
            if g.node(e.dst).segment != s.name or g.node(e.src).segment == s.name:
                continue
            src = g.node(e.src)
            written = before[e.src] | (src.facts.writes if src.facts else frozenset())
            if s.steer not in written:
                raise OfflowError(
                    f"segment `{s.name}` is steered by `{s.steer}`, but packets from "
                    f"`{e.src}` enter it before any element writes `state->{s.steer}`")
