"""Check ports: every port connected, packet types compatible, at least one source."""

from __future__ import annotations

from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.ir.types import port_types_compatible


def check_ports(g: Graph) -> Graph:
    """Reject unconnected ports and type mismatches, naming the element, port and fix."""
    if not any(n.kind == "source" for n in g.nodes):
        raise OfflowError(
            f"program `{g.name}` has no Source; packets must enter somewhere: add Source() "
            "and wire it to the first element"
        )
    connected_in = {(e.dst, e.dst_port) for e in g.edges}
    connected_out = {(e.src, e.src_port) for e in g.edges}
    for n in g.nodes:
        for p in n.inputs:
            if (n.name, p.name) not in connected_in:
                raise OfflowError(
                    f"element `{n.name}` input `{p.name}` is not connected; "
                    "connect it or remove the element"
                )
        for p in n.outputs:
            if (n.name, p.name) not in connected_out:
                raise OfflowError(
                    f"element `{n.name}` output `{p.name}` is not connected; connect it "
                    "(to a Sink or Discard() if its packets are not wanted) or remove the port"
                )
    for e in g.edges:
        out_t = g.node(e.src).output(e.src_port).type
        in_t = g.node(e.dst).input(e.dst_port).type
        if not port_types_compatible(out_t, in_t):
            raise OfflowError(
                f"type mismatch: `{e.src}.{e.src_port}` carries `{out_t}` packets but "
                f"`{e.dst}.{e.dst_port}` takes `{in_t}`; declare the input as one of "
                f"{', '.join(f'`{t}`' for t in types_fed(out_t))} (the types `{out_t}` "
                f"feeds), or put an element between them whose output is `{in_t}`"
            )
    return g


def types_fed(t: str) -> list[str]:
    """The input types a packet of type `t` may enter, most specific first (`ip.v4`:
    `ip.v4`, `ip`, `any`): port_types_compatible's rule spelt out."""
    parts = t.split(".")
    return [".".join(parts[:k]) for k in range(len(parts), 0, -1)] + (["any"] if t != "any"
                                                                      else [])
