"""Reject loops: inside a segment a loop would recurse forever in the fused code
(it needs a queue); loops through queues are not run by the runtime yet."""

from __future__ import annotations

from offlow.errors import OfflowError
from offlow.ir import Graph


def _find_cycle(succ: dict[str, list[str]]) -> list[str] | None:
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        color[v] = 1
        stack.append(v)
        for w in succ.get(v, []):
            if color.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in color and (found := visit(w)):
                return found
        stack.pop()
        color[v] = 2
        return None

    for v in succ:
        if v not in color and (found := visit(v)):
            return found
    return None


def check_loops(g: Graph) -> Graph:
    """Raise if the element graph (or the segment graph) has a cycle."""
    inner: dict[str, list[str]] = {n.name: [] for n in g.nodes}
    for e in g.edges:
        if g.node(e.src).segment == g.node(e.dst).segment:
            inner[e.src].append(e.dst)
    if cycle := _find_cycle(inner):
        seg = g.node(cycle[0]).segment
        raise OfflowError(
            f"loop with no queue in segment `{seg}`: {' -> '.join(cycle)}; move part of the "
            "loop into another segment so a queue breaks it"
        )
    segs: dict[str, list[str]] = {s.name: [] for s in g.segments}
    for e in g.edges:
        a, b = g.node(e.src).segment, g.node(e.dst).segment
        if a != b:
            segs[a].append(b)
    if cycle := _find_cycle(segs):
        raise OfflowError(
            f"segments form a cycle: {' -> '.join(cycle)}; the runtime cannot yet end a run "
            "whose queues form a loop, so restructure the program as a pipeline"
        )
    return g
