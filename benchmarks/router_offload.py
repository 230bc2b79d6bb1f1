"""Offload batch size sweep of `offlow bench router` (Knapp, Figure 6).

benchmarks/c/bench_offload.c runs two processes: a host pinned to CPU 0 and a "NIC"
pinned to CPU 1 (the same CPU when the machine has one: oversubscribed, and said so),
connected by offlow's runtime queues in an interconnect window. The host sends batches
of B lookups carrying only the region of interest (the destination address and an
index); the NIC looks them up in its own table (built in its memory from the prefix
file) with the batched lookup and returns the next hops. Per B: the per-batch latency
with one batch in flight (send of the batch to receipt of its last answer: min, median,
p99) and lookups per second, both with one batch in flight and pipelined (up to `depth`
batches in flight). Every answer arrives in order (checked per entry) and the first
answer to each address is checked against the scalar lookup on a copy of the table the
host builds after the timing.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks.common import C
from benchmarks.common.spread import spread
from offlow.cbuild import build_exe
from offlow.errors import OfflowError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

SRC = C / "bench_offload.c"
SETS = ("base", "native", "werror")
CPU_HOST, CPU_NIC = 0, 1
BATCHES = (32, 64, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class OffloadSweep:
    """What the offload sweep measures."""

    batches: tuple[int, ...] = BATCHES
    addresses: int = 1 << 16    # destination addresses per family (inside table prefixes)
    lat_lookups: int = 1 << 20  # latency runs: about this many lookups per B
    stream_lookups: int = 1 << 22  # pipelined runs: about this many per B and repetition
    depth: int = 4              # pipelined runs: batches in flight at most
    reps: int = 5               # pipelined repetitions per B
    families: tuple[int, ...] = (4, 6)


FULL = OffloadSweep()
QUICK = OffloadSweep(lat_lookups=1 << 18, stream_lookups=1 << 20, reps=3)


def build() -> Path:
    """bench_offload with the runtime's lpm library, cached per content hash."""
    return build_exe("bench_offload", [SRC], ["lpm"], SETS)


def run_family(exe: Path, family: int, prefixes: Path, addrs: np.ndarray, sw: OffloadSweep,
               work: Path, nports: int = 16, timeout: float = 600.0) -> dict:
    """One family's sweep: the program's JSON plus the pipelined rates' spread."""
    afile = work / f"offload-addrs{family}.bin"
    np.ascontiguousarray(addrs).tofile(afile)
    window = Path("/dev/shm") / f"offlow-bench-offload-{os.getpid()}-{secrets.token_hex(4)}"
    cmd = [str(exe), str(family), str(prefixes), str(nports), str(afile),
           ",".join(map(str, sw.batches)), str(sw.lat_lookups), str(sw.stream_lookups),
           str(sw.depth), str(sw.reps), str(CPU_HOST), str(CPU_NIC), str(window)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise OfflowError(f"bench_offload (IPv{family}) ran past {timeout:.0f} s") from None
    finally:
        window.unlink(missing_ok=True)
    if res.returncode != 0:
        msg = " ".join(res.stderr.strip().splitlines()[-3:]) or f"exit {res.returncode}"
        raise OfflowError(f"bench_offload (IPv{family}) failed: {msg}")
    out = json.loads(res.stdout)
    for b in out["batches"]:
        b["stream"] = spread(b["stream_mlps"])
    return out


def measure(prefixes: Path, addrs: dict[int, np.ndarray], sw: OffloadSweep) -> dict:
    """The sweep for every family in `addrs` (host-order u32 or (n, 16) uint8 arrays of
    destinations inside the table's prefixes)."""
    exe = build()
    fams = []
    with tempfile.TemporaryDirectory(prefix="offlow-bench-offload-") as d:
        for family in sw.families:
            if family in addrs and len(addrs[family]):
                fams.append(run_family(exe, family, prefixes, addrs[family], sw, Path(d)))
    return {"settings": asdict(sw), "cpu_host": CPU_HOST, "cpu_nic": CPU_NIC,
            "copy_engine": "inline", "families": fams}


def _us(ns: float) -> str:
    return f"{ns / 1e3:.1f}"


def format_report(off: dict) -> list[str]:
    """The sweep as report lines."""
    out = []
    for f in off["families"]:
        where = ("oversubscribed: host and NIC share CPU "
                 f"{f['cpu_host']} ({f['cpus']} CPU), so they take turns" if f["oversubscribed"]
                 else f"host on CPU {f['cpu_host']}, NIC on CPU {f['cpu_nic']} "
                      f"({f['cpus']} CPUs)")
        out.append("")
        out.append(f"offload batch size sweep, IPv{f['family']} (Knapp Fig. 6): {where}; "
                   f"offlow queues, inline copy engine; the NIC's table: {f['routes']:,} "
                   f"prefixes, {f['table_memory'] / 2**20:.1f} MiB, built in "
                   f"{f['nic_build_s']:.2f} s by the NIC process; {f['addresses']:,} "
                   "destinations inside the table's prefixes")
        out.append(f"  per lookup: request {f['request_entry_bytes']} B ({f['roi_bytes']} B "
                   f"address + 4 B index + 8 B entry header), answer "
                   f"{f['response_entry_bytes']} B; batched lookup on the NIC")
        d = f["depth"]
        head1 = (f"{'':>6} | {'one batch in flight':^42} | {f'up to {d} batches in flight':^44} |")
        head2 = (f"{'B':>6} | {'latency us: min':>15} {'p50':>8} {'p99':>8} {'Mlookups/s':>10}"
                 f" | {'Mlookups/s (min-max)':>24} {'lat us p50':>10} {'p99':>8} | wrong")
        out += [head1, head2, "-" * len(head2)]
        for b in f["batches"]:
            lat, s = b["latency_ns"], b["stream"]
            rate = f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"
            out.append(f"{b['batch']:>6} | {_us(lat['min']):>15} {_us(lat['p50']):>8} "
                       f"{_us(lat['p99']):>8} {b['sync_mlps']:>10.1f} | {rate:>24} "
                       f"{_us(b['stream_latency_ns']['p50']):>10} "
                       f"{_us(b['stream_latency_ns']['p99']):>8} | {b['mismatches']:>5}")
        checked = sum(b["checked"] for b in f["batches"])
        out.append(f"  answers: in order; {checked:,} first answers checked against the "
                   "scalar lookup on the host's own copy of the table (built after the "
                   f"timing): {sum(b['mismatches'] for b in f['batches'])} wrong")
    return out


def plot(off: dict, ax_lat: Axes, ax_rate: Axes) -> None:
    """Per-batch latency (median, min to p99) and lookup rates against B."""
    for k, f in enumerate(off["families"]):
        color = f"C{k}"
        bs = [b["batch"] for b in f["batches"]]
        p50 = [b["latency_ns"]["p50"] / 1e3 for b in f["batches"]]
        lo = [b["latency_ns"]["min"] / 1e3 for b in f["batches"]]
        hi = [b["latency_ns"]["p99"] / 1e3 for b in f["batches"]]
        ax_lat.plot(bs, p50, marker="o", color=color, label=f"IPv{f['family']} median")
        ax_lat.fill_between(bs, lo, hi, alpha=0.2, color=color,
                            label=f"IPv{f['family']} min-p99")
        sync = [b["sync_mlps"] for b in f["batches"]]
        med = [b["stream"]["median"] for b in f["batches"]]
        err = [[b["stream"]["median"] - b["stream"]["min"] for b in f["batches"]],
               [b["stream"]["max"] - b["stream"]["median"] for b in f["batches"]]]
        ax_rate.plot(bs, sync, marker="o", linestyle="--", color=color,
                     label=f"IPv{f['family']}, 1 batch in flight")
        ax_rate.errorbar(bs, med, yerr=err, marker="s", capsize=3, color=color,
                         label=f"IPv{f['family']}, {f['depth']} in flight")
    for ax in (ax_lat, ax_rate):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("offload batch size B (lookups)")
        ax.legend(fontsize=7)
    ax_lat.set_yscale("log")
    ax_lat.set_ylabel("per-batch latency, us (log)")
    ax_lat.set_title("offload: send of a batch to its last answer")
    ax_rate.set_ylabel("M lookups/s")
    ax_rate.set_title("offload: lookups per second, host CPU 0 -> NIC CPU 1")
