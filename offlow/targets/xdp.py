"""XDP: a segment placed on `xdp` is compiled to one eBPF program (clang -target bpf)
for the kernel's XDP hook of an interface: its elements' bodies inlined, the
per-packet state on the BPF stack, drops counted per element and reason in a per-CPU
array map. What XDP cannot run is refused at compile time (`refuse_node`,
`refuse_segment`), each with the reason and what to do; docs/targets.md lists them."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

from offlow import cbuild
from offlow.codegen.bpf import generate_xdp
from offlow.errors import OfflowError
from offlow.ir import Graph, Node, Segment
from offlow.ir.layout import state_bytes
from offlow.ir.types import cname
from offlow.plan import Plan
from offlow.targets.base import CompileC, Target, missing_package, no_device
from offlow.targets.verifier import explain_rejection

BPF_HEADERS = Path("/usr/include/bpf/bpf_helpers.h")
# The BPF stack is 512 bytes; the generated program keeps the state there beside the
# body's own locals, so the state may take at most this much of it.
STATE_MAX = 256
# Runtime headers whose functions have a BPF form (offlow/codegen/bpf.py compiles
# them into the program); a body naming any other runtime library is refused.
BPF_HEADERS_OK = frozenset({"offlow/pkt.h"})
_NOT_YET = ("the crossing between XDP and segments on other devices (AF_XDP with the live "
            "fields in XDP metadata) is not implemented yet")


def kernel_refuses_bpf() -> str | None:
    """Why the kernel refuses to load an XDP program (the smallest: `return XDP_PASS`),
    as its error text; None when it loads one."""
    sys_bpf = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)
    if sys_bpf is None:
        return f"no bpf() system call number known for {os.uname().machine}"
    libc = ctypes.CDLL(None, use_errno=True)
    insns = ctypes.create_string_buffer(
        bytes([0xB7, 0, 0, 0, 2, 0, 0, 0,  # r0 = XDP_PASS
               0x95, 0, 0, 0, 0, 0, 0, 0]))  # exit
    lic = ctypes.create_string_buffer(b"GPL")

    class ProgLoad(ctypes.Structure):  # the first fields of union bpf_attr
        _fields_ = [("prog_type", ctypes.c_uint32), ("insn_cnt", ctypes.c_uint32),
                    ("insns", ctypes.c_uint64), ("license", ctypes.c_uint64),
                    ("log_level", ctypes.c_uint32), ("log_size", ctypes.c_uint32),
                    ("log_buf", ctypes.c_uint64), ("pad", ctypes.c_uint8 * 96)]

    attr = ProgLoad(prog_type=6, insn_cnt=2, insns=ctypes.addressof(insns),  # BPF_PROG_TYPE_XDP
                    license=ctypes.addressof(lic))
    fd = libc.syscall(sys_bpf, 5, ctypes.byref(attr), ctypes.sizeof(attr))  # BPF_PROG_LOAD
    if fd < 0:
        err = ctypes.get_errno()
        return f"{os.strerror(err)} (errno {err}; loading BPF needs root or CAP_BPF)"
    os.close(fd)
    return None


class Xdp(Target):
    name = "xdp"
    runs = "eBPF in the kernel's XDP hook of an interface, every packet on the CPU that receives it"
    interconnect = ("none yet: a segment on xdp takes its packets from the interface and "
                    "ends them there (XDP_TX, XDP_DROP)")
    reads_table_files = False

    def unusable(self) -> str | None:
        if shutil.which("clang") is None:
            return missing_package("clang", "the compiler of eBPF programs (clang -target bpf)")
        if not BPF_HEADERS.exists():
            return missing_package("libbpf-dev", "libbpf: the headers of eBPF programs and "
                                   "the library that loads them")
        probe = subprocess.run(["clang", "-target", "bpf", "-x", "c", "-c", "-o", os.devnull,
                                "-"], input="int x;\n", capture_output=True, text=True)
        if probe.returncode != 0:
            return no_device(f"clang cannot compile for the bpf target: "
                             f"{probe.stderr.strip().splitlines()[-1:]}")
        why = kernel_refuses_bpf()
        return no_device(f"the kernel refuses BPF programs: {why}") if why else None

    def refuse_node(self, g: Graph, node: Node) -> str | None:
        facts = node.facts
        if node.kind == "handler":
            return ("a channel handler runs on messages from the host; XDP has no channel "
                    "to the host (" + _NOT_YET + ")")
        if node.prelude or node.at_end:
            return ("a node the compiler made (a cache's) runs code of its own between "
                    "packets; XDP runs one packet at a time and keeps nothing between them")
        if node.kind != "element":
            return None
        if node.batch_body and not node.body.strip():
            return ("it has only a batch body; XDP runs one packet at a time: give the "
                    "element a per-packet body")
        if facts and facts.makes:
            return ("it builds packets (MAKE); an XDP program can only send on, drop or "
                    "pass the packet it received")
        if facts and facts.sends:
            return ("it sends copies of a packet (SEND); an XDP program has one packet and "
                    "one verdict")
        if facts and facts.reads_ts:
            return "it reads the packet's capture time (pkt->ts_ns), which XDP does not have"
        if node.tables:
            return ("it uses shared tables (" + ", ".join(t for _, t in node.tables)
                    + "); tables as BPF maps are not implemented yet")
        other = [h for h in node.includes if h not in BPF_HEADERS_OK]
        if other:
            return (f"its body uses {', '.join(other)}, a runtime library with no BPF build "
                    "(only offlow/pkt.h's parsers run in XDP)")
        return None

    def refuse_segment(self, g: Graph, segment: Segment) -> str | None:
        if segment.group or len(segment.cores) > 1:
            return ("XDP runs a segment on whichever CPU receives each packet; it takes no "
                    "cores or core group: give it one core (cores=[0])")
        for q in g.queues:
            if segment.name in (q.src_segment, q.dst_segment):
                other = q.dst_segment if q.src_segment == segment.name else q.src_segment
                return (f"its packets go to or come from segment `{other}` (queue "
                        f"`{q.name}`): {_NOT_YET}; place the whole path on xdp (from the "
                        "source to the sink), or this segment on another device")
        # (without queues, its path starts at a source: every input is connected)
        sinks = [n.name for n in g.nodes if n.segment == segment.name and n.kind == "sink"]
        if len(sinks) > 1:
            return (f"it has {len(sinks)} sinks ({', '.join(sinks)}); XDP sends a packet "
                    "back out of the interface it came in on (XDP_TX): give it one sink")
        size = state_bytes(g.state)
        if size > STATE_MAX:
            return (f"the per-packet state takes {size} bytes; on the 512-byte BPF stack "
                    f"it may take at most {STATE_MAX}: fewer or smaller fields")
        return None

    def generate(self, plan: Plan, device: str) -> dict[str, str]:
        return {f"{device}.bpf.c": generate_xdp(plan, device)}

    def build(self, plan: Plan, device: str, directory: Path, compile_c: CompileC) -> Path:
        """The eBPF object of the device's segments, each program checked by the
        kernel's verifier now: a rejection is a compile error naming the element and
        its body line."""
        obj = directory / f"{device}.bpf.o"
        if obj.exists():
            return obj
        d = cbuild.description()
        multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                                   text=True).stdout.strip()
        tmp = obj.with_name(f"{obj.name}.tmp{os.getpid()}")
        cbuild.cc(d.compiler("bpf"), [
            *d.flags("bpf", "werror"), *cbuild.include_flags([d.library("core")]),
            *([f"-I/usr/include/{multiarch}"] if multiarch else []),
            "-c", str(directory / f"{device}.bpf.c"), "-o", str(tmp)],
            f"generated {device}.bpf.c of `{plan.name}`")
        loader = loader_exe()
        for seg in plan.device(device).segments:
            res = subprocess.run([str(loader), "--check", str(tmp), f"ofl_xdp_{cname(seg.name)}"],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                tmp.unlink()
                raise OfflowError(explain_rejection(plan.graph, seg.name, res.stderr))
        tmp.rename(obj)
        return obj

    def init_transport(self, binary: Path, window: Path) -> None:
        raise OfflowError("running a segment on xdp is not implemented yet: `offlow run` "
                          "builds it and has the kernel's verifier check it; run it on nic")


def loader_exe() -> Path:
    """offlow-xdp, the loader (runtime/tools/xdp_main.c), built once."""
    d = cbuild.description()
    return cbuild.build_exe("offlow-xdp", [cbuild.RUNTIME / "tools" / "xdp_main.c"],
                            link=d.flags("xdp_link"))


TARGET = Xdp()
