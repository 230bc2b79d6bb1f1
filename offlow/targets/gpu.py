"""The gpu target: a segment placed on `gpu` is compiled to one OpenCL C kernel, one
work-item per packet (offlow/codegen/opencl.py), run over batches by a process of its
own on this machine (the host side, offlow/codegen/gpu_host.py with runtime/lib/gpu),
N batches in flight on separate command queues. Its tables live in device buffers,
copied there once they are built. It runs on any OpenCL platform: PoCL on this
machine's CPU in CI, a GPU through its driver's OpenCL where there is one. What a
kernel cannot run is refused at compile time (`refuse_node`, `refuse_segment`), each
with the reason and what to do; docs/targets.md lists them."""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from offlow.errors import OfflowError
from offlow.ir import Graph, Node, Segment
from offlow.targets.base import CompileC, header_found, missing_package, no_device
from offlow.targets.one_packet import Says, refuse_packet_work, refuse_stream_code
from offlow.targets.process import ProcessTarget

if TYPE_CHECKING:
    from offlow.plan import Plan

CL_HEADER = "CL/cl.h"
# Offload defaults: packets per batch (Knapp's best was 512 on a Xeon Phi; a GPU wants
# more) and batches in flight (double buffering).
DEFAULT_BATCH = 1024
DEFAULT_DEPTH = 2
# Why a kernel's work-item cannot do what an element does (offlow/targets/one_packet.py).
SAYS = Says(
    keeps_nothing="a kernel's work-items keep nothing between packets",
    batch_only=(", which runs over a vector of packets on one core; a kernel runs one "
                "work-item per packet: give the element a per-packet body"),
    makes="a work-item has one packet and sends it on one output, or drops it",
    sends="a work-item has one packet and sends it on one output, or drops it",
    fails=("a work-item cannot stop the run: drop the packet with a reason (DROP_WHY) "
           "instead"),
    reads_ts="which does not cross to the device",
)


def opencl_platforms() -> int | str:
    """How many OpenCL platforms the ICD loader finds, or why it cannot be asked."""
    name = ctypes.util.find_library("OpenCL")
    if not name:
        return "no libOpenCL (the ICD loader)"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        return f"cannot load {name}: {e}"
    n = ctypes.c_uint32(0)
    rc = lib.clGetPlatformIDs(0, None, ctypes.byref(n))
    return 0 if rc != 0 else n.value  # (-1001: the loader found no ICD)


class Gpu(ProcessTarget):
    name = "gpu"
    runs = ("OpenCL kernels over batches of packets, one work-item per packet (PoCL on "
            "the CPU, or a GPU's OpenCL driver), driven by a process of its own")
    interconnect = ("the window in /dev/shm to the other devices; to the OpenCL device, "
                    "pinned host buffers and N batches in flight on three command queues")
    reads_table_files = False
    # Its tables are copied into device buffers at start; an update would change the
    # host's copy only, so no control channel is served (offlow ctl says the table has none).
    serves_control = False
    offload = (DEFAULT_BATCH, DEFAULT_DEPTH)

    def unusable(self) -> str | None:
        why = super().unusable()
        if why:
            return why
        if not header_found(CL_HEADER):
            return missing_package("opencl-c-headers", "the OpenCL headers the host side "
                                   "is compiled with")
        link = subprocess.run(["gcc", "-print-file-name=libOpenCL.so"], capture_output=True,
                              text=True).stdout.strip()
        if not Path(link).is_absolute():
            return missing_package("ocl-icd-opencl-dev", "the OpenCL ICD loader the host side "
                                   "links")
        n = opencl_platforms()
        if isinstance(n, str) or n == 0:
            return no_device(f"no OpenCL platform ({n if isinstance(n, str) else 'none'} "
                             "registered): apt-get install pocl-opencl-icd for the CPU, or a "
                             "GPU driver's OpenCL ICD (OCL_ICD_VENDORS)")
        return None

    def cpu_base(self, ncpus: int) -> int:
        return 0

    def refuse_node(self, g: Graph, node: Node) -> str | None:
        from offlow.codegen import opencl

        if node.kind == "handler":
            return ("a channel handler runs on messages from the host, one at a time; a "
                    "kernel runs over batches of packets")
        if node.kind in ("source", "sink"):
            return (f"a {node.kind} reads or writes packets on this machine (a capture, a "
                    "socket); a kernel only transforms them: place it in a segment on host "
                    "or nic")
        why = refuse_stream_code(node, SAYS) or refuse_packet_work(node, SAYS)
        if why:
            return why
        other = [h for h in node.includes if h not in opencl.CL_HEADERS]
        if other:
            return (f"its body uses {', '.join(other)}, a runtime library with no OpenCL form "
                    "(a kernel has pkt.h's parsers and the LPM tables' lookups)")
        for _, ref in node.tables:
            ctype = next(t.ctype for t in g.shared if t.name == ref)
            if ctype not in opencl.TABLE_FORMS:
                return (f"its table `{ref}` ({ctype}) has no device-buffer form (the gpu "
                        "target has the LPM tables': "
                        + ", ".join(sorted(opencl.TABLE_FORMS)) + ")")
        return None

    def refuse_segment(self, g: Graph, segment: Segment) -> str | None:
        from offlow.codegen import opencl

        others = [s.name for s in g.segments if s.device == segment.device and s is not segment]
        if others:
            return (f"device `{segment.device}` also runs segment {others[0]}; a gpu device "
                    "runs one segment's kernel: put them in one segment, or name another "
                    "gpu device")
        if segment.group or len(segment.cores) > 1:
            return ("the kernel's work-items are its parallelism; one host thread drives "
                    "the device: give it one core (cores=[0])")
        members = [n for n in g.nodes if n.segment == segment.name]
        if len(members) > opencl.MAX_ELEMENTS:
            return (f"it has {len(members)} elements; a kernel runs at most "
                    f"{opencl.MAX_ELEMENTS}: split the segment")
        return None

    def generate(self, plan: Plan, device: str) -> dict[str, str]:
        from offlow.codegen import opencl
        from offlow.codegen.gpu_host import generate_gpu_device

        p = plan.device(device).segments[0]
        return {f"{device}.c": generate_gpu_device(plan, device),
                f"{device}.cl": opencl.kernel_source(plan, p)}

    def build(self, plan: Plan, device: str, directory: Path, compile_c: CompileC) -> Path:
        """The device's process (linked with runtime/lib/gpu), and its kernel built once
        by the OpenCL compiler of this machine's device: a kernel it refuses is a compile
        error with the compiler's words (its lines point into the program's file)."""
        from offlow.codegen import opencl

        exe = directory / device
        compile_c(directory / f"{device}.c", exe, ("gpu",))
        stamp = directory / f"{device}.checked"
        if stamp.exists():
            return exe
        res = subprocess.run([str(exe), "--gpu-check"], capture_output=True, text=True)
        if res.returncode != 0:
            seg = plan.device(device).segments[0].name
            why = res.stdout.strip() or res.stderr.strip()
            kernel = (directory / f"{device}.cl").read_text()
            raise OfflowError(f"segment `{seg}` on gpu: {opencl.point_into_program(why, kernel)}")
        stamp.write_text(res.stdout)
        return exe


TARGET = Gpu()
