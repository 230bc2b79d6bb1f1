"""Benchmarks: each compares offlow with its peer and ceiling measured in the same run
(`offlow bench NAME`). They sit on top of the offlow package and import it, never the
other way round; their shared pieces are in benchmarks.common, their C drivers in
benchmarks/c."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from offlow.runner import check_simd_env

NAMES = ("queue", "router", "groups", "channels", "kvs", "lso", "xdp", "gpu", "streams",
         "crypto", "tsp", "balance", "seeds", "remote")


def add_arguments(b: argparse.ArgumentParser) -> None:
    """The options of `offlow bench`."""
    b.add_argument("name", choices=NAMES)
    b.add_argument("--quick", action="store_true", help="a small sweep (seconds)")
    b.add_argument("--json-out", type=Path, help="where to write the JSON results")
    b.add_argument("--png", type=Path,
                   help="router, groups, channels, kvs, gpu, tsp, streams, remote, xdp: "
                        "where to write the plot")
    b.add_argument("--prefixes", type=Path,
                   help="router, groups, xdp, gpu: prefix file (default: the BGP table)")
    b.add_argument("--e2e", action="store_true",
                   help="xdp: the end-to-end half instead (Mpps through a veth pair: xdp, nic "
                        "and host placements of one program beside the generator alone)")
    b.add_argument("--sweeps", help="router: comma-separated lookups,offload,sizes,vector,"
                   "l3fwd,ports,groups (default: all)")
    b.add_argument("--designs", help="kvs: comma-separated designs (default: memcached,"
                   "udp_echo,cpu,split,cache_wt,cache_wb,kvs_server)")
    b.add_argument("--values", help="kvs: comma-separated workloads (default: '64 B,1 KB,"
                   "64 KB': 64 B and 1 KB values over UDP, 64 KB over TCP)")
    b.add_argument("--duration", type=float, help="kvs: measured seconds per run")
    b.add_argument("--cores", type=int,
                   help="kvs: server core budget, memcached/kvs_server -t (default 2)")
    b.add_argument("--repeat", type=int, help="kvs: rounds over the designs (default 3)")


def run(a: argparse.Namespace) -> int:
    """Run benchmark `a.name` with the options add_arguments parsed."""
    check_simd_env()
    bench = importlib.import_module(f"benchmarks.{a.name}")
    if a.name == "router":
        bench.run(quick=a.quick, out_json=a.json_out, out_png=a.png,
                  prefixes=a.prefixes or bench.DEFAULT_PREFIXES, sweeps=a.sweeps)
    elif a.name == "channels":
        bench.run(quick=a.quick, out_json=a.json_out, png=a.png)
    elif a.name == "xdp" and a.e2e:
        importlib.import_module("benchmarks.xdp_e2e").run(quick=a.quick, out_json=a.json_out,
                                                         out_png=a.png)
    elif a.name == "xdp":
        bench.run(quick=a.quick, out_json=a.json_out, prefixes=a.prefixes, out_png=a.png)
    elif a.name == "gpu":
        bench.run(quick=a.quick, out_json=a.json_out, prefixes=a.prefixes, out_png=a.png)
    elif a.name in ("tsp", "remote"):
        bench.run(quick=a.quick, out_json=a.json_out, out_png=a.png)
    elif a.name == "groups":
        bench.run(quick=a.quick, out_json=a.json_out, out_png=a.png, prefixes=a.prefixes)
    elif a.name == "kvs":
        bench.run(quick=a.quick, out_json=a.json_out, out_png=a.png,
                  designs=a.designs.split(",") if a.designs else None, duration=a.duration,
                  cores=a.cores, repeat=a.repeat,
                  workloads=a.values.split(",") if a.values else None)
    elif a.name == "streams":
        bench.run(quick=a.quick, out_json=a.json_out, out_png=a.png)
    else:  # queue, lso, crypto, balance, seeds
        bench.run(quick=a.quick, out_json=a.json_out)
    return 0
