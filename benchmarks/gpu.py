"""`offlow bench gpu`: IPv4 route lookups on the gpu target's OpenCL device over
pipelined batches (runtime/lib/gpu: copy in, kernel, copy out on three queues, D
batches in flight), for batch sizes B = 32 ... 65,536 and depths 1..4 (the shape of
Knapp's Figure 6), beside, in the same run:

- "copy": the same bytes (4 B of address in, 2 B of hop out per lookup) copied through
  the same queues with no kernel: the rate the interconnect alone allows (the ceiling);
- "host": the same table's batched lookups (ofl_lpm4_lookup_batch, G-Opt style) over
  the same addresses on one host core.

The kernel reads the router's DIR-24-8 (runtime/lib/lpm) from device buffers
(offlow/cl/lpm4.h). Every answer of the device is checked against the host's scalar
lookup; a wrong one fails the run. On PoCL the "device" is this machine's CPU, its
"interconnect" a memcpy: the figures say what the pipeline costs here, not what a GPU
does (tools/gpu_check.sh runs this on a GPU machine). The issue's target, on a real
GPU: lookups at least 0.85x the copy-bound rate of the same run; reported, never
enforced."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from benchmarks.common import C, output, routes
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from benchmarks.common.routes import SEED, TOOLS
from offlow import cbuild
from offlow.codegen.opencl import CL_DIR
from offlow.errors import OfflowError
from offlow.router.check import DEFAULT_PREFIXES
from offlow.targets.gpu import TARGET

TARGET_RATIO = 0.85  # lookups over the copy-bound rate, on a real GPU (issue 27)


@dataclass(frozen=True)
class Sweep:
    """What one run measures."""

    routes: int | None           # routes taken from the table (every k-th); None: all
    batches: tuple[int, ...]
    depths: tuple[int, ...]
    lookups: int                 # at least this many per point
    addresses: int               # distinct addresses (looked up again and again)


FULL = Sweep(routes=None, batches=(32, 128, 512, 2048, 8192, 32768, 65536),
             depths=(1, 2, 3, 4), lookups=1 << 20, addresses=1 << 20)
QUICK = Sweep(routes=20_000, batches=(32, 1024, 65536), depths=(1, 3), lookups=1 << 16,
              addresses=1 << 16)


def build() -> Path:
    return cbuild.build_exe("bench_gpu", [C / "bench_gpu.c", TOOLS / "tool_io.c"], ["gpu"],
                            includes=[C, TOOLS])


def measure(prefixes: Path, sw: Sweep) -> dict:
    """Run the driver once over every batch size and depth; return every number."""
    why = TARGET.unusable()
    if why:
        raise OfflowError(f"offlow bench gpu cannot run here: {why}")
    prefixes = routes.prefix_file(prefixes)
    t_start = time.monotonic()
    exe = build()
    info = machine()
    info["quiet"] = quiet_check(0.3 if sw is QUICK else 1.0)
    with tempfile.TemporaryDirectory(prefix="offlow-bench-gpu-") as tmp:
        work = Path(tmp)
        summary, v4, _ = routes.load_routes(routes.build_offlow(), prefixes, work)
        v4 = routes.take(v4, sw.routes)
        v4.tofile(work / "routes.bin")
        addrs = routes.addresses4(v4, sw.addresses, np.random.default_rng(SEED))["hits"]
        addrs.astype("<u4").tofile(work / "addrs.u32")
        res = subprocess.run([str(exe), str(work / "routes.bin"), str(work / "addrs.u32"),
                              str(CL_DIR), ",".join(map(str, sw.batches)),
                              ",".join(map(str, sw.depths)), str(sw.lookups)],
                             capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise OfflowError(f"bench_gpu failed (exit {res.returncode}): "
                          f"{res.stderr.strip()[-2000:]}")
    out = json.loads(res.stdout)
    pocl = "Portable Computing Language" in out["device"]
    return {"benchmark": "gpu", "machine": info, "features": cpu_features(),
            "sweep": asdict(sw), "pocl": pocl,
            "input": {"prefixes": str(prefixes), "v4_in_file": summary["v4"],
                      "addresses": "hits", "seed": SEED},
            **out, "elapsed_s": round(time.monotonic() - t_start, 1)}


def _rate(lookups: int, s: float) -> float:
    return lookups / s / 1e6 if s > 0 else float("inf")


def format_report(res: dict) -> str:
    """The result as text: setup, the table (Knapp Figure 6 shape), ratios, verdict."""
    m = res["machine"]
    quiet = ", ".join(f"{k} {v:.0%}" for k, v in m.get("quiet", {}).items())
    out = [f"offlow bench gpu: {res['input']['prefixes']}: {res['routes']:,} IPv4 routes, "
           f"{res['addresses']:,} addresses inside them; device: {res['device']}",
           machine_line(m, res['features']) + f"; busy before the run: {quiet}",
           f"table: {res['table_bytes'] / 2**20:.1f} MiB in device buffers; device set up "
           f"(kernel built, table copied) in {res['setup_s']:.2f} s"]
    if res["pocl"]:
        out.append("(PoCL: the OpenCL device is this machine's CPU and its copies are "
                   "memcpys; the kernel's work-items share the CPUs with the host side)")
    head = (f"{'batch':>6} {'depth':>5} | {'gpu M/s':>8} {'lat us':>9} | {'copy M/s':>8} "
            f"{'gpu/copy':>8} | {'host M/s':>8} {'gpu/host':>8}")
    out += [head, "-" * len(head)]
    for p in res["points"]:
        gpu, copy, host = (_rate(p["lookups"], p[k]) for k in ("gpu_s", "copy_s", "host_s"))
        out.append(f"{p['batch']:>6} {p['depth']:>5} | {gpu:>8.1f} {p['lat_us']:>9.1f} | "
                   f"{copy:>8.1f} {gpu / copy:>7.2f}x | {host:>8.1f} {gpu / host:>7.2f}x")
    if res["points"]:
        b = max(res["points"], key=lambda q: _rate(q["lookups"], q["gpu_s"]))
        ratio = _rate(b["lookups"], b["gpu_s"]) / _rate(b["lookups"], b["copy_s"])
        met = "meets" if ratio >= TARGET_RATIO else "misses"
        out.append(f"best point: batch {b['batch']}, depth {b['depth']}: {ratio:.2f}x the "
                   f"copy-bound rate of the same run (target on a real GPU >= "
                   f"{TARGET_RATIO}x: {met}" + ("; PoCL: not the target's device)"
                                                if res["pocl"] else ")"))
    out.append("(M/s: million lookups per second; lat: a batch's submit to its results, "
               "mean; copy: the same bytes through the same queues, no kernel; host: "
               f"ofl_lpm4_lookup_batch on one core; every device answer checked; elapsed "
               f"{res['elapsed_s']} s)")
    return "\n".join(out)


def plot(res: dict, path: Path) -> None:
    """Lookups per second against the batch size, a line per depth, beside the copy-bound
    rate and the host core's (the shape of Knapp's Figure 6), and per-batch latency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate, lat) = plt.subplots(1, 2, figsize=(12, 4.5))
    pts = res["points"]
    for d in sorted({p["depth"] for p in pts}):
        mine = sorted((p for p in pts if p["depth"] == d), key=lambda p: p["batch"])
        x = [p["batch"] for p in mine]
        line = rate.plot(x, [_rate(p["lookups"], p["gpu_s"]) for p in mine], marker="o",
                         label=f"device, depth {d}")[0]
        rate.plot(x, [_rate(p["lookups"], p["copy_s"]) for p in mine], linestyle=":",
                  color=line.get_color(), label=f"copy alone, depth {d}")
        lat.plot(x, [p["lat_us"] for p in mine], marker="o", label=f"depth {d}")
    host = sorted({p["batch"]: p for p in pts}.values(), key=lambda p: p["batch"])
    rate.plot([p["batch"] for p in host], [_rate(p["lookups"], p["host_s"]) for p in host],
              color="black", linestyle="--", label="one host core (batched)")
    for ax, label in ((rate, "million lookups/s"), (lat, "per-batch latency, us (mean)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size (packets)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"offlow bench gpu on {res['device']}"
                 + (" (PoCL: the CPU)" if res["pocl"] else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool, out_json: str | os.PathLike[str] | None,
        prefixes: str | os.PathLike[str] | None = None, sweep: Sweep | None = None,
        out_png: str | os.PathLike[str] | None = None) -> dict:
    """Run the benchmark, print the report, optionally write JSON and the plot; return
    the result."""
    res = measure(Path(prefixes or DEFAULT_PREFIXES), sweep or (QUICK if quick else FULL))
    print(format_report(res))
    output.save(res, out_json, out_png, plot)
    return res
