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
    return g
