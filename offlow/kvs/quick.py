"""A quick side-by-side of kvs_server and a real memcached under kvs_loadgen, in one run.

    python -m offlow.kvs.quick [--reps N] [--duration S] [--protos udp,tcp]

Same machine, same load generator, same workload (Floem's by default), same core
budget: the server (kvs_server with one worker, or memcached -t 1) pinned to CPU 0,
kvs_loadgen's one thread pinned to CPU 1 (or both on CPU 0 on a one-CPU machine).
Servers take turns, a fresh process per repetition; each repetition is a pair
(kvs_server, then memcached) and the printed ratio is the median over the pairs of
kvs_server / memcached ops/s, with its min-max. This is the CPU-only design's first
number; `offlow bench kvs` (the four designs) is where the full comparison lives.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Sequence

from offlow.kvs.args import add_quick_arguments
from offlow.kvs.tools import kvs_server, memcached, run_loadgen


def run(reps: int = 3, duration: float = 4.0, protos: Sequence[str] = ("udp", "tcp"),
        depth: int = 16) -> dict[str, dict[str, list[float]]]:
    """Measure; return {proto: {"kvs_server": [ops/s...], "memcached": [...]}}."""
    cpus = os.cpu_count() or 1
    server_cpu, client_cpu = [0], [1 if cpus > 1 else 0]
    out: dict[str, dict[str, list[float]]] = {}
    for proto in protos:
        rows = out.setdefault(proto, {"kvs_server": [], "memcached": []})
        for r in range(reps):
            for name in ("kvs_server", "memcached"):
                ctx = (kvs_server(threads=1, cpus=server_cpu) if name == "kvs_server"
                       else memcached(threads=1, cpus=server_cpu))
                with ctx as s:
                    rep = run_loadgen(s.port, proto=proto, duration=duration, depth=depth,
                                      cpus=client_cpu, progress="off")
                rows[name].append(rep["ops_per_s"])
                lat = rep["latency_ns"]
                print(f"{proto} rep {r} {name:>10}: {rep['ops_per_s']:>10.0f} ops/s  "
                      f"hit rate {rep['hit_rate']:.4f}  errors {rep['errors']}  "
                      f"p50 {lat['p50'] / 1e3:.1f} us  p99 {lat['p99'] / 1e3:.1f} us",
                      flush=True)
    return out


def summary(results: dict[str, dict[str, list[float]]]) -> list[str]:
    """One line per protocol: medians and the paired ratio (median, min-max)."""
    lines = []
    for proto, rows in results.items():
        ours, theirs = rows["kvs_server"], rows["memcached"]
        ratios = [a / b for a, b in zip(ours, theirs, strict=True) if b > 0]
        if not ratios:
            continue
        lines.append(f"{proto}: kvs_server {statistics.median(ours):.0f} ops/s, memcached "
                     f"{statistics.median(theirs):.0f} ops/s; ratio {statistics.median(ratios):.2f}"
                     f" (min {min(ratios):.2f}, max {max(ratios):.2f}, {len(ratios)} pairs)")
    return lines


def cli(a: argparse.Namespace) -> int:
    """Measure with the parsed options and print the summary."""
    results = run(a.reps, a.duration, a.protos.split(","), a.depth)
    print("\n".join(summary(results)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="python -m offlow.kvs.quick", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_quick_arguments(ap)
    return cli(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
