"""`offlow bench queue`: offlow queue throughput beside a minimal SPSC ring (the ceiling).

The C program runtime/bench/bench_queue.c moves entries from a producer pinned to CPU 0
to a consumer pinned to CPU 1, through the offlow queue (qout -> ring -> qin with the
inline copy engine) and through a hand-written SPSC ring of the same geometry, for each
(batch, entry size), and prints one JSON line per configuration. It checks itself that
every entry arrived exactly once and in order, and fails otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from offlow.build import RUNTIME, cache_dir
from offlow.errors import OfflowError

BENCH_SRC = RUNTIME / "bench" / "bench_queue.c"
# The runtime modules the benchmark links, listed rather than globbed so that it
# builds without the packet and port modules.
MODULES = ("err", "wait", "window", "ring", "copy", "queue", "thread", "stats")
CFLAGS = ("-std=c11", "-D_GNU_SOURCE", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror")


@dataclass(frozen=True)
class Sweep:
    """What one invocation measures."""

    entries: int
    reps: int
    batches: tuple[int, ...]
    sizes: tuple[int, ...]


FULL = Sweep(entries=2_000_000, reps=5, batches=(1, 4, 16, 64, 256), sizes=(16, 64, 256))
QUICK = Sweep(entries=200_000, reps=3, batches=(1, 16, 256), sizes=(16, 256))


def _sources() -> list[Path]:
    return [BENCH_SRC, *(RUNTIME / "src" / f"{m}.c" for m in MODULES)]


def build() -> Path:
    """Compile bench_queue (-O2) once per content hash of its sources and headers."""
    if shutil.which("gcc") is None:
        raise OfflowError("no C compiler: install gcc (the README's setup command does)")
    h = hashlib.sha256(" ".join(CFLAGS).encode())
    headers = sorted((RUNTIME / "include" / "offlow").glob("*.h"))
    for f in [*_sources(), *headers]:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    exe = cache_dir() / f"bench_queue-{h.hexdigest()[:16]}"
    if exe.exists():
        return exe
    tmp = exe.with_name(exe.name + f".tmp{os.getpid()}")
    cmd = ["gcc", *CFLAGS, f"-I{RUNTIME / 'include'}", *map(str, _sources()), "-o", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise OfflowError(f"C compiler failed on bench_queue.c:\n{res.stderr.strip()}")
    tmp.replace(exe)
    return exe


def machine() -> dict[str, object]:
    """What the numbers were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "kernel": platform.release()}


def measure(entries: int, reps: int, batches: Sequence[int], sizes: Sequence[int],
            timeout: float = 600) -> list[dict]:
    """Run the benchmark for every (batch, entry size); return one row per config."""
    exe = build()
    args = [str(exe), str(entries), str(reps), ",".join(map(str, batches)),
            ",".join(map(str, sizes))]
    res = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise OfflowError(f"bench_queue failed (exit {res.returncode}):\n{res.stderr.strip()}")
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    for r in rows:
        if r["offlow_received"] != r["entries"] or r["ceiling_received"] != r["entries"]:
            raise OfflowError(f"bench_queue lost entries: {r}")
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as a text table: median (min-max) over the repetitions."""
    head = (f"{'batch':>5} {'entry B':>7} | {'offlow Mentries/s':>22} | "
            f"{'ceiling Mentries/s':>22} | {'ratio':>5}")
    out = [head, "-" * len(head)]
    for r in rows:
        o = f"{r['offlow_mps']:.1f} ({r['offlow_mps_min']:.1f}-{r['offlow_mps_max']:.1f})"
        c = f"{r['ceiling_mps']:.1f} ({r['ceiling_mps_min']:.1f}-{r['ceiling_mps_max']:.1f})"
        out.append(f"{r['batch']:>5} {r['entry_size']:>7} | {o:>22} | {c:>22} | "
                   f"{r['ratio']:>5.2f}")
    return "\n".join(out)


def run(quick: bool, out_json: str | os.PathLike[str] | None,
        entries: int | None = None) -> list[dict]:
    """Run the queue benchmark, print a table, optionally write JSON; return the rows.

    quick: fewer configurations and entries (a few seconds). entries: override the
    number of entries per transfer (tests use a tiny count)."""
    sweep = QUICK if quick else FULL
    n = entries if entries is not None else sweep.entries
    rows = measure(n, sweep.reps, sweep.batches, sweep.sizes)
    info = machine()
    ring = rows[0]["ring_size"] if rows else "?"
    print(f"queue throughput: producer on CPU 0 -> consumer on CPU 1, {n} entries per "
          f"transfer, ring of {ring} entries, median (min-max) of {sweep.reps} runs")
    print(f"machine: {info['cpu']}, {info['cpus']} CPUs, kernel {info['kernel']}")
    print("offlow: qout -> ring -> qin, inline copy engine, seq checked; "
          "ceiling: bare SPSC ring, entries used in place")
    print(format_table(rows))
    if out_json:
        Path(out_json).write_text(json.dumps({"benchmark": "queue", "machine": info,
                                              "sweep": sweep.__dict__, "rows": rows},
                                             indent=2) + "\n")
    return rows
