"""The crossing from an XDP program to segments on other devices: each (queue, channel)
that leaves an xdp device is a crossing with a code; the XDP program writes the
channel's live fields (the liveness pass's, as the NIC's ring entries carry them) into
XDP metadata in front of the frame (`bpf_xdp_adjust_meta`) and redirects the frame to
the AF_XDP socket of its receive queue (an XSKMAP); the device's host side reads the
metadata back into the packet's state and pushes the packet into the queue's ring in
the window, where the consumer segment takes it as it takes the NIC's.

The metadata of a crossing is one packed struct, the same in the BPF program and in
the host side (generated from one function here): the fields, padding to a multiple
of 4 bytes, then a 4-byte tail (the frame's length, the crossing's code, a magic byte)
that ends where the frame starts, so the host finds it without knowing the code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from offlow.ir import Field
from offlow.ir.layout import TS_FIELD
from offlow.ir.types import cname

if TYPE_CHECKING:
    from offlow.plan import Plan, QueuePlan

# The tail's magic byte and size.
MAGIC = 0xA5
TAIL = 4
# Bytes of each frame of the AF_XDP socket's memory (umem): the host side's size of
# them (generated into its descriptor) and the XDP side's longest frame that fits one
# (the kernel keeps XDP_PACKET_HEADROOM, 256 bytes, in front of each frame's data).
XSK_FRAME = 4096
# The most metadata bytes the kernel takes in front of a frame (skb_shared_info's
# meta_len is one byte, and the length a multiple of 4; kernels before 6.2: 32).
META_MAX = 252
# Drop reasons of a crossing, after its `up` counter, in counter order: the XDP side's
# (then the host side adds the AF_XDP ring's and its own, xdp_run.c).
REASONS = ("no_socket", "too_long", "no_meta_room")
# What each drop at a queue from XDP means (the run report's accounting).
DROPS = {
    "no_socket": "no AF_XDP socket on the receive queue it came in on (the run opens one "
                 "on queue 0)",
    "too_long": f"longer than an AF_XDP frame takes ({XSK_FRAME - 256} B)",
    "no_meta_room": "no room for the XDP metadata in front of the frame (the driver's "
                    "headroom)",
    "afxdp_full": "the AF_XDP socket's ring was full, or had no free frame: the host side "
                  "fell behind",
    "bad_meta": "its XDP metadata was not a crossing's",
}


@dataclass(frozen=True)
class Crossing:
    """Channel `channel` of queue `qp`, leaving the xdp device: its code is its index."""

    code: int
    qp: QueuePlan
    channel: int

    @property
    def fields(self) -> list[Field]:
        """The live fields that cross (the timestamp does not: XDP has none)."""
        return [f for f, _ in self.qp.layouts[self.channel].fields if f != TS_FIELD]

    @property
    def meta_type(self) -> str:
        return f"struct ofl_meta_{self.code}"

    @property
    def pad(self) -> int:
        return -sum(f.size for f in self.fields) % 4

    @property
    def meta_bytes(self) -> int:
        return sum(f.size for f in self.fields) + self.pad + TAIL


def crossings(plan: Plan, device: str) -> list[Crossing]:
    """Every (queue, channel) from a segment of `device` to another device, coded in
    queue then channel order."""
    segs = {s.name for s in plan.device(device).segments}
    pairs = [(qp, k) for qp in plan.queues if qp.queue.src_segment in segs
             for k in range(len(qp.queue.channels))]
    return [Crossing(code, qp, k) for code, (qp, k) in enumerate(pairs)]


def meta_decls(xs: list[Crossing]) -> list[str]:
    """The metadata struct of each crossing (the BPF program and the host side both
    declare them from here)."""
    out = ["/* XDP metadata in front of a frame that crosses: the live fields, then the",
           " * tail, which ends where the frame starts. */",
           "struct ofl_meta_tail { uint16_t len; uint8_t code; uint8_t magic; } "
           "__attribute__((packed));",
           f"#define OFL_META_MAGIC 0x{MAGIC:02X}u"]
    for x in xs:
        q = x.qp.queue
        out += [f"/* Crossing {x.code}: queue {q.name}, channel {x.channel} "
                f"({q.channels[x.channel].edge}). */", f"{x.meta_type} {{"]
        out += [f"    {f.decl()}" for f in x.fields]
        if x.pad:
            out.append(f"    uint8_t ofl_pad_[{x.pad}];")
        out += ["    struct ofl_meta_tail tail;", "} __attribute__((packed));",
                f"_Static_assert(sizeof({x.meta_type}) == {x.meta_bytes}, "
                f"\"metadata of crossing {x.code}\");"]
    return out


def _copy(fields: list[Field], dst: str, src: str, ind: str) -> list[str]:
    return [f"{ind}__builtin_memcpy({dst}{f.name}, {src}{f.name}, sizeof {dst}{f.name});"
            if f.count > 1 else f"{ind}{dst}{f.name} = {src}{f.name};" for f in fields]


def bpf_up(x: Crossing, counter: int) -> list[str]:
    """The XDP program's function that sends a packet up crossing `x`: the frame's
    bytes written back, the live fields in front of it, redirected to the AF_XDP
    socket of the receive queue; counters from `counter` on (up, then REASONS)."""
    q = x.qp.queue
    why = {r: counter + 1 + k for k, r in enumerate(REASONS)}
    return [
        f"/* Up to segment {q.dst_segment} (queue {q.name}, channel {x.channel}) through "
        "AF_XDP. */",
        f"static __always_inline int ofl_up_{x.code}(struct xdp_md *xdp, struct ofl_pkt *pkt, "
        "struct ofl_state *state) {",
        "    uint32_t rxq = xdp->rx_queue_index;", "    (void)state; /* (no field may cross) */",
        "    if (!bpf_map_lookup_elem(&ofl_xsks, &rxq)) "
        f"{{ ofl_count({why['no_socket']}u); return XDP_DROP; }}",
        f"    if (pkt->len > OFL_XSK_FRAME_MAX) {{ ofl_count({why['too_long']}u); "
        "return XDP_DROP; }",
        f"    if (ofl_xdp_put(xdp, pkt) < 0 || bpf_xdp_adjust_meta(xdp, "
        f"-(int)sizeof({x.meta_type})) < 0) {{",
        f"        ofl_count({why['no_meta_room']}u);", "        return XDP_DROP;", "    }",
        "    void *data = (void *)(long)xdp->data;",
        f"    {x.meta_type} *m = (void *)(long)xdp->data_meta;",
        f"    if ((void *)(m + 1) > data) {{ ofl_count({why['no_meta_room']}u); "
        "return XDP_DROP; }",
        *_copy(x.fields, "m->", "state->", "    "),
        "    m->tail.len = (uint16_t)pkt->len;",
        f"    m->tail.code = {x.code}u;", "    m->tail.magic = OFL_META_MAGIC;",
        f"    ofl_count({counter}u);",
        "    return (int)bpf_redirect_map(&ofl_xsks, rxq, XDP_DROP);", "}", ""]


def host_up(xs: list[Crossing], push_fn: dict[tuple[str, int], str]) -> list[str]:
    """The host side's function that takes one frame from the AF_XDP socket:
    `meta_end` is where the frame starts, with `room` bytes before it in its umem
    frame. The state is read from the metadata and the packet pushed on its queue's
    channel (`push_fn`: (queue, channel) -> the enqueue function). Returns 0, or
    -EBADMSG when the metadata is not a crossing's (no tail, a length that is not the
    frame's, an unknown code, less room than the metadata) or the frame is longer than
    the program's mtu (its ring entries' room)."""
    out = ["/* One frame from the AF_XDP socket: its state from the XDP metadata, then its",
           " * queue. 0, or -EBADMSG when the metadata is not one of a crossing. */",
           "static int ofl_xdp_up(struct ofl_pkt *pkt, const uint8_t *meta_end, "
           "uint32_t room) {",
           "    struct ofl_ctx *ctx = &ofl_xdp_ctx;",
           "    struct ofl_meta_tail t;",
           "    if (room < sizeof t) return -EBADMSG;",
           "    memcpy(&t, meta_end - sizeof t, sizeof t);",
           "    if (t.magic != OFL_META_MAGIC || t.len != pkt->len || pkt->len > OFL_MTU) "
           "return -EBADMSG;",
           "    struct ofl_state st;", "    memset(&st, 0, sizeof st);",
           "    switch (t.code) {"]
    for x in xs:
        fn = push_fn[x.qp.queue.name, x.channel]
        out += [f"    case {x.code}u: {{",
                f"        {x.meta_type} m;",
                "        if (room < sizeof m) return -EBADMSG;",
                "        memcpy(&m, meta_end - sizeof m, sizeof m);",
                *_copy(x.fields, "st.", "m.", "        "),
                f"        {fn}(ctx, pkt, &st);", "        return 0;", "    }"]
    out += ["    default: return -EBADMSG;", "    }", "}", ""]
    return out


def ctx_decl(xs: list[Crossing]) -> list[str]:
    """The host side's context: what the queues' enqueue functions use."""
    queues = list(dict.fromkeys(x.qp.queue.name for x in xs))
    return ["/* What the enqueue functions use (offlow/codegen/queuegen.py). */",
            "struct ofl_ctx {", "    struct ofl_core core;", "    uint32_t steer;",
            *(f"    struct ofl_qout *out_{cname(q)}; /* one per instance */" for q in queues),
            "};", "static struct ofl_ctx ofl_xdp_ctx;", ""]
