"""Generate eBPF C for a device on the xdp target: one XDP program per segment, its
elements' bodies inlined (offlow/bpf.h gives them the packet, the body macros and
pkt.h's parsers), the per-packet state on the BPF stack, and every element's
counters (in, dropped, consumed, then drops per reason) in a per-CPU array map that
the loader sums into the run's stats (offlow/targets/xdp.py). The tables it looks up
(the IPv4 and IPv6 LPM tables: BPF_TABLES) are array maps that the host side fills
from the table the runtime built (offlow/lpm_bpf.h, runtime/tools/xdp_tables.c); a shared array
(`Shared`) is one array map whose one value is the array, zeroed as on every device,
read back by the host side into the run's table report; one that every user only adds
to (`map_kind`) is a per-CPU array map instead, added to without atomics, its CPUs'
copies summed by the host side."""

from __future__ import annotations

import json

from offlow.codegen import mapdecl, xsk
from offlow.codegen import queuegen as qg
from offlow.codegen.c import (
    Emitter,
    body_enums,
    emit_handler,
    emit_helpers,
    line_directive,
)
from offlow.codegen.cstring import c_string
from offlow.ir import Graph, Node, SharedTable
from offlow.ir.graph import CTL_CHANNEL_PREFIX, NO_OUTPUT
from offlow.ir.types import ADD_BUILTINS, SCALARS, cname, sort_fields
from offlow.plan import Plan, SegmentPlan

# Counters per element, in this order, then one per drop reason of every element.
COUNTERS = ("in", "drop", "used")


def counter_layout(nodes: list[Node], ncross: int = 0) -> tuple[dict[str, int], int]:
    """Where each element's drop reasons start (after every element's COUNTERS), and
    how many counters there are in all: those, then the sink's frames a veth drops
    (VETH_DROPS: the one before the crossings'), then per crossing to another device
    (`ncross` of them) its packets sent up and its drops per reason (xsk.REASONS)."""
    base, k = {}, len(COUNTERS) * len(nodes)
    for n in nodes:
        base[n.name] = k
        k += len(n.drops)
    return base, k + 1 + ncross * (1 + len(xsk.REASONS))


def cross_base(ncounters: int, ncross: int) -> int:
    """The first crossing's first counter (its packets sent up); the counter before it
    counts the frames sent back that a veth's receive drops (counter_layout)."""
    return ncounters - ncross * (1 + len(xsk.REASONS))


# The table types an XDP program can look up: ctype -> the BPF header that gives it
# and the prefix of its macros there (PREFIX_MAPS(NAME) declares the maps,
# PREFIX_TABLE(NAME) is the table the body sees).
BPF_TABLES = {"struct ofl_lpm4": ("offlow/lpm_bpf.h", "OFL_LPM4_BPF"),
              "struct ofl_lpm6": ("offlow/lpm_bpf.h", "OFL_LPM6_BPF")}
# The BPF header of shared hash maps (SharedMap): their maps and body calls.
MAP_HEADER = "offlow/map_bpf.h"


def used_tables(g: Graph, nodes: list[Node]) -> list[SharedTable]:
    """The shared tables `nodes` (elements, handlers) look up, in the program's order."""
    used = {ref for n in nodes for _, ref in n.tables}
    return [t for t in g.shared if t.name in used]


def is_array(t: SharedTable) -> bool:
    """A shared array of integers (`Shared`), which XDP keeps in one map value."""
    return not t.is_object and t.ctype in SCALARS and t.ctype not in ("float", "double")


# The largest value of a per-CPU map (the kernel's PCPU_MIN_UNIT_SIZE).
PERCPU_MAX = 32 << 10


def map_kind(g: Graph, t: SharedTable) -> tuple[str, str]:
    """The kind of BPF map shared array `t` of an xdp segment is, and why: `percpu` (a
    BPF_MAP_TYPE_PERCPU_ARRAY: one copy per CPU, added to without atomics, summed
    when the host side reads it) when every element that names it only adds to it
    (passes/tableuse.py: `t[i] += v;`, `__sync_fetch_and_add(&t[i], v);`, values
    unused) and no channel handler reads it; else `array` (one BPF_MAP_TYPE_ARRAY
    value every CPU sees)."""
    handler = next((c.handler.name for c in g.channels
                    if any(ref == t.name for _, ref in c.handler.tables)), None)
    if handler is not None:
        return "array", (f"channel handler {handler} reads it over the mapped map (a "
                         "per-CPU map cannot be mapped)")
    users = [(n, local) for n in g.nodes for local, ref in n.tables if ref == t.name]
    reader = next((n.name for n, local in users
                   if n.facts is None or local not in n.facts.adds_only), None)
    if reader is not None:
        return "array", (f"element {reader} uses it otherwise than adding to it (a read, "
                         "a store, its address or an add's result): every CPU must see "
                         "one copy")
    size = t.length * SCALARS[t.ctype]
    if size > PERCPU_MAX:
        return "array", (f"its {size} bytes are more than the {PERCPU_MAX >> 10} KiB a "
                         "per-CPU map value holds")
    return "percpu", ("every use adds to it (" + ", ".join(sorted({n.name for n, _ in users}))
                      + "): one copy per CPU, no atomics, summed when read")


def map_prefix(table: str) -> str:
    """The name the maps of `table` start with (offlow/lpm_bpf.h: NAME_dir, NAME_tbl24,
    NAME_tbl8 for an IPv4 table; NAME_top, NAME_node, NAME_leaf for an IPv6 one)."""
    return f"ofl_{cname(table)}"


def segment_nodes(plan: Plan, device: str) -> list[Node]:
    """The device's nodes in counter order (definition order)."""
    return [plan.graph.node(n) for p in plan.device(device).segments for n in reversed(p.nodes)]


def device_tables(plan: Plan, device: str) -> list[SharedTable]:
    """The shared tables of the device's program: its elements' and those of the
    handlers of the channels it serves (their maps)."""
    handlers = [c.handler for c in plan.device(device).channels]
    return used_tables(plan.graph, [*segment_nodes(plan, device), *handlers])


class BpfGen:
    """Generates the eBPF C file of one xdp device."""

    def __init__(self, plan: Plan, device: str) -> None:
        self.g: Graph = plan.graph
        self.plans = list(plan.device(device).segments)
        self.device = device
        self.nodes = segment_nodes(plan, device)
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.cross = xsk.crossings(plan, device)
        self.why_base, self.ncounters = counter_layout(self.nodes, len(self.cross))
        # each crossing's first counter (its packets sent up)
        self.cross_base = cross_base(self.ncounters, len(self.cross))
        self.tables = device_tables(plan, device)
        self.percpu = {t.name for t in self.tables
                       if is_array(t) and map_kind(self.g, t)[0] == "percpu"}
        self.e = Emitter(f"{device}.bpf.c")

    def gen(self) -> str:
        e = self.e
        e(f"/* Generated by offlow: program `{self.g.name}`, device `{self.device}` "
          "(XDP, clang -target bpf). */", "#include <offlow/bpf.h>",
          *sorted({f"#include <{MAP_HEADER if t.is_map else BPF_TABLES[t.ctype][0]}>"
                   for t in self.tables if not is_array(t)}), "",
          f"#define OFL_MTU {self.g.mtu}u", "", "/* The per-packet state record. */",
          "struct ofl_state {")
        for f in sort_fields(self.g.state) or ():
            e(f"    {f.decl()}")
        if not self.g.state:
            e("    uint8_t ofl_unused_;")
        e("};", "",
          "/* Counters: per element in, dropped, consumed; then drops per element and reason. */",
          f"#define OFL_NCOUNTERS {self.ncounters}u",
          "struct {", "    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);",
          "    __uint(max_entries, OFL_NCOUNTERS);", "    __type(key, uint32_t);",
          "    __type(value, uint64_t);", "} ofl_counts SEC(\".maps\");", "")
        for t in self.tables:
            m = map_prefix(t.name)
            if t.name in self.percpu:
                e(f"/* Shared array {t.name}: {t.length} x {t.ctype}, only added to: one copy",
                  " * per CPU, summed by the host side (offlow.codegen.bpf.map_kind). */",
                  f"struct {m}_v {{ {t.ctype} v[{t.length}]; }};",
                  "struct {", "    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);",
                  "    __uint(max_entries, 1);", "    __type(key, uint32_t);",
                  f"    __type(value, struct {m}_v);",
                  f"}} {m} SEC(\".maps\");", "")
                continue
            if is_array(t):
                e(f"/* Shared array {t.name}: {t.length} x {t.ctype}, one map value (mapped",
                  " * by the host side for the channel handlers that name it). */",
                  f"struct {m}_v {{ {t.ctype} v[{t.length}]; }};",
                  "struct {", "    __uint(type, BPF_MAP_TYPE_ARRAY);",
                  "    __uint(map_flags, BPF_F_MMAPABLE);",
                  "    __uint(max_entries, 1);", "    __type(key, uint32_t);",
                  f"    __type(value, struct {m}_v);",
                  f"}} {m} SEC(\".maps\");", "")
                continue
            if t.is_map:
                e(*mapdecl.key_struct(t), *mapdecl.value_struct(t),
                  f"/* Shared map {t.name}: a hash map; its updates refused for want of room "
                  "counted in its per-CPU full counter. */",
                  f"OFL_MAP_BPF_MAPS({m}, struct {t.name}_key, {t.map_value}, "
                  f"{t.map_entries});", "")
                continue
            e(f"/* Table {t.name} ({t.source}): filled by the host side before the run. */",
              f"{BPF_TABLES[t.ctype][1]}_MAPS({m});", "")
        if self.cross:
            e("/* The AF_XDP socket of each receive queue (the host side puts it there). */",
              "struct {", "    __uint(type, BPF_MAP_TYPE_XSKMAP);", "    __uint(max_entries, 64);",
              "    __type(key, uint32_t);", "    __type(value, uint32_t);",
              "} ofl_xsks SEC(\".maps\");",
              f"/* The longest frame an AF_XDP frame of {xsk.XSK_FRAME} bytes takes. */",
              f"#define OFL_XSK_FRAME_MAX ({xsk.XSK_FRAME}u - XDP_PACKET_HEADROOM)",
              *xsk.meta_decls(self.cross), "")
        e("/* The frame the bodies see (offlow/bpf.h): one per CPU, indexed by the CPU (an",
          " * XDP program is not migrated); the loader sizes it (too big for a per-CPU map). */",
          "struct ofl_frame { uint8_t b[OFL_XDP_BUF]; };",
          "struct {", "    __uint(type, BPF_MAP_TYPE_ARRAY);", "    __uint(max_entries, 1);",
          "    __type(key, uint32_t);", "    __type(value, struct ofl_frame);",
          "} ofl_frames SEC(\".maps\");", "",
          "static __always_inline void ofl_count(uint32_t k) {",
          "    uint64_t *v = bpf_map_lookup_elem(&ofl_counts, &k);",
          "    if (v) *v += 1;", "}", "",
          "/* The packet's bytes written back into the frame: 0, or -1. */",
          "static __always_inline int ofl_xdp_put(struct xdp_md *xdp, struct ofl_pkt *pkt) {",
          "    int now = (int)bpf_xdp_get_buff_len(xdp);",
          "    uint64_t len = pkt->len;",
          "    if (len - 1 >= OFL_MTU) return -1;",
          "    if ((int)len != now && bpf_xdp_adjust_tail(xdp, (int)len - now) < 0) return -1;",
          "    if (bpf_xdp_store_bytes(xdp, 0, pkt->data, (uint32_t)len) < 0) return -1;",
          "    return 0;", "}", "",
          "/* The packet leaves by the interface it came in on. */",
          "static __always_inline int ofl_xdp_tx(struct xdp_md *xdp, struct ofl_pkt *pkt) {",
          "    return ofl_xdp_put(xdp, pkt) < 0 ? XDP_DROP : XDP_TX;", "}", "",
          "/* A frame a veth's receive drops (its kernel takes a VLAN tag off first, and",
          " * needs the tag and two bytes after it: 6 after the Ethernet header): an 802.1Q",
          " * or 802.1ad TPID with fewer than 20 bytes in all. On a NIC it goes out. */",
          "static __always_inline int ofl_xdp_veth_drops(const struct ofl_pkt *pkt) {",
          "    if (pkt->len < 14u || pkt->len >= 20u) return 0;",
          "    uint16_t et = (uint16_t)(pkt->data[12] << 8 | pkt->data[13]);",
          "    return et == 0x8100u || et == 0x88a8u;", "}", "")
        for x in self.cross:
            e(*xsk.bpf_up(x, self.cross_base + x.code * (1 + len(xsk.REASONS))))
        emit_helpers(e, self.nodes)
        for n in self.nodes:
            if n.kind == "element":
                self.gen_body(n)
        for p in self.plans:
            for name in p.nodes:
                self.gen_node(self.g.node(name))
        for p in self.plans:
            self.gen_prog(p)
        e("/* Every frame passed on: the veth peer's program in native mode (xdp_run.h). */",
          'SEC("xdp") int ofl_pass_all(struct xdp_md *xdp) { (void)xdp; return XDP_PASS; }',
          "")
        e('char _license[] SEC("license") = "GPL";')
        return e.text()

    def gen_body(self, n: Node) -> None:
        """The body as a function whose first line is the line before the body in the
        program's file: the function belongs to that file in the BTF line info (clang
        names the function's file, not #line's, beside each line number), so the
        verifier's log points into the program (offlow.targets.verifier)."""
        head = [f"static __always_inline void ofl_body_{cname(n.name)}(struct ofl_pkt *pkt, "
                "struct ofl_state *state, uint32_t *ofl_mask_) {", *body_enums(n)]
        head += [f"const {ctype} {pname} = {lit};" for pname, ctype, lit in n.params]
        tables = {t.name: t for t in self.tables}
        for local, ref in n.tables:  # the table as its maps (offlow/lpm_bpf.h)
            m, t = map_prefix(ref), tables[ref]
            if is_array(t):  # (a value always there: index 0 of a 1-entry array map)
                head.append(f"uint32_t ofl_zero_{local}_ = 0; struct {m}_v *ofl_tbl_{local}_ = "
                            f"bpf_map_lookup_elem(&{m}, &ofl_zero_{local}_); "
                            f"if (!ofl_tbl_{local}_) return; "
                            f"__typeof__(ofl_tbl_{local}_->v[0]) *const {local} = "
                            f"ofl_tbl_{local}_->v;")
                continue
            if t.is_map:  # (offlow/map_bpf.h's calls take it)
                head.append(f"const struct ofl_map_bpf {local} = {{ &{m}, &{m}_full }};")
                continue
            head.append(f"const {t.ctype} ofl_tbl_{local}_ = {BPF_TABLES[t.ctype][1]}_TABLE("
                        f"{m}); const {t.ctype} *const {local} = &ofl_tbl_{local}_;")
        head += [f"(void){u};" for u in ["pkt", "state", "ofl_mask_", *(p[0] for p in n.params),
                                         *(t[0] for t in n.tables)]]
        e = self.e
        e(f"/* Element {n.name} ({n.cls}). */")
        plain = self.plain_adds(n)
        if plain:
            e("/* Its add builtins add to per-CPU copies only: plain adds. */",
              *(f"#define {b}(p, v, ...) ((void)(*(p) {ADD_BUILTINS[b]} (v)))" for b in plain))
        if n.origin and n.body_line > 1:
            e(line_directive(n.origin, n.body_line - 1, ""))
        e(" ".join(head), line_directive(n.origin, n.body_line, f"<body of {n.name}>"), n.body)
        e.resync()
        e(*(f"#undef {m}" for m in (*(n.facts.macros if n.facts else ()), *plain)), "}", "")

    def plain_adds(self, n: Node) -> list[str]:
        """The add builtins element `n`'s body calls only to add to per-CPU arrays
        (their values unused: passes/tableuse.py), which need no atomic."""
        calls = n.facts.atomic_adds if n.facts else frozenset()
        percpu = {local for local, ref in n.tables if ref in self.percpu}
        return sorted(b for b in {b for b, _ in calls}
                      if all(local in percpu for c, local in calls if c == b))

    def _next(self, n: Node, port: str) -> str:
        edge = next(x for x in self.g.out_edges(n.name) if x.src_port == port)
        on = self.g.channel_on(edge)
        if on:  # up to a segment on another device
            return f"ofl_up_{next(x.code for x in self.cross if (x.qp.queue, x.channel) == on)}"
        return f"ofl_node_{cname(edge.dst)}"

    def gen_node(self, n: Node) -> None:
        """A node's entry point: it counts the packet, runs the body and returns the
        packet's XDP verdict (the next node's, XDP_TX at the sink, XDP_DROP)."""
        e, i, cn = self.e, self.index[n.name], cname(n.name)
        e(f"static __always_inline int ofl_node_{cn}(struct xdp_md *xdp, struct ofl_pkt *pkt, "
          "struct ofl_state *state) {")
        if n.kind == "sink":
            # a frame a veth drops is counted before `in`: once the replay sees `in`, it
            # sees that count too (xdp_run.c), and does not wait for the frame
            e("    (void)state;", "    int v = ofl_xdp_tx(xdp, pkt);",
              "    if (v == XDP_TX && ofl_xdp_veth_drops(pkt))",
              f"        ofl_count({self.cross_base - 1}u);",
              f"    ofl_count({len(COUNTERS) * i}u);",
              f"    if (v != XDP_TX) ofl_count({len(COUNTERS) * i + 1}u);", "    return v;",
              "}", "")
            return
        e(f"    ofl_count({len(COUNTERS) * i}u);", "    (void)xdp;")
        if n.kind == "source":
            e(f"    return {self._next(n, n.outputs[0].name)}(xdp, pkt, state);", "}", "")
            return
        drop, used = len(COUNTERS) * i + 1, len(COUNTERS) * i + 2
        e("    uint32_t m = 0;", f"    ofl_body_{cn}(pkt, state, &m);")
        if n.drops:
            e("    if (m & OFL_WHY) {", f"        ofl_count({drop}u);",
              f"        ofl_count({self.why_base[n.name]}u + (m & 0xFFu));",
              "        return XDP_DROP;", "    }")
        if not n.outputs:
            e(f"    ofl_count(m == OFL_DECIDED ? {drop}u : {used}u);", "    return XDP_DROP;",
              "}", "")
            return
        default = 1 if len(n.outputs) == 1 else 0
        if NO_OUTPUT[0] in dict(n.drops):  # (its body chose nothing: m is 0)
            why = self.why_base[n.name] + [r for r, _ in n.drops].index(NO_OUTPUT[0])
            e(f"    if (!m) {{ ofl_count({drop}u); ofl_count({why}u); return XDP_DROP; }}")
        e(f"    m = (m & OFL_DECIDED) ? (m & ~OFL_DECIDED) : (m ? m : {default}u);",
          f"    if (!m) {{ ofl_count({drop}u); return XDP_DROP; }}",
          f"    if (m & OFL_CONSUMED) {{ ofl_count({used}u); return XDP_DROP; }}")
        for k, p in enumerate(n.outputs):
            e(f"    if (m & (1u << {k})) return {self._next(n, p.name)}(xdp, pkt, state);")
        e(f"    ofl_count({drop}u);", "    return XDP_DROP;", "}", "")

    def gen_prog(self, p: SegmentPlan) -> None:
        """The XDP program of segment `p`: the frame copied into this CPU's buffer, the
        state zeroed on the stack, the packet through the segment's source."""
        e = self.e
        src = next(self.g.node(n) for n in p.nodes if self.g.node(n).kind == "source")
        i = self.index[src.name]
        e(f"/* Segment {p.name}: every packet the interface receives enters at {src.name}. */",
          f'SEC("xdp") int ofl_xdp_{cname(p.name)}(struct xdp_md *xdp) {{',
          "    uint32_t cpu = bpf_get_smp_processor_id();",
          "    struct ofl_frame *f = bpf_map_lookup_elem(&ofl_frames, &cpu);",
          "    if (!f) return XDP_ABORTED;",
          "    uint64_t len = bpf_xdp_get_buff_len(xdp);",
          "    /* empty, or longer than the program's mtu: dropped at the source, counted",
          "     * (one unsigned compare: the verifier then knows 1 <= len <= OFL_MTU) */",
          "    if (len - 1 >= OFL_MTU || bpf_xdp_load_bytes(xdp, 0, f->b, (uint32_t)len) < 0) {",
          f"        ofl_count({len(COUNTERS) * i}u);",
          f"        ofl_count({len(COUNTERS) * i + 1}u);",
          "        return XDP_DROP;", "    }",
          "    struct ofl_pkt pkt = { .data = f->b, .len = (uint32_t)len, .cap = OFL_MTU };",
          "    struct ofl_state state;", "    __builtin_memset(&state, 0, sizeof state);",
          f"    return ofl_node_{cname(src.name)}(xdp, &pkt, &state);", "}", "")


def _map_ctl(t: SharedTable, device: str) -> str:
    """A shared map's control fields in its struct ofl_xdp_map: channel, layout, type."""
    if t.ctl != device:
        return "NULL, NULL, 0"
    return (f'"{CTL_CHANNEL_PREFIX}{t.name}", "{mapdecl.layout(t)}", '
            f"'{mapdecl.value_type(t)}'")


def generate_xdp_host(plan: Plan, device: str) -> str:
    """The C file of the xdp device's host side: what its segment is (names, counters)
    for runtime/tools/xdp_run.c, which loads, attaches and runs it; the window's layout
    (common.h: it makes the window when its device comes first); and, when packets
    cross to segments on other devices, the enqueue functions of their queues and the
    function that takes a frame from the AF_XDP socket into its queue (xsk.py)."""
    g = plan.graph
    nodes = segment_nodes(plan, device)
    cross = xsk.crossings(plan, device)
    why_base, ncounters = counter_layout(nodes, len(cross))
    seg = plan.device(device).segments[0]
    src = next(n for n in nodes if n.kind == "source")
    sink = next((n for n in nodes if n.kind == "sink"), None)
    index = {n.name: i for i, n in enumerate(nodes)}
    queues = list(dict.fromkeys(x.qp for x in cross))
    e = Emitter(f"{device}.c")
    e(f"/* Generated by offlow: program `{g.name}`, device `{device}` (XDP): its host side. */",
      '#include "common.h"', '#include "xdp_run.h"', "#include <errno.h>", "#include <stddef.h>",
      "")
    push: dict[tuple[str, int], str] = {}
    if cross:
        e(*xsk.ctx_decl(cross), *xsk.meta_decls(cross), "")
        for qp in queues:
            for k in range(len(qp.queue.channels)):
                e(*qg.push_def(qp, k))
                push[qp.queue.name, k] = qg.push_fn(qp.queue, k)
        e(*xsk.host_up(cross, push))
    tables, chans = device_tables(plan, device), plan.device(device).channels
    named = {ref for c in chans for _, ref in c.handler.tables}
    if chans:  # answered here, on the host CPU, with the NIC's handler code (xdp_chan.h)
        e("/* What the channel handlers see: the shared arrays they name (their maps,",
          " * mapped by xdp_chan.c) and the manager (BULK_REPLY). */",
          "struct ofl_proc {", "    struct ofl_chan_mgr *chan_mgr;",
          *(f"    {t.ctype} *tbl_{cname(t.name)};" for t in tables if t.name in named),
          "};", "static struct ofl_proc ofl_proc_;", "")
        emit_helpers(e, [c.handler for c in chans])
        for c in chans:
            emit_handler(e, g, c)
    e("/* --init: the window every part of the run shares (common.h's layout). */",
      "static int ofl_xdp_init(const struct ofl_args *a) {",
      "    struct ofl_window w;",
      "    size_t ring_off[OFL_NRINGS + 1] = { 0 }, tables_off, chan_off;",
      "    size_t wsize = ofl_layout(ring_off, &tables_off, &chan_off);",
      "    return ofl_prog_init_window(&w, a, wsize, ofl_ring_desc, OFL_NRINGS, ring_off, "
      "chan_off, OFL_NCHAN, ofl_chan_names);", "}", "",
      "/* The window's size, and where each ring is in it. */",
      "static size_t ofl_xdp_layout(size_t *ring_off, size_t *chan_off) {",
      "    size_t tables_off;",
      "    return ofl_layout(ring_off, &tables_off, chan_off);",
      "}", "",
      "static const char *const el_names[] = {" + "".join(f"{c_string(n.name)}, " for n in nodes)
      + "NULL };",
      "static const unsigned why_n[] = {" + "".join(f"{len(n.drops)}u, " for n in nodes) + "0u };",
      "static const unsigned why_base[] = {" + "".join(f"{why_base[n.name]}u, " for n in nodes)
      + "0u };",
      "static const char *const why_names[] = {"
      + "".join(f'"{r}", ' for n in nodes for r, _ in n.drops) + "NULL };",
      *(f"static const struct ofl_xdp_table {var}[] = {{"
        + "".join(f'{{"{t.name}", "{map_prefix(t.name)}"}}, ' for t in tables
                  if t.ctype == f"struct ofl_{var}")
        + "{NULL, NULL} };" for var in ("lpm4", "lpm6")),
      "static const struct ofl_xdp_array arrays[] = {"
      + "".join(f'{{"{t.name}", "{map_prefix(t.name)}", {t.length}u, sizeof({t.ctype}), '
                f'{1 if t.ctype.startswith("int") else 0}, '
                f'{1 if map_kind(g, t)[0] == "percpu" else 0}, '
                + (f"(void **)&ofl_proc_.tbl_{cname(t.name)}" if t.name in named else "NULL")
                + "}, " for t in tables if is_array(t))
      + "{NULL, NULL, 0u, 0u, 0, 0, NULL} };",
      "/* Its shared hash maps: name, map, key and value bytes, entries; the control",
      "   channel, layout and value type of each served here (xdp_mapctl.h). */",
      "static const struct ofl_xdp_map maps[] = {"
      + "".join(f'{{"{t.name}", "{map_prefix(t.name)}", {t.map_key_size}u, '
                f"{t.map_value_size}u, {t.map_entries}u, " + _map_ctl(t, device) + "}, "
                for t in tables if t.is_map)
      + "{NULL, NULL, 0u, 0u, 0u, NULL, NULL, 0} };",
      "/* The queues to other devices: their rings in the window, instance by instance. */",
      "static const struct ofl_xdp_queue queues[] = {"
      + "".join(f'{{"{qp.queue.name}", &ofl_xdp_ctx.out_{cname(qp.queue.name)}, '
                f"{qp.rings[0].index}u, {qp.queue.instances}u, {qp.consumers}u, "
                f"{1 if qp.queue.enqueue == 'drop' else 0}}}, " for qp in queues)
      + "{NULL, NULL, 0u, 0u, 0u, 0} };",
      "/* The queue of each crossing, by its code; the XDP side's drop reasons of each. */",
      "static const char *const cross_why[] = {"
      + "".join(f'"{r}", ' for r in xsk.REASONS) + "NULL };",
      "static const unsigned cross_queue[] = {"
      + "".join(f"{queues.index(x.qp)}u, " for x in cross) + "0u };",
      *(["/* The channels this device serves, each with its handler. */",
         "static const struct ofl_xdp_chan chans[] = {"
         + "".join(f'{{"{c.name}", ofl_handler_{cname(c.name)}}}, ' for c in chans)
         + "{NULL, NULL} };"] if chans else []), "",
      "static const struct ofl_xdp_desc desc = {",
      f'    .segment = "{seg.name}", .prog = "ofl_xdp_{cname(seg.name)}",',
      f'    .source = "{src.name}", .source_el = {index[src.name]}u,',
      f'    .sink = {json.dumps(sink.name) if sink else "NULL"}, '
      f".sink_el = {index[sink.name] if sink else 0}u,",
      f"    .el_names = el_names, .nel = {len(nodes)}u, .why_n = why_n, .why_base = why_base,",
      f"    .why_names = why_names, .mtu = {g.mtu}u, .lpm4 = lpm4, .lpm6 = lpm6,",
      "    .arrays = arrays, .maps = maps, .init = ofl_xdp_init, .layout = ofl_xdp_layout,",
      "    .rings = ofl_ring_desc, .queues = queues, .cross_queue = cross_queue,",
      f"    .ncross = {len(cross)}u, "
      f".cross_base = {cross_base(ncounters, len(cross))}u, "
      f".veth_drops = {cross_base(ncounters, len(cross)) - 1}u,",
      f"    .cross_why = cross_why, .ncross_why = {len(xsk.REASONS)}u, .nrings = OFL_NRINGS,",
      f"    .xsk_frame = {xsk.XSK_FRAME}u,",
      *(["    .core = &ofl_xdp_ctx.core, .steer = &ofl_xdp_ctx.steer, .up = ofl_xdp_up,"]
        if cross else []),
      *(["    .chans = chans, .chan_ctx = &ofl_proc_, .chan_mgr = &ofl_proc_.chan_mgr,"]
        if chans else []),
      "};", "",
      "int main(int argc, char **argv) { return ofl_xdp_main(&desc, argc, argv); }")
    return e.text()


def generate_xdp(plan: Plan, device: str) -> str:
    """The eBPF C file of an xdp device: one XDP program per segment."""
    return BpfGen(plan, device).gen()
