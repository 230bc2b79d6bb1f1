"""Benchmarks: each compares offlow with its peer and ceiling measured in the same run
(`offlow bench NAME`). They sit on top of the offlow package and import it, never the
other way round; their shared pieces are in benchmarks.common, their C drivers in
benchmarks/c."""

from __future__ import annotations

import argparse
import importlib

from offlow.argtypes import File, NewFile, Whole
from offlow.errors import OfflowError
from offlow.kvs.args import LOAD_SECONDS

NAMES = ("queue", "router", "groups", "channels", "kvs", "lso", "xdp", "gpu", "streams",
         "crypto", "tsp", "balance", "seeds", "remote")
# the benchmarks that read each option besides --quick and --json-out (run() passes
# them on); any other refuses it rather than run without it ("xdp --e2e": with --e2e)
READ_BY = {
    "png": ("router", "groups", "channels", "kvs", "gpu", "tsp", "streams", "remote", "xdp",
            "xdp --e2e"),
    "prefixes": ("router", "groups", "xdp", "gpu"),
    "e2e": ("xdp", "xdp --e2e"),
    "sweeps": ("router",),
    "designs": ("kvs",), "values": ("kvs",), "duration": ("kvs",), "cores": ("kvs",),
    "repeat": ("kvs",), "loopback": ("remote",),
}


def add_arguments(b: argparse.ArgumentParser) -> None:
    """The options of `offlow bench`."""
    b.add_argument("name", choices=NAMES)
    b.add_argument("--quick", action="store_true", help="a small sweep (seconds)")
    b.add_argument("--json-out", type=NewFile(), help="where to write the JSON results")
    b.add_argument("--png", type=NewFile(),
                   help="router, groups, channels, kvs, gpu, tsp, streams, remote, xdp: "
                        "where to write the plot")
    b.add_argument("--prefixes", type=File(),
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
    b.add_argument("--duration", type=LOAD_SECONDS, help="kvs: measured seconds per run")
    b.add_argument("--cores", type=Whole(1, 1024),
                   help="kvs: server core budget, memcached/kvs_server -t (default 2)")
    b.add_argument("--repeat", type=Whole(1), help="kvs: rounds over the designs (default 3)")
    b.add_argument("--loopback", action="store_true",
                   help="remote: both sides in this network namespace over 127.0.0.1 "
                        "(no root; where namespaces cannot be made) instead of two "
                        "namespaces joined by a veth pair")


def check_options(a: argparse.Namespace) -> None:
    """Refuse an option that benchmark `a.name` does not read (READ_BY)."""
    name = "xdp --e2e" if a.e2e and a.name == "xdp" else a.name
    for dest, readers in READ_BY.items():
        value = getattr(a, dest)
        if value not in (None, False) and name not in readers:
            flag = f"--{dest.replace('_', '-')}"
            which = ", ".join(r for r in readers if r != name)
            raise OfflowError(f"{flag}: `offlow bench {name}` does not read it (it is "
                              f"for {which})")


def run(a: argparse.Namespace) -> int:
    """Run benchmark `a.name` with the options add_arguments parsed."""
    from offlow.runner import check_simd_env

    check_options(a)
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
    elif a.name == "tsp":
        bench.run(quick=a.quick, out_json=a.json_out, out_png=a.png)
    elif a.name == "remote":
        bench.run(quick=a.quick, out_json=a.json_out, out_png=a.png, loopback=a.loopback)
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
