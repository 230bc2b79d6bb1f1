"""XDP: a segment placed on `xdp` is compiled to one eBPF program (clang -target bpf)
for the kernel's XDP hook of an interface: its elements' bodies inlined, the
per-packet state on the BPF stack, drops counted per element and reason in a per-CPU
array map. What XDP cannot run is refused at compile time (`refuse_node`,
`refuse_segment`), each with the reason and what to do; docs/targets.md lists them."""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from offlow import buildcache, cbuild
from offlow.codegen import xsk
from offlow.errors import OfflowError
from offlow.ir import Graph, Node, Segment
from offlow.ir.layout import TS_FIELD, state_bytes
from offlow.ir.types import SCALARS
from offlow.lifecycle import signals_deferred
from offlow.targets.base import CompileC, Part, Target, missing_package, no_device
from offlow.targets.one_packet import Says, refuse_packet_work, refuse_stream_code
from offlow.targets.process import init_window
from offlow.targets.verifier import explain_rejection, explain_undeclared

if TYPE_CHECKING:
    from offlow.plan import Plan

BPF_HEADERS = Path("/usr/include/bpf/bpf_helpers.h")
VETH_HEADER = Path("/usr/include/libnl3/netlink/route/link/veth.h")
XSK_HEADER = Path("/usr/include/xdp/xsk.h")
TOOLS = cbuild.RUNTIME / "tools"
# The host side of every xdp segment: its generated xdp.c links these.
HOST_SOURCES = tuple(TOOLS / f"xdp_{m}.c"
                     for m in ("run", "net", "tables", "cross", "xsk", "chan", "mapctl",
                                "vlog"))
HOST_LIBS = ("core", "lpm", "map")  # the runtime libraries those sources use
# The BPF stack is 512 bytes; the generated program keeps the state there beside the
# body's own locals, so the state may take at most this much of it.
STATE_MAX = 256
# Runtime headers whose functions have a BPF form (offlow/codegen/bpf.py compiles
# them into the program); a body naming any other runtime library is refused.
BPF_HEADERS_OK = frozenset({"offlow/pkt.h"})
# The largest shared array, in bytes: one array map value (the kernel's kmalloc limit
# is 4 MiB; half, for the room the map itself takes).
ARRAY_MAX = 2 << 20
# Why an XDP program cannot do what an element does (offlow/targets/one_packet.py).
SAYS = Says(
    keeps_nothing="XDP runs one packet at a time and keeps nothing between them",
    batch_only="; XDP runs one packet at a time: give the element a per-packet body",
    makes="an XDP program can only send on, drop or pass the packet it received",
    sends="an XDP program has one packet and one verdict",
    fails=("an XDP program cannot stop the run: drop the packet with a reason (DROP_WHY) "
           "instead"),
    reads_ts="which XDP does not have",
)


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


# --xdp-mode: the attach flag of each mode (XDP_FLAGS_SKB_MODE, XDP_FLAGS_DRV_MODE).
MODES = ("generic", "native")


def run_options(plan: Plan, iface: str | None, mode: str, given_input: Path | None,
                ring: int = 0, spread: bool = False) -> list[str]:
    """The options of the run's xdp process for `--iface`, `--xdp-mode`, `--xdp-ring`
    and `--xdp-spread` (none when none is given), each checked before any process
    starts: an xdp device to take them, a known mode, an interface that exists here, no
    --input or --xdp-spread with --iface (the packets come from the interface), a ring
    of a power of 2 entries on a device whose packets cross to another."""
    opts: list[str] = []
    if spread:
        if not any(d.target == "xdp" for d in plan.devices):
            raise OfflowError(f"--xdp-spread: no segment of `{plan.name}` is on xdp "
                              "(--set SEG.device=xdp)")
        if iface is not None:
            raise OfflowError(f"--xdp-spread: with --iface {iface} the packets come from "
                              "the interface, on the CPUs its NIC gives them to")
        opts = ["--opt", "xdp.spread=1"]
    if ring:
        if ring < 0 or ring & (ring - 1) or ring > 1 << 14:
            raise OfflowError(f"--xdp-ring {ring}: expected a power of 2 up to 16384 "
                              "(twice as many 4 KiB frames of memory)")
        if not any(xsk.crossings(plan, d.name) for d in plan.devices if d.target == "xdp"):
            raise OfflowError(f"--xdp-ring {ring}: no segment on xdp sends packets to another "
                              "device (the ring is the AF_XDP socket's of that crossing)")
        opts += ["--opt", f"xdp.ring={ring}"]
    if iface is None and mode == "generic":
        return opts
    what = f"--iface {iface}" if iface is not None else f"--xdp-mode {mode}"
    if not any(d.target == "xdp" for d in plan.devices):
        raise OfflowError(f"{what}: no segment of `{plan.name}` is on xdp "
                          "(--set SEG.device=xdp)")
    if mode == "offload":
        raise OfflowError("--xdp-mode offload: not offered (the program and its maps on the "
                          "NIC itself, a Netronome NFP: array and hash maps only, a few "
                          "helpers, no XDP_REDIRECT; no such NIC here to test on, see "
                          "docs/targets.md); use generic or native")
    if mode not in MODES:
        raise OfflowError(f"--xdp-mode {mode}: expected one of {', '.join(MODES)}")
    args = ["--opt", f"xdp.mode={mode}", *opts]
    if iface is None:
        return args
    try:
        socket.if_nametoindex(iface)
    except OSError:
        raise OfflowError(f"--iface {iface}: no such interface in this network namespace "
                          "(`ip link` lists them)") from None
    if given_input is not None:
        raise OfflowError(f"--iface {iface}: the packets come from the interface; --input "
                          f"{given_input} has nowhere to go (leave out --iface to replay it "
                          "through the run's own veth pair)")
    return [*args, "--opt", f"xdp.iface={iface}"]


def compile_bpf(src: Path, obj: Path, what: str, local_headers: Sequence[Path] = (),
                keyed: bool = False) -> Path:
    """Compile eBPF C `src` into object `obj` (flag sets `bpf` and `werror`, the core's
    headers, and the system's multiarch folder for <asm/types.h>), unless the cache
    holds it built from the same source, headers (also `local_headers`: those `src` includes
    from its own folder), flags and compiler; `what` names it in a compile error.
    `keyed`: the object's name carries the digest of those inputs (`NAME-DIGEST.o`), so
    checkouts that share a cache folder never load each other's build; return its path."""
    d = cbuild.description()
    libs = [d.library("core"), d.library("lpm"), d.library("map")]
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                               text=True).stdout.strip()
    args = [*d.flags("bpf", "werror"), *cbuild.include_flags(libs),
            *([f"-I/usr/include/{multiarch}"] if multiarch else [])]
    compiler = d.compiler("bpf")
    inputs = cbuild.digest(src.read_bytes(), *(h.read_bytes() for lib in libs
                                               for h in lib.headers()),
                           *(h.read_bytes() for h in local_headers),
                           " ".join(args).encode(), buildcache.compiler_id(compiler).encode())
    if keyed:
        obj = obj.with_name(f"{obj.name.removesuffix('.o')}-{inputs}.o")
    return buildcache.make(obj, lambda tmp: cbuild.cc(
        compiler, [*args, "-c", str(src), "-o", str(tmp)], what), inputs)


def _shared_elsewhere(g: Graph, segment: Segment) -> tuple[str, str, str] | None:
    """A shared table the segment's elements use that an element of another device's
    segment uses too: (the table, that element, its device); None when there is none."""
    mine = {t for n in g.nodes if n.segment == segment.name for _, t in n.tables}
    device = {s.name: s.device for s in g.segments}
    for n in g.nodes:
        other = device.get(n.segment or "")
        if other is None or other == segment.device:
            continue
        used = [t for _, t in n.tables if t in mine]
        if used:
            return used[0], n.name, other
    return None


class Xdp(Target):
    name = "xdp"
    runs = "eBPF in the kernel's XDP hook of an interface, every packet on the CPU that receives it"
    interconnect = ("XDP metadata and an AF_XDP socket (copy mode) up to segments on "
                    "other devices; the path may also end in XDP (XDP_TX, XDP_DROP)")
    reads_table_files = True  # its host side builds the tables it copies into maps
    sends_tables = False  # (its host side has no table sender: a gpu's waited forever)
    serves_control = False   # its arrays and LPM tables are BPF maps, read by no channel;
    serves_map_control = True  # a hash map's control is served by its host side (fd)

    def unusable(self) -> str | None:
        if shutil.which("clang") is None:
            return missing_package("clang", "the compiler of eBPF programs (clang -target bpf)")
        if not BPF_HEADERS.exists():
            return missing_package("libbpf-dev", "libbpf: the headers of eBPF programs and "
                                   "the library that loads them")
        if not VETH_HEADER.exists():
            return missing_package("libnl-route-3-dev", "libnl-route: it makes the veth "
                                   "pair a run sends its packets through")
        if not XSK_HEADER.exists():
            return missing_package("libxdp-dev", "libxdp: the AF_XDP sockets that take packets "
                                   "up from XDP to host segments")
        probe = subprocess.run(["clang", "-target", "bpf", "-x", "c", "-c", "-o", os.devnull,
                                "-"], input="int x;\n", capture_output=True, text=True)
        if probe.returncode != 0:
            return no_device(f"clang cannot compile for the bpf target: "
                             f"{probe.stderr.strip().splitlines()[-1:]}")
        why = kernel_refuses_bpf()
        return no_device(f"the kernel refuses BPF programs: {why}") if why else None

    def refuse_node(self, g: Graph, node: Node) -> str | None:
        from offlow.codegen.bpf import BPF_TABLES, is_array

        shared = {t.name: t for t in g.shared}
        if node.kind == "handler":  # (run by the host side, over the arrays' maps)
            other = [t for _, t in node.tables if not is_array(shared[t])]
            if other:
                return (f"it uses shared table {other[0]} ({shared[other[0]].ctype}); a "
                        "handler of a segment on xdp runs in its host side over the BPF maps "
                        "of shared integer arrays only: answer from such an array, or place "
                        "the table's segment on another device")
            return None
        why = refuse_stream_code(node, SAYS)
        if why or node.kind != "element":
            return why
        why = refuse_packet_work(node, SAYS)
        if why:
            return why
        other_tables = [t for _, t in node.tables if not is_array(shared[t])
                        and not shared[t].is_map and shared[t].ctype not in BPF_TABLES]
        if other_tables:
            return ("it uses shared table " + ", ".join(
                f"{t} ({shared[t].ctype})" for t in other_tables) + "; of the tables, only "
                "shared integer arrays, shared maps (SharedMap) and the LPM tables "
                "(lpm4_table, lpm6_table) are BPF maps in XDP yet")
        big = [t for _, t in node.tables if is_array(shared[t])
               and shared[t].length * SCALARS[shared[t].ctype] > ARRAY_MAX]
        if big:
            return (f"its shared array {big[0]} takes more than {ARRAY_MAX >> 20} MiB, the "
                    "most one BPF map value here holds: a shorter array")
        other = [h for h in node.includes if h not in BPF_HEADERS_OK]
        if other:
            return (f"its body uses {', '.join(other)}, a runtime library with no BPF build "
                    "(only offlow/pkt.h's parsers run in XDP)")
        return None

    def refuse_segment(self, g: Graph, segment: Segment) -> str | None:
        others = [s.name for s in g.segments if s.device == segment.device and s is not segment]
        if others:
            return (f"device `{segment.device}` also runs segment {others[0]}; an interface "
                    "runs one XDP program: put them in one segment")
        if segment.group or len(segment.cores) > 1:
            return ("XDP runs a segment on whichever CPU receives each packet; it takes no "
                    "cores or core group: give it one core (cores=[0])")
        shared = _shared_elsewhere(g, segment)
        if shared:
            (table, node, device) = shared
            return (f"shared table {table} is also used by element `{node}` on device "
                    f"`{device}`: on xdp a table is a BPF map that only the xdp device's "
                    "own code sees, so the two would count apart; give each device its own "
                    "table, or place the elements on one device")
        for q in g.queues:
            if q.dst_segment == segment.name:
                return (f"its packets come from segment `{q.src_segment}` (queue `{q.name}`): "
                        "packets cross from XDP up to other devices (AF_XDP) but not down "
                        "into XDP; start the path on xdp (its source in this segment), or "
                        "place this segment on another device")
            if q.src_segment == segment.name:
                sizes = [sum(f.size for f in ch.fields if f != TS_FIELD) for ch in q.channels]
                big = next((k for k, n in enumerate(sizes) if n + xsk.TAIL > xsk.META_MAX), None)
                if big is not None:
                    return (f"queue `{q.name}` channel {big} ({q.channels[big].edge}) carries "
                            f"{sizes[big]} bytes of state; in XDP metadata at most "
                            f"{xsk.META_MAX - xsk.TAIL} cross (the kernel's limit): fewer "
                            "fields live across the queue")
        # (without input queues, its path starts at a source: every input is connected)
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
        from offlow.codegen.bpf import generate_xdp, generate_xdp_host

        return {f"{device}.bpf.c": generate_xdp(plan, device),
                f"{device}.c": generate_xdp_host(plan, device)}

    def build(self, plan: Plan, device: str, directory: Path, compile_c: CompileC) -> Path:
        """The eBPF object of the device's segment and the host side that runs it
        (runtime/tools/xdp_run.c); the object is loaded once now, so the kernel's
        verifier has accepted it: a refusal is a compile error naming the element and
        its body line, and the file beside the object that keeps the verifier's log."""
        from offlow.codegen.c import headers

        obj, exe = directory / f"{device}.bpf.o", directory / device
        d = cbuild.description()
        segment = plan.device(device).segments[0].name
        try:
            compile_bpf(directory / f"{device}.bpf.c", obj,
                        f"generated {device}.bpf.c of `{plan.name}`")
        except OfflowError as e:
            raise OfflowError(explain_undeclared(plan.graph, segment, str(e)) or str(e)) from None
        # (cached by the content of its sources, runtime/tools/xdp_*.c among them; libnl's
        # headers for these sources only: the libraries are the archives others link)
        libs = [lib.name for lib in d.closure(d.for_headers(headers(plan.graph)))]
        host = cbuild.build_exe(f"xdp-{plan.name}", [directory / f"{device}.c", *HOST_SOURCES],
                                libs=tuple(dict.fromkeys((*HOST_LIBS, *libs))),
                                includes=[TOOLS, directory],
                                own_sets=("libnl",), link=d.flags("xdp_link"))
        stamp = directory / f"{device}.host"  # the host side the object was checked with
        if stamp.exists() and stamp.read_text() == host.name and exe.exists():
            return exe
        log = obj.with_suffix(".verifier.log")  # (the verifier's whole log, if it refuses)
        log.unlink(missing_ok=True)
        res = subprocess.run([str(host), "--check", str(obj), str(log)], capture_output=True,
                             text=True)
        if res.returncode != 0:
            raise OfflowError(explain_rejection(plan.graph, segment, res.stderr,
                                                log if log.is_file() else None))
        tmp = exe.with_name(f"{exe.name}.tmp{os.getpid()}")
        shutil.copyfile(host, tmp)
        tmp.chmod(0o755)
        tmp.replace(exe)
        stamp.write_text(host.name)
        return exe

    def init_transport(self, binary: Path, window: Path) -> None:
        """The run's window, made by the host side (--init) when xdp comes first."""
        init_window(binary, window)

    def start(self, part: Part) -> subprocess.Popen[bytes]:
        obj = part.binary.with_name(f"{part.device}.bpf.o")
        cmd = [str(part.binary), "--obj", str(obj), "--window", str(part.window),
               "--stats", str(part.stats), "--cpu-base", str(part.cpu_base), *part.args]
        with signals_deferred():  # (as process.py: a stop sent early stays pending)
            return subprocess.Popen(cmd, pass_fds=part.pass_fds)


TARGET = Xdp()
