"""C for a segment whose vector elements run their batch bodies (offlow.passes.fuse
decides where): each packet waits at the vector element it reaches, and the segment's
flush runs each vector element's batch body over the packets waiting at it, then sends
every packet on in the order they arrived. The flush runs when a batch is done (a
source's, or a ring's entries) or when OFL_VEC packets wait.

A packet waits by its address where it lies in the source's batch (the turn's `pkts`
and `states`, which outlive the flush): when the packets waiting at an element are
consecutive entries of that batch (every packet of the batch, or a run of it, reached
the element), its batch body runs on the batch's own entries, and nothing is copied.
Any other packet (from a ring entry, a copy, a packet a body made) is copied into the
core's context when it arrives, and so are the batch's packets, at the flush, when
they are not consecutive (the batch body takes arrays).

A sink of a segment with sources (the plan's `bursts`) takes the batch's packets that
reach it the same way: each waits by its address, and when the batch is done (after
the flush) they go to the sink in one burst (ofl_sink_write_burst). Any other packet
that reaches the sink sends those waiting first, then itself. Used by
offlow.codegen.c; returns lines of C."""

from __future__ import annotations

from collections.abc import Mapping

from offlow.ir.types import cname
from offlow.plan import SegmentPlan

# The most packets that wait at a segment's vector elements before they run (OFL_VEC:
# the program's batch, up to this): each core keeps a copy of each.
VEC_MAX = 256


def ctx_fields(p: SegmentPlan) -> list[str]:
    """The members of struct ofl_ctx that hold the packets waiting in segment `p`."""
    sn = cname(p.name)
    if not p.vector and not p.bursts:
        return []
    out = ["    /* the source batch being run (its packets wait where they lie): n entries */",
           f"    struct ofl_pkt *vb_pkts_{sn}; struct ofl_state *vb_states_{sn}; "
           f"uint32_t vb_n_{sn};"]
    for n in p.bursts:
        out += [f"    /* the batch's packets waiting at sink {n} */",
                f"    struct ofl_pkt *bq_{cname(n)}[OFL_BATCH]; uint32_t bn_{cname(n)};"]
    if not p.vector:
        return out
    out += [f"    /* segment {p.name}: packets waiting at its vector elements (and which, "
            "in arrival order, where there are several) */",
            f"    uint32_t vcount_{sn};"]
    if len(p.vector) > 1:
        out.append(f"    uint8_t vorder_{sn}[OFL_VEC];")
    for n in p.vector:
        cn = cname(n)
        out += [f"    /* {n}: where its packets lie (vpp, vsp), and room for copies */",
                f"    struct ofl_pkt *vpp_{cn}[OFL_VEC]; struct ofl_state *vsp_{cn}[OFL_VEC]; "
                f"uint32_t vn_{cn};",
                f"    struct ofl_pkt vpkt_{cn}[OFL_VEC]; struct ofl_state vst_{cn}[OFL_VEC];"]
    return out


def flush_decl(p: SegmentPlan) -> str:
    return f"static void ofl_vflush_{cname(p.name)}(struct ofl_ctx *ctx);"


def in_batch(p: SegmentPlan, pkt: str) -> str:
    """C: whether packet `pkt` is an entry of the source batch being run (uintptr_t: no
    pointer arithmetic across objects; an object of its type that lies in the batch's
    array is one of its entries)."""
    sn = cname(p.name)
    return (f"(uintptr_t){pkt} - (uintptr_t)ctx->vb_pkts_{sn} < "
            f"(uintptr_t)ctx->vb_n_{sn} * sizeof *{pkt}")


def sink_def(p: SegmentPlan, node: str, sink: int, index: int, work: str) -> list[str]:
    """Sink `node` of segment `p` (sink `sink` of the process, counter `index`, kind of
    work `work`): a packet of the batch waits for the burst, any other goes now."""
    cn = cname(node)
    write = (f"ofl_sink_write_burst(ctx->proc->sinks[{sink}], ctx->core.idx, ctx->bq_{cn}, "
             f"ctx->bn_{cn});")
    return [f"/* Sink {node}: the packets of the source's batch that waited for it, in one "
            "burst. */",
            f"static void ofl_burst_{cn}(struct ofl_ctx *ctx) {{",
            f"    if (!ctx->bn_{cn}) return;",
            "    OFL_ETIME_BEGIN();", f"    {write}",
            f"    OFL_ETIME_END(ctx->el_ticks[{index}], {work});",
            f"    ctx->bn_{cn} = 0;", "}", "",
            f"static void ofl_node_{cn}(struct ofl_ctx *ctx, struct ofl_pkt *pkt, "
            "struct ofl_state *state) {",
            f"    ctx->el_in[{index}]++;", "    (void)state;",
            f"    if (ctx->bn_{cn} == OFL_BATCH) ofl_burst_{cn}(ctx);",
            f"    if ({in_batch(p, 'pkt')}) {{",
            f"        ctx->bq_{cn}[ctx->bn_{cn}++] = pkt; /* it lies in the batch until its end */",
            "        return;", "    }",
            f"    ofl_burst_{cn}(ctx); /* those waiting first: the order is kept */",
            "    OFL_ETIME_BEGIN();",
            f"    ofl_sink_write(ctx->proc->sinks[{sink}], ctx->core.idx, pkt);",
            f"    OFL_ETIME_END(ctx->el_ticks[{index}], {work});", "}", ""]


def park_def(p: SegmentPlan, node: str, index: int) -> list[str]:
    """The entry point of vector element `node` (counter `index`): the packet waits."""
    sn, cn, k = cname(p.name), cname(node), p.vector.index(node)
    return [f"/* {node} runs its batch body: the packet waits for it (segment {p.name}). */",
            f"static void ofl_node_{cn}(struct ofl_ctx *ctx, struct ofl_pkt *pkt, "
            "struct ofl_state *state) {",
            f"    ctx->el_in[{index}]++;",
            f"    uint32_t j = ctx->vn_{cn}++;",
            "    /* in the source's batch (uintptr_t: no pointer arithmetic across objects) */",
            f"    uintptr_t at = ((uintptr_t)state - (uintptr_t)ctx->vb_states_{sn}) / "
            "sizeof *state;",
            f"    int in_batch = at < ctx->vb_n_{sn} && "
            f"(uintptr_t)state == (uintptr_t)(ctx->vb_states_{sn} + at) &&",
            f"                   (uintptr_t)pkt == (uintptr_t)(ctx->vb_pkts_{sn} + at);",
            "    if (!in_batch) { /* it may not outlive the flush: a copy */",
            f"        ctx->vpkt_{cn}[j] = *pkt; ctx->vst_{cn}[j] = *state;",
            f"        pkt = &ctx->vpkt_{cn}[j]; state = &ctx->vst_{cn}[j];",
            "    }",
            f"    ctx->vpp_{cn}[j] = pkt; ctx->vsp_{cn}[j] = state;",
            *([f"    ctx->vorder_{sn}[ctx->vcount_{sn}] = {k}u;"]
              if len(p.vector) > 1 else []),
            f"    ctx->vcount_{sn}++;",
            f"    if (ctx->vcount_{sn} == OFL_VEC) ofl_vflush_{sn}(ctx);", "}", ""]


def flush_def(p: SegmentPlan, index: Mapping[str, int], kinds: Mapping[str, str],
              failed: Mapping[str, str] | None = None) -> list[str]:
    """Segment `p`'s flush: every vector element's batch body over the packets waiting
    at it (timed in -DOFL_ELEMENT_TIME builds; `index`: each element's counter index,
    `kinds`: its kind of work as gen.h names it),
    then each packet on (ofl_out_NODE: counted, then to what follows), in the order
    they arrived: a loop over one element's packets where all of them wait at one
    (always so with one vector element), else a switch per packet over the arrival
    order. Where an element of the process may FAIL (`failed` given: the mask FAIL_AT
    gives a packet, per vector element that may), no packet that came after a FAILing
    one runs further: those after the one a batch body FAILed (with several vector
    elements, those that may FAIL run first, and the others run only the packets that
    came before it), and those after a packet that FAILed on its way out, are held
    (dropped unrun, counted: ofl_held_drop). The packets waiting when the flush begins
    all came before any FAIL of the core (its loops take none after one): they run."""
    sn = cname(p.name)
    several = len(p.vector) > 1
    # several vector elements that may FAIL: where the first packet FAILed in this flush
    # arrived (`stop`); the packets that came before it still run, those after it do not
    stops = failed is not None and several
    out = [f"/* Segment {p.name}: its vector elements over the packets waiting at each, then "
           "every packet on, in arrival order. */",
           f"static void ofl_vflush_{sn}(struct ofl_ctx *ctx) {{",
           f"    if (!ctx->vcount_{sn}) return;"]
    if stops:
        out += ["    /* every packet waiting came before any FAIL of the core (it takes none",
                "     * after one): all run, but those after a packet a body FAILs here */",
                f"    uint32_t stop = ctx->vcount_{sn};"]
    # those that may FAIL run first: the others then run only what came before `stop`
    first = [n for n in p.vector if stops and n in (failed or {})]
    for n in [*first, *(n for n in p.vector if n not in first)]:
        cn, k = cname(n), p.vector.index(n)
        runs = f"r_{cn}" if stops else f"ctx->vn_{cn}"
        out += [f"    uint32_t m_{cn}[OFL_VEC];",
                f"    memset(m_{cn}, 0, ctx->vn_{cn} * sizeof m_{cn}[0]);",
                *([f"    uint32_t r_{cn} = ctx->vn_{cn}; /* those that came before `stop` */",
                   f"    if (stop < ctx->vcount_{sn}) {{",
                   f"        r_{cn} = ofl_vorder_before(ctx->vorder_{sn}, stop, {k}u);",
                   f"        for (uint32_t j = r_{cn}; j < ctx->vn_{cn}; j++)",
                   f"            m_{cn}[j] = OFL_HELD;",
                   "    }"] if stops else []),
                f"    if ({runs}) {{",
                f"        struct ofl_pkt *ps = ctx->vpp_{cn}[0];",
                f"        struct ofl_state *ss = ctx->vsp_{cn}[0];",
                "        /* one run of entries (of the batch, or all copies)? */",
                "        int run = 1;",
                f"        for (uint32_t j = 0; run && j < ctx->vn_{cn}; j++)",
                f"            run = (uintptr_t)ctx->vsp_{cn}[j] == (uintptr_t)ss + j * sizeof *ss;",
                "        if (!run) { /* gathered */",
                f"            for (uint32_t j = 0; j < ctx->vn_{cn}; j++) {{",
                f"                if (ctx->vsp_{cn}[j] == &ctx->vst_{cn}[j]) continue;",
                f"                ctx->vpkt_{cn}[j] = *ctx->vpp_{cn}[j]; "
                f"ctx->vst_{cn}[j] = *ctx->vsp_{cn}[j];",
                f"                ctx->vpp_{cn}[j] = &ctx->vpkt_{cn}[j]; "
                f"ctx->vsp_{cn}[j] = &ctx->vst_{cn}[j];",
                "            }",
                f"            ps = ctx->vpkt_{cn}; ss = ctx->vst_{cn};",
                "        }",
                *([f"        const uint32_t f_{cn} = ctx->fails;"]
                  if stops and n in (failed or {}) else []),
                "        OFL_ETIME_BEGIN();",
                f"        ofl_vbody_{cn}(ctx, ps, ss, {runs}, m_{cn});",
                f"        OFL_ETIME_END(ctx->el_ticks[{index[n]}], {kinds[n]});",
                *_after_fail(sn, cn, k, failed, stops),
                "    }"]
    out += [f"    const uint32_t count = ctx->vcount_{sn};"]
    if failed is not None:  # a packet on its way out may FAIL: the rest are held then
        out.append("    const uint32_t fails = ctx->fails;")
    # every packet at one vector element (always so with one): the arrival order is
    # that element's own, and no switch per packet
    if several:
        out += [f"    const int all_{cname(n)} = ctx->vn_{cname(n)} == count;" for n in p.vector]
    out += [f"    ctx->vcount_{sn} = 0;", *(f"    ctx->vn_{cname(n)} = 0;" for n in p.vector)]

    def send(cn: str, pos: str) -> str:
        call = f"ofl_out_{cn}(ctx, ctx->vpp_{cn}[j], ctx->vsp_{cn}[j], m_{cn}[j]);"
        if failed is None:
            return call
        past = f" || {pos} > stop" if stops else ""
        return (f"if (m_{cn}[j] == OFL_HELD || ctx->fails != fails{past}) "
                f"ofl_held_drop(ctx, 1); else {call}")

    for n in p.vector:
        cn = cname(n)
        loop = f"for (uint32_t j = 0; j < count; j++) {send(cn, 'j')}"
        if not several:
            return [*out, f"    {loop}", "}", ""]
        out += [f"    if (all_{cn}) {{", f"        {loop}", "        return;", "    }"]
    out += [f"    uint32_t at[{len(p.vector)}] = {{0}};",
            "    for (uint32_t k = 0; k < count; k++) {",
            f"        const uint32_t v = ctx->vorder_{sn}[k], j = at[v]++;",
            "        switch (v) {"]
    for k, n in enumerate(p.vector):
        cn = cname(n)
        out.append(f"        case {k}: {send(cn, 'k')} break;")
    out += ["        default: break;", "        }", "    }", "}", ""]
    return out


def _after_fail(sn: str, cn: str, k: int, failed: Mapping[str, str] | None,
                stops: bool) -> list[str]:
    """After vector element `cn` (the `k`th of segment `sn`) ran its batch body, where it
    may FAIL: the packets after the one it FAIL_AT'd are held; with several vector
    elements, the flush's `stop` moves to where that packet arrived."""
    name = next((n for n in failed or {} if cname(n) == cn), None)
    if failed is None or name is None:
        return []
    mask = failed[name]
    if not stops:
        return [f"        if (ctx->fails) ofl_hold_after_fail(m_{cn}, ctx->vn_{cn}, "
                f"{mask}); /* FAIL_AT */"]
    return [f"        if (ctx->fails != f_{cn}) {{ /* FAIL_AT: none after it goes on */",
            f"            const uint32_t at = ofl_vorder_pos(ctx->vorder_{sn}, ctx->vcount_{sn}, "
            f"{k}u, ofl_fail_index(m_{cn}, r_{cn}, {mask}));",
            f"            ofl_hold_after_fail(m_{cn}, r_{cn}, {mask});",
            "            if (at < stop) stop = at;",
            "        }"]


def flush_call(p: SegmentPlan, ind: str) -> list[str]:
    """A batch is done: the packets waiting in segment `p` go."""
    return [f"{ind}ofl_vflush_{cname(p.name)}(ctx);"] if p.vector else []


def batch_begin(p: SegmentPlan, ind: str) -> list[str]:
    """A source's batch of n packets in `pkts` and `states` starts through segment `p`:
    its packets may wait where they lie."""
    sn = cname(p.name)
    return [f"{ind}ctx->vb_pkts_{sn} = pkts; ctx->vb_states_{sn} = states; "
            f"ctx->vb_n_{sn} = n > 0 ? (uint32_t)n : 0u;"] if p.vector or p.bursts else []


def batch_end(p: SegmentPlan, ind: str) -> list[str]:
    """The source's batch is done (flushed, its sinks' bursts written): nothing may
    wait in it any more."""
    if not p.vector and not p.bursts:
        return []
    return [*flush_call(p, ind), *(f"{ind}ofl_burst_{cname(n)}(ctx);" for n in p.bursts),
            f"{ind}ctx->vb_n_{cname(p.name)} = 0;"]
