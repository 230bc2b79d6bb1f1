"""OpenCL C for a segment placed on the gpu target, and the host C that drives it.

The kernel runs one work-item per packet: it copies the packet's record in (the state
fields the segment's elements read or write, and the packet bytes only when a body
uses them: Knapp's RoI), runs the element bodies from the element where the packet
entered the segment, each body as it is written (a function of its own, #line back to
the program), following each body's choice of output to the next element of the
segment until the packet leaves it (an output queue), is dropped or is used up, and
writes back what the host needs: the elements it went through (for their counters),
how it ended, the fields the segment writes and, when a body uses them, the bytes.

The host side (the segment's loop on its device process, offlow/codegen/c.py) parks
each packet that enters the segment in the batch being filled (its descriptor and
state stay on the host; its record and bytes go to the slot's pinned buffers),
submits a batch when it is full or when its inputs are idle, and takes the batches
that are done, oldest first, counting per element and sending each packet on to the
queue of its exit, in arrival order (runtime/lib/gpu: gpu.h)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from offlow import cbuild
from offlow.codegen.c import Emitter, body_enums, emit_helpers, line_directive
from offlow.ir import Graph, Node
from offlow.ir.graph import NO_OUTPUT
from offlow.ir.types import Field, cname, sort_fields
from offlow.plan import Plan, SegmentPlan

# The OpenCL side of the runtime: the prelude, the tables' device forms, and empty
# C library headers for what pkt.h includes.
CL_DIR = cbuild.RUNTIME / "lib" / "gpu" / "cl"
CORE = cbuild.RUNTIME / "core"
# how a packet ended (the `how` word of its output record, bits 16..17); the low byte
# is the exit, or the drop reason; bits 8..15 the element (its index in the segment)
HOW_EXIT, HOW_DROP_WHY, HOW_DROP, HOW_USED = 0, 1, 2, 3
# elements a segment may have: the `visited` word has a bit per element
MAX_ELEMENTS = 32


@dataclass(frozen=True)
class TableForm:
    """How a table type is laid out in device buffers: the OpenCL header that declares
    it and its lookups, the host function that copies a built table into buffers from
    a kernel argument on, and the buffers' element types, in argument order."""

    cl_header: str
    upload: str
    buffers: tuple[tuple[str, str], ...]  # (OpenCL element type, member name)


TABLE_FORMS: dict[str, TableForm] = {
    "struct ofl_lpm4": TableForm("offlow/cl/lpm4.h", "ofl_gpu_lpm4_upload",
                                 (("ushort", "dir"), ("ushort", "tbl24"), ("ushort", "tbl8"))),
    "struct ofl_lpm6": TableForm("offlow/cl/lpm6.h", "ofl_gpu_lpm6_upload",
                                 (("uint", "dir1"), ("uint", "dir2"), ("uint", "dir3"),
                                  ("int", "tree"), ("struct ofl_lpm6_node", "node"),
                                  ("struct ofl_lpm6_level", "lv"), ("ulong", "arena"))),
}
# Runtime headers a body may name on gpu: pkt.h is compiled into every kernel; the
# tables' headers have device forms (TABLE_FORMS).
CL_HEADERS = frozenset({"offlow/pkt.h", "offlow/lpm4.h", "offlow/lpm6.h",
                        "offlow/lpm_tables.h"})


@dataclass(frozen=True)
class Roi:
    """What a segment's kernel reads and writes (the region of interest that crosses):
    its elements in flow order, where packets enter (element names) and leave
    ((element, port) pairs), the state fields touched (in) and written (out), whether
    the packet bytes cross, and its tables."""

    members: tuple[str, ...]
    entries: tuple[str, ...]
    exits: tuple[tuple[str, str], ...]
    touched: tuple[Field, ...]
    written: tuple[Field, ...]
    uses_pkt: bool
    tables: tuple[str, ...]


def roi(g: Graph, p: SegmentPlan) -> Roi:
    """The region of interest of segment `p` (see Roi)."""
    members = tuple(reversed(p.nodes))
    inside = set(members)
    entries = tuple(n for n in members
                    if any(e.src not in inside for e in g.in_edges(n)))
    exits = tuple((n, e.src_port) for n in members for e in g.out_edges(n)
                  if e.dst not in inside)
    reads: set[str] = set()
    writes: set[str] = set()
    uses_pkt = False
    for n in members:
        f = g.node(n).facts
        if f:
            reads |= f.reads
            writes |= f.writes
            uses_pkt |= f.uses_pkt
    state = sort_fields(g.state)
    tables = tuple(dict.fromkeys(ref for n in members for _, ref in g.node(n).tables))
    return Roi(members, entries, exits,
               tuple(f for f in state if f.name in reads | writes),
               tuple(f for f in state if f.name in writes), uses_pkt, tables)


def _cl_decl(f: Field) -> str:
    """A field's member declaration in OpenCL C (bool has no fixed size there)."""
    return f.decl().replace("bool ", "uchar ", 1) if f.base == "bool" else f.decl()


def _copy(f: Field, dst: str, src: str, ind: str) -> str:
    """Copy field `f` from `src` to `dst` (records in different address spaces)."""
    if f.count == 1:
        return f"{ind}{dst}.{f.name} = {src}.{f.name};"
    return (f"{ind}for (uint k = 0; k < {f.count}u; k++) "
            f"{dst}.{f.name}[k] = {src}.{f.name}[k];")


def record_decls(seg: str, r: Roi, cl: bool) -> list[str]:
    """The per-packet input and output records of segment `seg`, the same on both
    sides (checked: the host passes its sizes to the kernel's build)."""
    decl = _cl_decl if cl else (lambda f: f.decl())
    sn = cname(seg)
    return [f"/* A packet of segment {seg} on its way into the kernel: where its bytes are, "
            "where it entered, the fields the segment reads or writes. */",
            f"struct ofl_gpu_in_{sn} {{", "    uint32_t off, len, entry;",
            *(f"    {decl(f)}" for f in r.touched), "};",
            "/* ... and on its way back: the elements it went through, how it ended, the "
            "fields the segment writes. */",
            f"struct ofl_gpu_out_{sn} {{", "    uint32_t visited, how;",
            *(f"    {decl(f)}" for f in r.written), "};"]


def source_literal(text: str) -> list[str]:
    """`text` (the kernel's source, which the host side builds at start) as C string
    literal lines (ASCII; other bytes as octal escapes)."""
    out = []
    for line in text.split("\n"):
        s = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else
                    ("\\" + c if c in '"\\' else
                     "".join(f"\\{b:03o}" for b in c.encode())) for c in line)
        out.append(f'    "{s}\\n"')
    return out


class KernelGen:
    """The OpenCL C of one segment's kernel."""

    def __init__(self, plan: Plan, p: SegmentPlan) -> None:
        self.g = plan.graph
        self.p = p
        self.r = roi(self.g, p)
        self.forms = {t: TABLE_FORMS[self._ctype(t)] for t in self.r.tables}

    def _ctype(self, table: str) -> str:
        return next(t.ctype for t in self.g.shared if t.name == table)

    def source(self) -> str:
        g, r, sn = self.g, self.r, cname(self.p.name)
        e = Emitter(f"{self.p.name}.cl")
        e(f"/* Generated by offlow: program `{g.name}`, segment `{self.p.name}` on gpu: "
          "one work-item per packet. */", "#include <offlow/cl/prelude.h>",
          *(f"#include <{h}>" for h in dict.fromkeys(f.cl_header for f in self.forms.values())),
          f"#define OFL_MTU {g.mtu}u", "", "struct ofl_state {")
        for f in sort_fields(g.state) or ():
            e(f"    {_cl_decl(f)}")
        if not g.state:
            e("    uchar ofl_unused_;")
        e("};", *record_decls(self.p.name, r, cl=True),
          f"OFL_CL_CHECK(in, sizeof(struct ofl_gpu_in_{sn}) == OFL_GPU_IN_SIZE);",
          f"OFL_CL_CHECK(out, sizeof(struct ofl_gpu_out_{sn}) == OFL_GPU_OUT_SIZE);", "")
        nodes = [g.node(n) for n in r.members]
        emit_helpers(e, nodes)
        for n in nodes:
            self._body(e, n)
        self._kernel(e, nodes)
        return e.text()

    def _table_params(self, n: Node) -> list[str]:
        return [f"struct {self._ctype(ref).split()[-1]} *{local}" for local, ref in n.tables]

    def _body(self, e: Emitter, n: Node) -> None:
        params = ", ".join(["struct ofl_pkt *pkt", "struct ofl_state *state",
                            "uint *ofl_mask_", *self._table_params(n)])
        e(f"/* Element {n.name} ({n.cls}). */",
          f"static void ofl_body_{cname(n.name)}({params}) {{",
          *("    " + line for line in body_enums(n)))
        e(*(f"    const {ct} {name} = {lit};" for name, ct, lit in n.params))
        used = ["pkt", "state", "ofl_mask_", *(x[0] for x in n.params), *(t[0] for t in n.tables)]
        e("    " + " ".join(f"(void){u};" for u in used),
          line_directive(n.origin, n.body_line, f"<body of {n.name}>"), n.body)
        e.resync()
        e(*(f"#undef {m}" for m in (n.facts.macros if n.facts else ())), "}", "")

    def _after(self, n: Node, k: int) -> list[str]:
        """What follows element k's body (its choice in m): the next element of the
        segment, or how the packet ended; mirrors DeviceGen._after_body."""
        r = self.r
        pre = k << 8
        out = [f"            if (m & OFL_WHY) {{ how = {HOW_DROP_WHY << 16 | pre}u | (m & 0xFFu); "
               "end = 1; break; }"]
        if not n.outputs:
            return [*out, f"            how = m == OFL_DECIDED ? {HOW_DROP << 16 | pre}u : "
                          f"{HOW_USED << 16 | pre}u;", "            end = 1; break;"]
        default = 1 if len(n.outputs) == 1 else 0
        if NO_OUTPUT[0] in dict(n.drops):  # (its body chose nothing: m is 0)
            why = [r for r, _ in n.drops].index(NO_OUTPUT[0])
            out.append(f"            if (!m) {{ how = {HOW_DROP_WHY << 16 | pre | why}u; "
                       "end = 1; break; }")
        out += [f"            m = (m & OFL_DECIDED) ? (m & ~OFL_DECIDED) : (m ? m : {default}u);",
                f"            if (!m) {{ how = {HOW_DROP << 16 | pre}u; end = 1; break; }}",
                f"            if (m & OFL_CONSUMED) {{ how = {HOW_USED << 16 | pre}u; end = 1; "
                "break; }"]
        for j, port in enumerate(n.outputs):
            edge = next(x for x in self.g.out_edges(n.name) if x.src_port == port.name)
            if (n.name, port.name) in r.exits:
                go = f"how = {HOW_EXIT << 16}u | {r.exits.index((n.name, port.name))}u; end = 1;"
            else:
                go = f"node = {r.members.index(edge.dst)}u;"
            out.append(f"            {'if' if j == 0 else 'else if'} (m & {1 << j}u) {{ {go} }}")
        return [*out, "            break;"]

    def _kernel(self, e: Emitter, nodes: list[Node]) -> None:
        r, sn = self.r, cname(self.p.name)
        targs = [f"__global const {ty} *{cname(t)}_{m}"
                 for t, form in self.forms.items() for ty, m in form.buffers]
        e(f"__kernel void ofl_seg_{sn}(__global const struct ofl_gpu_in_{sn} *in, "
          "__global uchar *bytes,", f"        __global struct ofl_gpu_out_{sn} *out, uint n"
          + "".join(f",\n        {a}" for a in targs) + ") {",
          "    uint i = get_global_id(0);", "    if (i >= n) return;",
          "    struct ofl_state st;", "    memset(&st, 0, sizeof st);",
          *(_copy(f, "st", "in[i]", "    ") for f in r.touched),
          "    uchar data[OFL_MTU];", "    const uint off = in[i].off, len = in[i].len;")
        if r.uses_pkt:
            e("    for (uint k = 0; k < len; k++) data[k] = bytes[off + k];")
        e("    struct ofl_pkt pk;", "    pk.data = data; pk.len = len; pk.cap = OFL_MTU; "
          "pk.ts_ns = 0; pk.seg = 0;")
        for t, form in self.forms.items():
            e(f"    struct {self._ctype(t).split()[-1]} tbl_{cname(t)} = {{ "
              + ", ".join(f"{cname(t)}_{m}" for _, m in form.buffers) + " };")
        e("    uint node = in[i].entry, visited = 0, how = 0;",
          f"    for (int end = 0, steps = 0; !end && steps < {len(nodes)}; steps++) {{",
          "        uint m = 0;", "        switch (node) {")
        for k, n in enumerate(nodes):
            args = ["&pk", "&st", "&m", *(f"&tbl_{cname(ref)}" for _, ref in n.tables)]
            e(f"        case {k}u: /* {n.name} */", f"            visited |= {1 << k}u;",
              f"            ofl_body_{cname(n.name)}({', '.join(args)});", *self._after(n, k))
        e("        default: end = 1; break;", "        }", "    }",
          "    out[i].visited = visited;", "    out[i].how = how;",
          *(_copy(f, "out[i]", "st", "    ") for f in r.written))
        if r.uses_pkt:
            e("    for (uint k = 0; k < len; k++) bytes[off + k] = data[k];")
        e("    (void)bytes;", "}")


def kernel_source(plan: Plan, p: SegmentPlan) -> str:
    """The OpenCL C of segment `p`'s kernel."""
    return KernelGen(plan, p).source()


def build_options() -> str:
    """The OpenCL compiler's options for every kernel (without the record sizes)."""
    return (f"-cl-std=CL1.2 -I{CL_DIR / 'shim'} -I{CL_DIR} -I{CORE / 'include'} "
            f"-I{CORE / 'src'}")



def program_position(kernel: str, line: int) -> tuple[str, int] | None:
    """Where line `line` (1-based) of `kernel` comes from, by the kernel's own #line
    directives (what a C preprocessor would report): a file and its line, or None for a
    line before the first directive."""
    where = None
    for k, text in enumerate(kernel.split("\n")[:line - 1], start=1):
        if text.startswith("#line "):
            _, number, name = text.split(None, 2)
            where = (json.loads(name), int(number), k)
    if where is None:
        return None
    name, number, k = where
    return name, number + line - (k + 1)


# a position in the kernel as NVIDIA's compiler gives it (it ignores #line)
_KERNEL_POSITION = re.compile(r"<kernel>:(\d+):(\d+):")


def point_into_program(log: str, kernel: str) -> str:
    """An OpenCL compiler's log with the kernel positions it names (`<kernel>:LINE:COL:`,
    from compilers that ignore #line) rewritten to the program's files and lines; a log
    that honours #line (PoCL's) is returned as it is."""
    def where(m: re.Match[str]) -> str:
        pos = program_position(kernel, int(m.group(1)))
        return f"{pos[0]}:{pos[1]}:{m.group(2)}:" if pos else m.group(0)
    return _KERNEL_POSITION.sub(where, log)
