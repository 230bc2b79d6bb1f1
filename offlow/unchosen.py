"""Packets a body lets go without a choice.

An element of several outputs has no default one: a packet its per-packet body ends
without choosing anything for (no EMIT, SEND, DROP or CONSUME on the path it took) is
dropped, counted under `no_output` (passes/analyze.py gives the element that reason).
That is seldom what its writer meant: a body that forgot its EMIT drops every packet,
and the run only says so afterwards. `offlow explain` and `offlow run` warn of each
such element, naming where its body may end."""

from __future__ import annotations

from offlow.ir import Graph
from offlow.ir.graph import NO_OUTPUT


def unchosen_outputs(g: Graph) -> list[str]:
    """A warning for each element of several outputs whose per-packet body may end
    having chosen no output (in the graph's order)."""
    out = []
    for n in g.nodes:
        at = n.facts.unchosen_at if n.facts else None
        if at is None:
            continue
        ports = [p.name for p in n.outputs]
        where = "its body is empty" if at == "its body" else \
            f"its body may reach its end ({at}) without choosing an output"
        out.append(f"element `{n.name}`: {where}, and an element of several outputs "
                   f"({', '.join(ports)}) has no default one: such packets are dropped, "
                   f"counted as `{NO_OUTPUT[0]}`; end the body with EMIT({ports[0]}) "
                   "(or EMIT another output), or with DROP() or DROP_WHY(reason) where "
                   "dropping them is meant")
    return out
