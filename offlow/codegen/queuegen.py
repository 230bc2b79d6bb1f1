"""C for the logical queues: entry types, the rings each queue is mapped onto, the
enqueue function of each channel and the consumer's dispatch of each entry to its
channel's element.  Used by offlow.codegen.c; returns lines of C."""

from __future__ import annotations

from collections.abc import Sequence
from textwrap import dedent

from offlow.ir import Graph, Queue
from offlow.ir.layout import ENTRY_HDR, TS_FIELD, EntryLayout
from offlow.ir.types import cname
from offlow.plan import QueuePlan, RingSlot


def entry_type(q: Queue) -> str:
    """The C type of one ring entry of `q` (a union of the channels' when tagged)."""
    return f"{'union' if q.tagged else 'struct'} ofl_q_{cname(q.name)}"


def channel_type(q: Queue, k: int) -> str:
    return f"struct ofl_q_{cname(q.name)}" + (f"_c{k}" if q.tagged else "")


def push_fn(q: Queue, k: int) -> str:
    """The function that enqueues a packet on channel k of `q`."""
    return f"ofl_push_{cname(q.name)}" + (f"_c{k}" if q.tagged else "")


def entry_decls(qp: QueuePlan) -> list[str]:
    """common.h: the entry struct of each channel (and the union of them, tagged)."""
    q = qp.queue
    out: list[str] = []
    for lay in qp.layouts:
        ch = q.channels[lay.channel]
        what = (f"carries {lay.field_bytes} B of state"
                + (" and the packet bytes" if ch.carries_data else ", not the packet bytes"))
        tag = f", channel {lay.channel} (h.flags)" if q.tagged else ""
        out += [f"/* Queue {q.name}: {ch.edge}{tag}; {what}. */",
                f"{channel_type(q, lay.channel)} {{", "    struct ofl_entry_hdr h;"]
        out += [f"    {f.decl()}" for f, _ in lay.fields]
        if lay.len_off:
            out.append("    uint16_t ofl_len; /* the packet's length (its bytes stay) */")
        if lay.data_cap:
            out.append(f"    uint8_t data[{lay.data_cap}] __attribute__((aligned(8)));")
        out += ["} __attribute__((aligned(8))); /* ring entries are a multiple of 8 bytes */",
                f"_Static_assert(sizeof({channel_type(q, lay.channel)}) == {lay.size}, "
                f"\"entry layout of {q.name} channel {lay.channel}\");"]
    if q.tagged:
        out.append(f"{entry_type(q)} {{ "
                   + " ".join(f"{channel_type(q, k)} c{k};" for k in range(len(q.channels)))
                   + " };")
        out.append(f"_Static_assert(sizeof({entry_type(q)}) == {qp.entry_size}, "
                   f"\"entries of {q.name}\");")
    return out


def ring_desc(r: RingSlot) -> str:
    """common.h: the ofl_ring_desc row of one ring."""
    q = r.queue
    st = entry_type(q)
    if q.tagged:
        doff = "sizeof(struct ofl_entry_hdr)"  # h.len: the bytes used after the header
    else:
        doff = f"offsetof({st}, data)" if q.carries_data else "0"
    return (f"    {{ sizeof({st}), {q.ring_size}u, {q.batch}u, {doff} }}, "
            f"/* {r.index}: {q.name} core {r.prod} -> instance {r.inst} (core {r.cons}) */")


def _copy_fields(lay: EntryLayout, dst: str, src: str, ind: str) -> list[str]:
    """Copy the live state fields between entry and state (not the timestamp)."""
    out = []
    for f, _ in lay.fields:
        if f == TS_FIELD:
            continue
        if f.count > 1:
            out.append(f"{ind}memcpy({dst}{f.name}, {src}{f.name}, sizeof {dst}{f.name});")
        else:
            out.append(f"{ind}{dst}{f.name} = {src}{f.name};")
    return out


def _copy_ts(lay: EntryLayout) -> list[str]:
    """A tagged consumer's copy of the timestamp, when the channel carries it."""
    return [f"            pk.ts_ns = en->{TS_FIELD.name};"] if lay.carries_ts else []


def spread_check(g: Graph, qp: QueuePlan) -> list[str]:
    """For a queue spread over several devices and steered by a field whose writer has a
    spread check (Element.spread_check): that check, given the device index of each
    instance (`shard_of`) and `instances`; else nothing."""
    q = qp.queue
    dst = g.segment(q.dst_segment)
    writer = next((n for n in g.nodes if n.spread_check
                   and any(f.name == q.steer for f in n.fields)), None)
    if not dst.spread or not q.steer or writer is None:
        return []
    devices = list(dict.fromkeys(dst.spread))
    cons = {r.inst: r.cons for r in qp.rings}
    shard_of = ", ".join(str(devices.index(dst.core_device(cons[i])))
                         for i in range(q.instances))
    return [f"    {{ /* spread over {', '.join(devices)}: {writer.name}'s spread check */",
            f"        static const uint8_t shard_of[{q.instances}] = {{{shard_of}}};",
            f"        const uint32_t instances = {q.instances}u;",
            *("        " + line for line in dedent(writer.spread_check).strip().splitlines()),
            "    }"]


def push_def(qp: QueuePlan, k: int, check: Sequence[str] = ()) -> list[str]:
    """The enqueue function of channel k: pick the instance (after `check`,
    spread_check's C), fill an entry."""
    q, lay = qp.queue, qp.layouts[k]
    ch = q.channels[k]
    cq = cname(q.name)
    pick = f"(uint32_t)state->{q.steer}" if q.steer else "ctx->steer"
    how = f"instance {q.steer} % {q.instances}" if q.steer else "round robin over instances"
    out = [f"/* Enqueue on {q.name} ({q.src_segment} -> {q.dst_segment})"
           + (f", channel {k} ({ch.edge})" if q.tagged else "") + f": {how}, live fields only"
           + ("; a full ring drops (counted)" if q.enqueue == "drop" else "") + ". */",
           f"static void {push_fn(q, k)}(struct ofl_ctx *ctx, struct ofl_pkt *pkt, "
           "struct ofl_state *state) {",
           *check,
           f"    struct ofl_qout *qo = &ctx->out_{cq}[{pick} % {q.instances}u];",
           f"    {channel_type(q, k)} *en = ofl_qout_next(qo); /* from the open reservation */",
           "    if (!en) { ofl_core_fail(&ctx->core, qo->err, "
           f"\"enqueue on {q.name}\"); return; }}"]
    if not q.tagged:
        out.append("    en->h.len = (uint16_t)pkt->len;")
    elif lay.data_cap:
        out += [f"    en->h.flags = {k}u;",
                f"    en->h.len = (uint16_t)({lay.len_bias}u + pkt->len);"]
    else:
        out += [f"    en->h.flags = {k}u;",
                f"    en->h.len = {lay.size - ENTRY_HDR}u;",
                "    en->ofl_len = (uint16_t)pkt->len;"]
    out += _copy_fields(lay, "en->", "state->", "    ")
    if lay.carries_ts:
        out.append(f"    en->{TS_FIELD.name} = pkt->ts_ns;")
    if lay.data_cap:
        out.append("    memcpy(en->data, pkt->data, pkt->len);")
    out += ["    (void)state;", "}", ""]
    return out


def input_def(segment: str, qp: QueuePlan, done: list[str], ch_base: int,
              can_fail: bool = False) -> list[str]:
    """A function that runs entries [lo, hi) of a batch from `q` through `segment`,
    each to its channel's element (counted in the core's el_ch_in/el_ch_bytes from
    `ch_base`, the counter of the queue's channel 0), then `done` (the segment's vector
    flush). Where an element of the segment may FAIL (`can_fail`), the entries left
    once one did are held: dropped unrun, counted (ofl_held_drop)."""
    q = qp.queue
    cq = cname(q.name)
    out = [f"/* Entries [lo, hi) of a batch from {q.name}, through segment {segment}. */",
           f"static void ofl_in_{cname(segment)}_{cq}(struct ofl_ctx *ctx, const uint8_t *es, "
           "uint32_t lo, uint32_t hi) {",
           "    struct ofl_core *core = &ctx->core;",
           "    for (uint32_t i = lo; i < hi; i++) {",
           *(["        if (ctx->fails) { ofl_held_drop(ctx, hi - i); break; } /* FAILed */"]
             if can_fail else []),
           "        /* The entry sits in this device's own copy-engine buffer, so",
           "         * elements may rewrite the packet bytes in place. */",
           f"        uint8_t *raw = (uint8_t *)(uintptr_t)(es + (size_t)i * "
           f"sizeof({entry_type(q)}));",
           "        struct ofl_state st;", "        memset(&st, 0, sizeof st);"]
    lays = qp.layouts
    if not q.tagged:
        lay = lays[0]
        out.append(f"        {channel_type(q, 0)} *en = ({channel_type(q, 0)} *)(void *)raw;")
        out += _copy_fields(lay, "st.", "en->", "        ")
        data = "en->data" if lay.data_cap else "core->scratch"
        ts = f"en->{TS_FIELD.name}" if lay.carries_ts else "0"
        out += [f"        struct ofl_pkt pk = {{ .data = {data}, .len = en->h.len, "
                f".cap = OFL_MTU, .ts_ns = {ts} }};",
                "        core->pkts_in++; core->bytes_in += pk.len;",
                f"        ctx->el_ch_in[{ch_base}]++; ctx->el_ch_bytes[{ch_base}] += pk.len;",
                f"        ofl_node_{cname(q.edge.dst)}(ctx, &pk, &st);", "    }", *done, "}",
                ""]
        return out
    out += ["        struct ofl_pkt pk = { .data = core->scratch, .len = 0, .cap = OFL_MTU, "
            ".ts_ns = 0 };",
            "        int ok = 1;",
            "        switch (((const struct ofl_entry_hdr *)(const void *)raw)->flags) {"]
    for lay in lays:
        ch = q.channels[lay.channel]
        ct = channel_type(q, lay.channel)
        out += [f"        case {lay.channel}: {{ /* {ch.edge} */",
                f"            {ct} *en = ({ct} *)(void *)raw;"]
        if lay.data_cap:
            out += [*([f"            if (en->h.len < {lay.len_bias}u) {{ ok = 0; break; }}"]
                      if lay.len_bias else []),  # (a length below 0: nothing to check)
                    *_copy_fields(lay, "st.", "en->", "            "),
                    *_copy_ts(lay),
                    "            pk.data = en->data;",
                    f"            pk.len = (uint32_t)en->h.len - {lay.len_bias}u;"]
        else:
            out += [f"            if (en->h.len != {lay.size - ENTRY_HDR}u) {{ ok = 0; break; }}",
                    *_copy_fields(lay, "st.", "en->", "            "),
                    *_copy_ts(lay),
                    "            pk.len = en->ofl_len;"]
        k = ch_base + lay.channel
        out += ["            core->pkts_in++; core->bytes_in += pk.len;",
                f"            ctx->el_ch_in[{k}]++; ctx->el_ch_bytes[{k}] += pk.len;",
                f"            ofl_node_{cname(ch.edge.dst)}(ctx, &pk, &st);",
                "            break;", "        }"]
    out += ["        default: ok = 0; break;", "        }",
            "        if (!ok) {",
            f"            ofl_core_fail(core, -EBADMSG, \"{q.name}: an entry with an unknown "
            "channel or a bad length\");",
            "            return;", "        }", "    }", *done, "}", ""]
    return out
