"""`offlow bench xdp`: route lookups in the kernel's XDP hook, IPv4 and IPv6, per packet,
timed by the kernel (BPF_PROG_TEST_RUN in repeat mode), XDP programs side by side in
one run over the same routes and the same destination addresses:

- "offlow dir24" (IPv4), "offlow trie6" (IPv6): offlow's tables (runtime/lib/lpm, built
  by the runtime's own ofl_lpm4_build and ofl_lpm6_build) in BPF array maps, looked up
  on the packet's destination by lpm_bpf.h, as every XDP program of offlow does;
- "lpm trie": the same routes in a BPF_MAP_TYPE_LPM_TRIE map;
- "kernel fib": bpf_fib_lookup over the same routes, loaded by netlink into the kernel
  FIB of a network namespace the driver makes for itself (it and its routes vanish
  with the driver: the machine's own routes are never touched).

A fourth row per family, "harness", is the same program without a lookup: parsing the
packet, recording the answer and writing the next address into the packet, which
every row pays. The C driver (benchmarks/c/bench_xdp.c, programs in bench_xdp.bpf.c)
checks every answer against offlow's scalar lookup, and a wrong one fails the run.
The targets (issue 26, IPv4): offlow >= 10x the trie and >= 1.5x the FIB in lookups
per second, on the full BGP table; the verdicts are reported, never enforced.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from benchmarks.common import C, routes
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from benchmarks.common.peers import bench_cpu
from benchmarks.common.routes import NPORTS, SEED, TOOLS
from offlow import cbuild
from offlow.errors import OfflowError
from offlow.router.check import DEFAULT_PREFIXES
from offlow.targets.xdp import compile_bpf, kernel_refuses_bpf

BPF_SRC = C / "bench_xdp.bpf.c"
DRIVER = [C / "bench_xdp.c", C / "xdp_fib.c", TOOLS / "xdp_net.c", TOOLS / "xdp_tables.c",
          TOOLS / "tool_io.c"]
# what the programs' object is compiled from: its source and offlow's BPF tables
BPF_INPUTS = (BPF_SRC, *(cbuild.RUNTIME / "lib" / "lpm" / "include" / "offlow" / h
                        for h in ("lpm_bpf.h", "lpm_bpf_layout.h")))
OFFLOW, TRIE, FIB, HARNESS = "offlow dir24", "lpm trie", "kernel fib", "harness"
OFFLOW6 = "offlow trie6"
MINE = {4: OFFLOW, 6: OFFLOW6}  # offlow's row per family
EXIT_REFUSED = 3  # the driver's status when the kernel refuses BPF or a namespace
# offlow's lookups per second over each peer's, at least (issue 26)
TARGETS = {TRIE: 10.0, FIB: 1.5}


@dataclass(frozen=True)
class Sweep:
    """What one run measures."""

    routes: int | None   # routes taken from the table (every k-th); None: all
    addresses: int       # per address set (hits, random)
    passes: int          # passes over the addresses per test run
    reps: int            # test runs per program and set (the median is reported)


FULL = Sweep(routes=None, addresses=1 << 20, passes=2, reps=5)
QUICK = Sweep(routes=20_000, addresses=1 << 14, passes=2, reps=3)


class Refused(OfflowError):
    """The kernel (or the machine) cannot run the benchmark: BPF or namespaces refused."""


def unusable() -> str | None:
    """Why this machine cannot run the benchmark, or None."""
    if os.geteuid() != 0:
        return "needs root (a network namespace, BPF programs and maps)"
    return kernel_refuses_bpf()


def build() -> tuple[Path, Path]:
    """The XDP programs' object and the driver, each once per content hash."""
    obj = compile_bpf(BPF_SRC, cbuild.cache_dir() / "bench_xdp.bpf.o",
                      str(BPF_SRC.relative_to(cbuild.ROOT)))
    exe = cbuild.build_exe("bench_xdp", DRIVER, ["lpm"], (*cbuild.TOOL, "libnl"),
                           includes=[C, TOOLS],
                           link=cbuild.flags("xdp_link"))
    return obj, exe


def measure(prefixes: Path, sw: Sweep) -> dict:
    """Run the driver once over every program and address set; return every number."""
    why = unusable()
    if why:
        raise Refused(f"offlow bench xdp cannot run here: {why}")
    prefixes = Path(prefixes)
    if not prefixes.exists():
        raise OfflowError(f"prefix file not found: {prefixes} ($OFFLOW_DATA names the "
                          "shared data)")
    t_start = time.monotonic()
    obj, exe = build()
    cpu = bench_cpu()
    info = machine()
    info["quiet"] = quiet_check(0.3 if sw is QUICK else 1.0)
    with tempfile.TemporaryDirectory(prefix="offlow-bench-xdp-") as tmp:
        work = Path(tmp)
        summary, v4, v6 = routes.load_routes(routes.build_offlow(), prefixes, work)
        v4 = routes.take(v4, sw.routes)
        # (a slice takes as large a share of the IPv6 routes as of the IPv4 ones)
        v6 = routes.take(v6, None if sw.routes is None else
                         max(1, sw.routes * len(v6) // max(1, summary["v4"])))
        v4.tofile(work / "routes.bin")
        v6.tofile(work / "routes6.bin")
        rng = np.random.default_rng(SEED)
        files = []
        for name, a in routes.addresses4(v4, sw.addresses, rng).items():
            a.astype("<u4").tofile(work / f"{name}.u32")
            files.append(f"{name}={work / f'{name}.u32'}")
        for name, a in routes.addresses6(v6, sw.addresses, rng).items():
            a.tofile(work / f"{name}.a6")
            files.append(f"6:{name}6={work / f'{name}.a6'}")
        res = subprocess.run(["taskset", "-c", str(cpu), str(exe), str(obj),
                              str(work / "routes.bin"), str(work / "routes6.bin"),
                              str(sw.passes), str(sw.reps), *files],
                             capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        msg = res.stderr.strip() or f"exit {res.returncode}"
        if res.returncode == EXIT_REFUSED:
            raise Refused(f"offlow bench xdp: {msg}")
        raise OfflowError(f"bench_xdp failed (exit {res.returncode}): {msg}")
    out = json.loads(res.stdout)
    return {"benchmark": "xdp", "machine": info, "features": cpu_features(),
            "pinned_cpu": cpu, "sweep": asdict(sw),
            "input": {"prefixes": str(prefixes), "v4_in_file": summary["v4"],
                      "v6_in_file": summary["v6"],
                      "nports": NPORTS, "seed": SEED},
            **out, "ratios": ratios(out["runs"]), "elapsed_s": round(time.monotonic() - t_start, 1)}


def ratios(runs: list[dict]) -> dict[str, dict[str, float]]:
    """Per address set: offlow's lookups per second over each peer's (ns peer / ns
    offlow), offlow's row being its family's (MINE)."""
    ns = {(r["addresses"], r["program"]): r["ns"] for r in runs}
    out: dict[str, dict[str, float]] = {}
    for r in runs:
        s = r["addresses"]
        mine = ns.get((s, MINE[r.get("family", 4)]))
        out[s] = {peer: ns[(s, peer)] / mine for peer in TARGETS
                  if mine and (s, peer) in ns}
    return out


def verdicts(res: dict) -> list[str]:
    """One line per target (IPv4 lookups): the worst ratio over the IPv4 address sets."""
    full = res["sweep"]["routes"] is None
    v4 = {r["addresses"] for r in res.get("runs", ()) if r.get("family", 4) == 4}
    lines = []
    for peer, target in TARGETS.items():
        got = [(r[peer], s) for s, r in res["ratios"].items()
               if peer in r and (s in v4 or not v4)]
        if not got:
            lines.append(f"verdict offlow/{peer}: not measured")
            continue
        worst, where = min(got)
        met = "meets" if worst >= target else "misses"
        scope = "" if full else " (a slice of the table: the target is for the full one)"
        lines.append(f"verdict offlow/{peer}: {worst:.2f}x on {where} addresses vs target "
                     f">= {target:g}x: {met}{scope}")
    return lines


def format_report(res: dict) -> str:
    """The result as text: setup, the table of rows, ratios, verdicts."""
    m = res["machine"]
    quiet = ", ".join(f"{k} {v:.0%}" for k, v in m.get("quiet", {}).items())
    sw = res["sweep"]
    inp = res["input"]
    out = [f"offlow bench xdp: {inp['prefixes']}: {res['routes']:,} IPv4 and "
           f"{res['routes6']:,} IPv6 routes ({'all' if sw['routes'] is None else 'a slice'} "
           f"of {inp['v4_in_file']:,} and {inp.get('v6_in_file', 0):,}); BPF_PROG_TEST_RUN "
           f"repeat mode, one packet per lookup, {sw['passes']} passes over the addresses "
           f"per run, median of {sw['reps']} runs",
           machine_line(m, res['features']) + f"; busy before the run: {quiet}; pinned to "
           f"CPU {res['pinned_cpu']}",
           f"offlow IPv4 table: built in {res['build_s']:.3f} s by ofl_lpm4_build "
           f"({res['blocks']:,} tbl24 blocks, {res['groups']:,} tbl8 groups, "
           f"{res['dir24_bytes'] / 2**20:.1f} MiB)",
           f"offlow IPv6 table: built in {res['build6_s']:.3f} s by ofl_lpm6_build (trie: "
           f"{res['nodes6']:,} nodes, {res['leaves6']:,} leaves, "
           f"{res['trie6_bytes'] / 2**20:.1f} MiB, at most {res['depth6']} nodes a lookup)",
           "load into the kernel: " + ", ".join(
               f"{p['name']} (IPv{p['family']}) {p['load_s']:.3f} s" for p in res["programs"]
               if p["load_s"])]
    head = (f"{'addresses':>9} {'program':>13} | {'M lookups/s':>11} | "
            f"{'ns/lookup (min-max)':>20} | {'checked':>9}")
    out += [head, "-" * len(head)]
    for r in res["runs"]:
        rng = f"{r['ns']:.0f} ({r['ns_min']:.0f}-{r['ns_max']:.0f})"
        mps = 1e3 / r["ns"] if r["ns"] else float("inf")
        chk = f"{r['checked']:,}" if r["program"] != HARNESS else "-"
        out.append(f"{r['addresses']:>9} {r['program']:>13} | {mps:>11.2f} | {rng:>20} | "
                   f"{chk:>9}")
    ns = {(r["addresses"], r["program"]): r["ns"] for r in res["runs"]}
    family = {r["addresses"]: r.get("family", 4) for r in res["runs"]}
    for s, r in res["ratios"].items():
        line = f"ratios on {s}: " + ", ".join(f"offlow/{p} {v:.2f}x" for p, v in r.items())
        base, mine = ns.get((s, HARNESS), 0), ns.get((s, MINE[family[s]]), 0)
        if mine > base:
            line += "; lookups alone (less the harness): " + ", ".join(
                f"offlow/{p} {(ns[(s, p)] - base) / (mine - base):.2f}x" for p in r)
        out.append(line)
    out += verdicts(res)
    out.append("(ns/lookup: the kernel's per-repetition time, whole ns; every row includes "
               f"its family's harness's; the verdicts are for IPv4; elapsed {res['elapsed_s']} s)")
    return "\n".join(out)


def run(quick: bool, out_json: str | os.PathLike[str] | None,
        prefixes: str | os.PathLike[str] | None = None, sweep: Sweep | None = None) -> dict:
    """Run the benchmark, print the report, optionally write JSON; return the result."""
    res = measure(Path(prefixes or DEFAULT_PREFIXES), sweep or (QUICK if quick else FULL))
    print(format_report(res))
    if out_json:
        Path(out_json).write_text(json.dumps(res, indent=2) + "\n")
    return res

