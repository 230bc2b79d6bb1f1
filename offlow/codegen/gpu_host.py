"""The C file of a gpu device's process: the segment's loop as for any device
(offlow.codegen.c: its input rings, its output queues, its counters), where each packet
that enters the segment waits in the batch being filled instead of running the
elements' bodies here; a full batch (or the last one when the inputs are idle) goes
to the OpenCL device, `depth` of them in flight (runtime/lib/gpu: gpu.h), and the
batches that are done go on in order: counters per element, each packet to the queue
of the exit the kernel chose. The kernel is offlow.codegen.opencl's, built when the
process starts (and by `--gpu-check`, at compile time)."""

from __future__ import annotations

from offlow.codegen import opencl as cl
from offlow.codegen.c import DeviceGen
from offlow.ir import Node
from offlow.ir.types import Field, cname
from offlow.plan import Plan, SegmentPlan


def _copy(f: Field, dst: str, src: str, ind: str) -> str:
    if f.count == 1:
        return f"{ind}{dst}->{f.name} = {src}->{f.name};"
    return f"{ind}memcpy({dst}->{f.name}, {src}->{f.name}, sizeof {dst}->{f.name});"


class GpuDeviceGen(DeviceGen):
    """The C file of a gpu device (one segment: Gpu.refuse_segment)."""

    def __init__(self, plan: Plan, device: str) -> None:
        super().__init__(plan, device)
        self.p = self.plans[0]
        self.r = cl.roi(self.g, self.p)
        self.sn = cname(self.p.name)
        self.kernel = cl.kernel_source(plan, self.p)
        self.batches_done = False

    def runs_here(self, node: Node) -> bool:
        return node.name not in self.r.members or node.name in self.r.entries

    def extra_includes(self) -> list[str]:
        return ["#include <offlow/gpu_lpm.h>", "", *cl.record_decls(self.p.name, self.r, False)]

    def ctx_extra(self) -> list[str]:
        return ["    /* the gpu segment: its device, the slot being filled (g_n packets, g_nbytes",
                "     * of packet data), the oldest batch in flight and how many are; every",
                "     * slot's packet descriptors and states, kept here */",
                "    struct ofl_gpu *gpu;",
                "    unsigned g_fill, g_next, g_inflight, g_n;", "    size_t g_nbytes;",
                "    struct ofl_pkt *g_pkts;", "    struct ofl_state *g_states;"]

    def gen_node(self, n: Node) -> None:
        if n.name not in self.r.members:
            super().gen_node(n)
            return
        if not self.batches_done:  # (before the first entry point that parks packets)
            self._gen_batches()
            self.batches_done = True
        if n.name in self.r.entries:
            self.e(f"/* {n.name} runs in segment {self.p.name}'s kernel: the packet waits in the "
                   "batch. */",
                   f"static void ofl_node_{cname(n.name)}(struct ofl_ctx *ctx, "
                   "struct ofl_pkt *pkt, struct ofl_state *state) {",
                   f"    ofl_gpu_park(ctx, pkt, state, {self.r.members.index(n.name)}u);",
                   "}", "")

    def _gen_batches(self) -> None:
        """The functions that fill, send and take the segment's batches."""
        e, r, p, sn = self.e, self.r, self.p, self.sn
        members = [self.g.node(m) for m in r.members]
        e(f"/* Segment {p.name} on gpu: batches of up to {p.batch}, {p.depth} in flight. */",
          f"#define OFL_GPU_BATCH {p.batch}u", f"#define OFL_GPU_DEPTH {p.depth}u",
          f"#define OFL_GPU_NEL {len(members)}u", "/* each element's counter index */",
          "static const unsigned ofl_gpu_el[] = { "
          + ", ".join(f"{self.index[m.name]}u" for m in members) + " };",
          "static const unsigned ofl_gpu_why[] = { "
          + ", ".join(f"{self.why_base[m.name]}u" for m in members) + " };",
          "static const unsigned ofl_gpu_nwhy[] = { "
          + ", ".join(f"{len(m.drops)}u" for m in members) + " };", "",
          "static int ofl_gpu_take(struct ofl_ctx *ctx, int wait);", "",
          "/* Send the batch being filled (waiting for none: its slot was free). */",
          "static void ofl_gpu_send(struct ofl_ctx *ctx) {",
          "    if (!ctx->g_n || ctx->core.err) return;",
          "    int rc = ofl_gpu_submit(ctx->gpu, ctx->g_fill, ctx->g_n, "
          + ("ctx->g_nbytes" if r.uses_pkt else "0") + ");",
          "    if (rc < 0) { ofl_core_fail(&ctx->core, rc, ofl_gpu_error(ctx->gpu)); return; }",
          "    ctx->g_inflight++;", "    ctx->g_fill = (ctx->g_fill + 1) % OFL_GPU_DEPTH;",
          "    ctx->g_n = 0;", "    ctx->g_nbytes = 0;", "}", "",
          "/* A packet enters the segment at element `entry`: into the batch being filled. */",
          "static void ofl_gpu_park(struct ofl_ctx *ctx, struct ofl_pkt *pkt, "
          "struct ofl_state *state, uint32_t entry) {",
          "    /* every slot in flight: the oldest must come back before this one fills */",
          "    while (ctx->g_n == 0 && ctx->g_inflight == OFL_GPU_DEPTH && !ctx->core.err)",
          "        ofl_gpu_take(ctx, 1);",
          "    if (ctx->core.err) return;",
          "    struct ofl_gpu_slot *s = ofl_gpu_slot(ctx->gpu, ctx->g_fill);",
          "    const uint32_t j = ctx->g_n++;",
          "    const size_t at = (size_t)ctx->g_fill * OFL_GPU_BATCH + j;",
          "    uint8_t *data = s->bytes + ctx->g_nbytes; /* (len <= OFL_MTU: the queue's) */",
          "    memcpy(data, pkt->data, pkt->len);",
          "    ctx->g_pkts[at] = *pkt;", "    ctx->g_pkts[at].data = data;",
          "    ctx->g_pkts[at].cap = pkt->len;", "    ctx->g_states[at] = *state;",
          f"    struct ofl_gpu_in_{sn} *rec = (struct ofl_gpu_in_{sn} *)s->in + j;",
          "    rec->off = (uint32_t)ctx->g_nbytes;", "    rec->len = pkt->len;",
          "    rec->entry = entry;", *(_copy(f, "rec", "state", "    ") for f in r.touched),
          "    ctx->g_nbytes += pkt->len;",
          "    if (ctx->g_n == OFL_GPU_BATCH) ofl_gpu_send(ctx);", "}", "",
          "/* The oldest batch in flight, when it is done (`wait`: wait for it): each packet",
          " * counted at the elements it went through and sent on, in order. Returns 1 when",
          " * it took one. */",
          "static int ofl_gpu_take(struct ofl_ctx *ctx, int wait) {",
          "    if (!ctx->g_inflight || ctx->core.err) return 0;",
          "    int rc = ofl_gpu_poll(ctx->gpu, ctx->g_next, wait);",
          "    if (rc < 0) ofl_core_fail(&ctx->core, rc, ofl_gpu_error(ctx->gpu));",
          "    if (rc <= 0) return 0;",
          "    struct ofl_gpu_slot *s = ofl_gpu_slot(ctx->gpu, ctx->g_next);",
          f"    const struct ofl_gpu_out_{sn} *o = s->out;",
          "    for (uint32_t j = 0; j < s->n; j++) {",
          "        const size_t at = (size_t)ctx->g_next * OFL_GPU_BATCH + j;",
          "        struct ofl_pkt *pkt = &ctx->g_pkts[at];",
          "        struct ofl_state *state = &ctx->g_states[at];",
          *(_copy(f, "state", "(o + j)", "        ") for f in r.written),
          "        const uint32_t how = o[j].how, k = how >> 8 & 0xFFu, low = how & 0xFFu;",
          "        if (k >= OFL_GPU_NEL || (how >> 16) > 3u || o[j].visited >> OFL_GPU_NEL ||",
          f"            (how >> 16 == 0 && low >= {len(r.exits)}u) ||",
          "            (how >> 16 == 1 && low >= ofl_gpu_nwhy[k])) {",
          f"            ofl_core_fail(&ctx->core, -EIO, \"segment {p.name}: the kernel "
          "returned an impossible result\");",
          "            return 0;", "        }",
          "        for (uint32_t v = o[j].visited; v; v &= v - 1)",
          "            ctx->el_in[ofl_gpu_el[__builtin_ctz(v)]]++;",
          "        switch (how >> 16) {", "        case 0:", "            switch (low) {")
        for x, (node, port) in enumerate(r.exits):
            e(f"            case {x}u: {self.target(self.g.node(node), port)}(ctx, pkt, state); "
              f"break; /* {node}.{port} */")
        e("            default: break;", "            }", "            break;",
          "        case 1: ctx->el_drop[ofl_gpu_el[k]]++; ctx->el_why[ofl_gpu_why[k] + low]++; "
          "break;", "        case 2: ctx->el_drop[ofl_gpu_el[k]]++; break;",
          "        default: ctx->el_used[ofl_gpu_el[k]]++; break;", "        }", "    }",
          "    ctx->g_inflight--;", "    ctx->g_next = (ctx->g_next + 1) % OFL_GPU_DEPTH;",
          "    return 1;", "}", "",
          "/* The segment's inputs are done: the last batch goes, every batch comes back. */",
          "static void ofl_gpu_drain(struct ofl_ctx *ctx) {",
          "    struct ofl_core *core = &ctx->core;", "    ofl_gpu_send(ctx);",
          "    while (ctx->g_inflight && !core->err) ofl_gpu_take(ctx, 1);")
        self._flush(p, "    ")
        e("}", "", *self._spec_fn(), "")

    def _spec_fn(self) -> list[str]:
        r, sn = self.r, self.sn
        return ["/* The kernel: its OpenCL C (offlow/codegen/opencl.py), build options, and the",
                " * geometry of the batches. */",
                "static const char ofl_gpu_src[] =", *cl.source_literal(self.kernel), ";",
                "static void ofl_gpu_spec(struct ofl_gpu_spec *spec, char *opts, size_t len) {",
                f"    snprintf(opts, len, \"%s -DOFL_GPU_IN_SIZE=%zuu -DOFL_GPU_OUT_SIZE=%zuu\", "
                f"\"{cl.build_options()}\",",
                f"             sizeof(struct ofl_gpu_in_{sn}), sizeof(struct ofl_gpu_out_{sn}));",
                f"    *spec = (struct ofl_gpu_spec){{ .source = ofl_gpu_src, .options = opts, "
                f".kernel = \"ofl_seg_{sn}\",",
                "        .batch = OFL_GPU_BATCH, .depth = OFL_GPU_DEPTH,",
                f"        .in_rec = sizeof(struct ofl_gpu_in_{sn}), "
                f".out_rec = sizeof(struct ofl_gpu_out_{sn}),",
                "        .bytes_cap = (size_t)OFL_GPU_BATCH * OFL_MTU, "
                f".bytes_cross = {1 if r.uses_pkt else 0} }};", "}"]

    def _ctx(self) -> str:
        return f"ofl_ctxs[{self.ctx_index[(self.p.name, 0)]}]"

    def turn_end(self, p: SegmentPlan) -> list[str]:
        return ["    /* batches done go on; the inputs idle: the batch being filled goes */",
                "    for (int took = 1; took;) {", "        took = ofl_gpu_take(ctx, 0);",
                "        progress |= took;", "    }",
                "    if (!progress && ctx->g_n) ofl_gpu_send(ctx);",
                "    progress |= ctx->g_inflight > 0; /* busy-poll while a batch is out */"]

    def loop_end(self, p: SegmentPlan) -> list[str]:
        return ["    if (!core->err) ofl_gpu_drain(ctx);"]

    def main_first(self) -> list[str]:
        return ["    if (argc == 2 && strcmp(argv[1], \"--gpu-check\") == 0) {",
                "        /* compile time: does the kernel build on this machine's device? */",
                "        struct ofl_gpu_spec spec;", "        char opts[2048];",
                "        char err[OFL_GPU_ERRLEN];", "        struct ofl_gpu *g;",
                "        ofl_gpu_spec(&spec, opts, sizeof opts);",
                "        spec.batch = spec.depth = 1;", "        spec.bytes_cap = OFL_MTU;",
                "        if (ofl_gpu_open(&g, &spec, err) < 0) {",
                "            printf(\"%s\\n\", err); /* (stdout: the OpenCL compiler may print "
                "on stderr) */", "            return 1;",
                "        }",
                "        printf(\"%s\\n\", ofl_gpu_device(g));", "        ofl_gpu_close(g);",
                "        return 0;", "    }"]

    def main_setup(self) -> list[str]:
        p, ctx = self.p, self._ctx()
        out = [f"    /* segment {p.name}: its kernel built for the OpenCL device, its tables "
               "copied there */",
               "    {", "        struct ofl_gpu_spec spec;", "        char opts[2048];",
               "        char err[OFL_GPU_ERRLEN];",
               "        ofl_gpu_spec(&spec, opts, sizeof opts);",
               f"        if (ofl_gpu_open(&{ctx}.gpu, &spec, err) < 0) {{",
               *self.start_fail("            ", f"segment {p.name}: %s", "err"), "        }"]
        arg = 4
        for t in self.r.tables:
            form = cl.TABLE_FORMS[next(x.ctype for x in self.g.shared if x.name == t)]
            out += [f"        if ({form.upload}({ctx}.gpu, {arg}u, proc->tbl_{cname(t)}) < 0) {{",
                    *self.start_fail("            ", f"table {t} on the device: %s",
                                     f"ofl_gpu_error({ctx}.gpu)"), "        }"]
            arg += len(form.buffers)
        return [*out,
                f"        {ctx}.g_pkts = calloc((size_t)OFL_GPU_DEPTH * OFL_GPU_BATCH, "
                "sizeof(struct ofl_pkt));",
                f"        {ctx}.g_states = calloc((size_t)OFL_GPU_DEPTH * OFL_GPU_BATCH, "
                "sizeof(struct ofl_state));",
                f"        if (!{ctx}.g_pkts || !{ctx}.g_states) {{",
                *self.start_fail("            ", f"segment {p.name}: out of memory"), "        }",
                f"        fprintf(stderr, \"offlow %s: segment {p.name} on %s: batches of up to "
                f"%u packets, %u in flight\\n\", proc->args.device, ofl_gpu_device({ctx}.gpu), "
                "OFL_GPU_BATCH, OFL_GPU_DEPTH);", "    }"]

    def main_teardown(self) -> list[str]:
        ctx = self._ctx()
        return [f"    ofl_gpu_close({ctx}.gpu);", f"    free({ctx}.g_pkts);",
                f"    free({ctx}.g_states);"]


def generate_gpu_device(plan: Plan, device: str) -> str:
    """The C file of a gpu device's process."""
    return GpuDeviceGen(plan, device).gen()
