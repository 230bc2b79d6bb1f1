"""Expand the caching construct (Program.cache) into hit and miss paths.

A cache around the region first..last becomes two elements on the device of the
elements around the region, where the cache table lives:

    X -> first .. last -> Y      becomes      X -> lookup -miss-> first .. last -> update -> Y
                                                      \\-hit-------------------------------> Y

`lookup` answers hits in place and sends misses through the region with a ticket
(a per-packet field) that tells `update` what to do with the reply. Under write-back,
`lookup` also sends packets of its own down the miss path (the written entries it
evicts): a function in its prelude gives each one the state of the request, its own
key hash in the steering field (so it reaches the same core as later requests for
that key, in order) and the ticket of made packets; when its segment is done (the
run stops), its end code writes back what is still written in the cache
(`finish_fn`), before the queue to the region closes.
"""

from __future__ import annotations

from dataclasses import replace

from offlow.errors import OfflowError
from offlow.ir import Cache, Edge, Field, Graph, Node, PortSpec, SharedTable
from offlow.ir.types import cname


def expand_caches(g: Graph) -> Graph:
    """Add every cache's lookup and update elements to `g` and wire them around its
    region (the caches stay in the graph, for explain)."""
    for c in g.caches:
        g = _expand(g, c)
    return g


def _expand(g: Graph, c: Cache) -> Graph:
    first, last = g.node(c.first), g.node(c.last)
    where = f"cache `{c.name}`"
    if len(first.inputs) != 1:
        raise OfflowError(f"{where}: the region's first element `{first.name}` must have one "
                          f"input, not {len(first.inputs)}")
    if len(last.outputs) != 1:
        raise OfflowError(f"{where}: the region's last element `{last.name}` must have one "
                          f"output, not {len(last.outputs)}")
    ins = g.in_edges(first.name)
    outs = g.out_edges(last.name)
    if not ins:
        raise OfflowError(f"{where}: nothing is wired into `{first.name}`")
    if len(outs) != 1:
        raise OfflowError(f"{where}: `{last.name}.{last.outputs[0].name}` must go to one "
                          f"element, not {len(outs)}")
    before = {g.node(e.src).segment for e in ins}
    if len(before) != 1:
        raise OfflowError(f"{where}: `{first.name}` is fed from several segments "
                          f"({', '.join(sorted(before))}); the lookup needs one")
    out = outs[0]
    seg_in, seg_out = before.pop(), g.node(out.dst).segment
    dev_in, dev_out = g.segment(seg_in).device, g.segment(seg_out).device
    if dev_in != dev_out:
        raise OfflowError(
            f"{where}: its lookup would run in segment `{seg_in}` ({dev_in}) and its update in "
            f"`{seg_out}` ({dev_out}); the elements before and after the region must be on "
            "one device, where the cache lives")
    lk, up, ticket = f"{c.name}_lookup", f"{c.name}_update", f"{c.name}_ticket"
    for name in (lk, up):
        if name in g.by_name:
            raise OfflowError(f"{where}: an element is already named `{name}`")
    if any(f.name == ticket for f in g.state):
        raise OfflowError(f"{where}: a per-packet field is already named `{ticket}`")
    if any(t.name == c.name for t in g.shared):
        raise OfflowError(f"{where}: a table is already named `{c.name}`")
    wb = c.policy == "write_back"
    if wb and not any(f.name == c.ops.steer for f in g.state):
        raise OfflowError(f"{where}: write-back steers the entries it evicts by the "
                          f"per-packet field `{c.ops.steer}`, which no element declares")
    if wb and c.ops.made and not any(f.name == c.ops.made for f in g.state):
        raise OfflowError(f"{where}: write-back marks the entries it writes back with the "
                          f"per-packet field `{c.ops.made}`, which no element in the region "
                          "declares (the region must tell them from clients' requests)")
    in_t, out_t = first.inputs[0].type, last.outputs[0].type
    lookup = Node(
        name=lk, kind="element", cls="CacheLookup", inputs=(PortSpec("inp", in_t),),
        outputs=(PortSpec("hit", out_t), PortSpec("miss", in_t)),
        body=_lookup_body(c, lk, ticket, wb), tables=(("cache", c.name),),
        segment=seg_in, origin=f"cache {c.name} ({c.policy})",
        prelude=_emit_fn(c, lk, ticket) if wb else "",
        at_end=_finish(c, lk) if wb and c.ops.finish_fn else "")
    update = Node(
        name=up, kind="element", cls="CacheUpdate", inputs=(PortSpec("inp", out_t),),
        outputs=(PortSpec("out", out_t),), body=_update_body(c, ticket),
        tables=(("cache", c.name),), segment=seg_out, origin=f"cache {c.name} ({c.policy})")
    edges = [e for e in g.edges if e not in ins and e != out]
    edges += [Edge(e.src, e.src_port, lk, "inp") for e in ins]
    edges += [Edge(lk, "miss", first.name, first.inputs[0].name),
              Edge(lk, "hit", out.dst, out.dst_port),
              Edge(last.name, out.src_port, up, "inp"),
              Edge(up, "out", out.dst, out.dst_port)]
    table = SharedTable(c.name, c.ops.ctype, 1, open_fn=c.ops.open_fn, close_fn=c.ops.close_fn,
                        options=(("policy", c.policy), *c.options),
                        source=c.ops.source or f"{c.policy} cache, empty at start-up",
                        stats_fn=c.ops.stats_fn, includes=c.ops.includes, keys=c.ops.keys)
    return replace(g, nodes=(*g.nodes, lookup, update), edges=tuple(edges),
                   state=(*g.state, Field(ticket, "uint64_t")), shared=(*g.shared, table))


def _args(args: str) -> str:
    return f", {args}" if args else ""


def _lookup_body(c: Cache, node: str, ticket: str, wb: bool) -> str:
    emit = f"ofl_emit_{cname(node)}, &em" if wb else "NULL, NULL"
    return "\n".join([
        *([f"    struct ofl_emit_{cname(node)} em = {{ ctx, state }};"] if wb else []),
        "    uint64_t ticket = 0;",
        f"    int rc = {c.ops.request_fn}(cache, pkt{_args(c.ops.args)}, &ticket, {emit});",
        "    if (rc < 0)",
        "        DROP();",
        f"    state->{ticket} = ticket;",
        "    if (rc == 0)",
        "        EMIT(hit);",
        "    EMIT(miss);",
    ])


def _update_body(c: Cache, ticket: str) -> str:
    # reply_fn returns nonzero for the store's answer to a write-back: used up here
    # (counted as consumed, not dropped). Bodies are parsed by pycparser: no comments.
    args = _args(c.ops.reply_args or c.ops.args)
    return "\n".join([
        f"    if ({c.ops.reply_fn}(cache, pkt{args}, state->{ticket}) != 0)",
        "        CONSUME();",
    ])


def _finish(c: Cache, node: str) -> str:
    """At the end of the lookup's segment on a core (the run stops): write back what is
    written in the cache, down the miss path as the evicted entries go, with the state
    of a request this core saw; before the queue to the store closes."""
    n = cname(node)
    return "\n".join([
        "const struct ofl_state *kept = {kept_state};",
        "if (kept) {",
        f"    struct ofl_emit_{n} em = {{ ctx, kept }};",
        f"    {c.ops.finish_fn}(cache, ofl_emit_{n}, &em);",
        "}",
    ])


def _emit_fn(c: Cache, node: str, ticket: str) -> str:
    n = cname(node)
    return "\n".join([
        f"/* Packets {node} makes (written entries it evicts): down its miss path, steered",
        " * by their own key, with the ticket of made packets. */",
        f"struct ofl_emit_{n} {{ struct ofl_ctx *ctx; const struct ofl_state *state; }};",
        f"static void ofl_emit_{n}(void *arg, struct ofl_pkt *pkt, uint64_t hash) {{",
        f"    const struct ofl_emit_{n} *e = arg;",
        "    struct ofl_state st = *e->state;",
        f"    st.{c.ops.steer} = {c.ops.steer_expr};",
        f"    st.{ticket} = {c.ops.internal};",
        *([f"    st.{c.ops.made} = 1;"] if c.ops.made else []),
        "    {made}",
        "    {target:miss}(e->ctx, pkt, &st);",
        "}",
    ])
