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

A fourth row per family, "harness", is the same program without a lookup.

Each row is measured in two modes (`mode` in the JSON), side by side:

- "packet": one repetition of the program is one packet and one lookup: it parses the
  packet, looks up its destination, records the answer and writes the next address
  into the packet (the harness, ~30-40 ns, paid once per lookup): the per-packet cost
  of a lookup in an XDP program;
- "batch": one repetition looks up B (the driver's `batch`, bench_xdp.h) consecutive
  addresses in a bounded loop, each written into the packet's destination before its
  lookup (bpf_fib_lookup reads it there; every row does the same) and its answer
  recorded; ns per lookup = the kernel's time per repetition / B: lookups per second,
  as lookup benchmarks measure them (the program's entry and parsing paid once per B).

The C driver (benchmarks/c/bench_xdp.c, programs in bench_xdp.bpf.c) checks every
answer of every row against offlow's scalar lookup (the harness's against 0, and an
address a program skipped counts wrong), and a wrong one fails the run. The targets
(issue 26, IPv4): offlow >= 10x the trie and >= 1.5x the FIB in lookups per second, on
the full BGP table: the verdicts take the batch rows' ratios (the per-packet ratios are
printed beside them); they are reported, never enforced.
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

from benchmarks.common import C, output, routes
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from benchmarks.common.peers import bench_cpu
from benchmarks.common.routes import NPORTS, SEED, TOOLS
from offlow import cbuild
from offlow.errors import OfflowError
from offlow.router.check import DEFAULT_PREFIXES
from offlow.targets.xdp import compile_bpf, kernel_refuses_bpf

BPF_SRC = C / "bench_xdp.bpf.c"
BPF_HEADER = C / "bench_xdp.h"   # included by the programs and the driver: B
DRIVER = [C / "bench_xdp.c", C / "xdp_fib.c", TOOLS / "xdp_net.c", TOOLS / "xdp_tables.c",
          TOOLS / "tool_io.c"]
# what the programs' object is compiled from: its source and offlow's BPF tables
BPF_INPUTS = (BPF_SRC, BPF_HEADER, *(cbuild.RUNTIME / "lib" / "lpm" / "include" / "offlow" / h
                        for h in ("lpm_bpf.h", "lpm_bpf_layout.h")))
OFFLOW, TRIE, FIB, HARNESS = "offlow dir24", "lpm trie", "kernel fib", "harness"
OFFLOW6 = "offlow trie6"
MINE = {4: OFFLOW, 6: OFFLOW6}  # offlow's row per family
EXIT_REFUSED = 3  # the driver's status when the kernel refuses BPF or a namespace
# offlow's lookups per second over each peer's, at least (issue 26)
TARGETS = {TRIE: 10.0, FIB: 1.5}
PACKET, BATCH = "packet", "batch"  # the rows' modes (the module's docstring)
MODES = (PACKET, BATCH)
VERDICT_MODE = BATCH  # lookups per second: what the targets are stated in


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
                      str(BPF_SRC.relative_to(cbuild.ROOT)), [BPF_HEADER], keyed=True)
    exe = cbuild.build_exe("bench_xdp", DRIVER, ["lpm", "map"], includes=[C, TOOLS],
                           own_sets=("libnl",), link=cbuild.flags("xdp_link"))
    return obj, exe


def measure(prefixes: Path, sw: Sweep) -> dict:
    """Run the driver once over every program and address set; return every number."""
    why = unusable()
    if why:
        raise Refused(f"offlow bench xdp cannot run here: {why}")
    prefixes = routes.prefix_file(prefixes)
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
            **out, "ratios": {m: ratios(out["runs"], m) for m in MODES},
            "elapsed_s": round(time.monotonic() - t_start, 1)}


def ratios(runs: list[dict], mode: str) -> dict[str, dict[str, float]]:
    """Per address set, over the rows of `mode`: offlow's lookups per second over each
    peer's (ns peer / ns offlow), offlow's row being its family's (MINE)."""
    ns = {(r["addresses"], r["program"]): r["ns"] for r in runs if r["mode"] == mode}
    out: dict[str, dict[str, float]] = {}
    for r in runs:
        s = r["addresses"]
        mine = ns.get((s, MINE[r.get("family", 4)]))
        if r["mode"] == mode and mine:
            out[s] = {peer: ns[(s, peer)] / mine for peer in TARGETS if (s, peer) in ns}
    return out


def _worst(res: dict, mode: str, peer: str) -> tuple[float, str] | None:
    """The lowest ratio offlow/`peer` of `mode` over the IPv4 address sets, and its set."""
    v4 = {r["addresses"] for r in res.get("runs", ()) if r.get("family", 4) == 4}
    got = [(r[peer], s) for s, r in res["ratios"].get(mode, {}).items()
           if peer in r and (s in v4 or not v4)]
    return min(got) if got else None


def verdicts(res: dict) -> list[str]:
    """One line per target (IPv4 lookups per second): the worst batch ratio over the IPv4
    address sets, the worst per-packet ratio beside it."""
    full = res["sweep"]["routes"] is None
    lines = []
    for peer, target in TARGETS.items():
        worst = _worst(res, VERDICT_MODE, peer)
        if worst is None:
            lines.append(f"verdict offlow/{peer}: not measured")
            continue
        ratio, where = worst
        met = "meets" if ratio >= target else "misses"
        scope = "" if full else " (a slice of the table: the target is for the full one)"
        packet = _worst(res, PACKET, peer)
        aside = f" (per packet: {packet[0]:.2f}x on {packet[1]})" if packet else ""
        lines.append(f"verdict offlow/{peer} in lookups per second: {ratio:.2f}x on {where} "
                     f"addresses vs target >= {target:g}x: {met}{scope}{aside}")
    return lines


def format_report(res: dict) -> str:
    """The result as text: setup, the two tables of rows (per packet, batch) with their
    ratios, verdicts."""
    m = res["machine"]
    quiet = ", ".join(f"{k} {v:.0%}" for k, v in m.get("quiet", {}).items())
    sw = res["sweep"]
    inp = res["input"]
    out = [f"offlow bench xdp: {inp['prefixes']}: {res['routes']:,} IPv4 and "
           f"{res['routes6']:,} IPv6 routes ({'all' if sw['routes'] is None else 'a slice'} "
           f"of {inp['v4_in_file']:,} and {inp.get('v6_in_file', 0):,}); BPF_PROG_TEST_RUN "
           f"repeat mode, per packet and {res['batch']} lookups per run, {sw['passes']} "
           f"passes over the addresses per run, median of {sw['reps']} runs",
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
    for mode in MODES:
        out += _table(res, mode)
    out += verdicts(res)
    out.append("(ns/lookup: the kernel's time per repetition / lookups in one; every row "
               "includes its family's harness's; the verdicts are for IPv4, in lookups per "
               f"second (the batch rows); elapsed {res['elapsed_s']} s)")
    return "\n".join(out)


def _table(res: dict, mode: str) -> list[str]:
    """The rows of `mode` under their title, then the ratios per address set."""
    title = (f"lookups per second ({res['batch']} per run: one program run looks up "
             f"{res['batch']} consecutive addresses, each written into the packet first)"
             if mode == BATCH else
             "per packet (one program run per packet: parse, one lookup, record the answer, "
             "write the next address into the packet)")
    head = (f"{'addresses':>9} {'program':>13} | {'M lookups/s':>11} | "
            f"{'ns/lookup (min-max)':>22} | {'checked':>9}")
    out = [title, head, "-" * len(head)]
    runs = [r for r in res["runs"] if r["mode"] == mode]
    for r in runs:
        rng = f"{r['ns']:.1f} ({r['ns_min']:.1f}-{r['ns_max']:.1f})" if mode == BATCH \
            else f"{r['ns']:.0f} ({r['ns_min']:.0f}-{r['ns_max']:.0f})"
        mps = 1e3 / r["ns"] if r["ns"] else float("inf")
        out.append(f"{r['addresses']:>9} {r['program']:>13} | {mps:>11.2f} | {rng:>22} | "
                   f"{r['checked']:>9,}")
    ns = {(r["addresses"], r["program"]): r["ns"] for r in runs}
    family = {r["addresses"]: r.get("family", 4) for r in runs}
    for s, r in res["ratios"][mode].items():
        line = f"{mode} ratios on {s}: " + ", ".join(f"offlow/{p} {v:.2f}x"
                                                     for p, v in r.items())
        base, mine = ns.get((s, HARNESS), 0), ns.get((s, MINE[family[s]]), 0)
        if mine > base:
            line += "; lookups alone (less the harness): " + ", ".join(
                f"offlow/{p} {(ns[(s, p)] - base) / (mine - base):.2f}x" for p in r)
        out.append(line)
    return out


def plot(res: dict, path: Path) -> None:
    """M lookups/s per address set and program, per packet beside batch, bars (log
    scale: the rows span two orders of magnitude)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {(r["addresses"], r["program"], r["mode"]): r["ns"] for r in res["runs"]}
    labels = list(dict.fromkeys((s, p) for s, p, _ in rows))
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(labels) + 1.2))
    y = np.arange(len(labels))
    for k, (mode, color) in enumerate(((PACKET, "tab:gray"), (BATCH, "tab:blue"))):
        ax.barh(y + 0.4 * k, [1e3 / rows.get((s, p, mode), float("inf")) for s, p in labels],
                height=0.4, color=color,
                label="per packet" if mode == PACKET else f"batch ({res['batch']} per run)")
    ax.set_yticks(y + 0.2, [f"{s}: {p}" for s, p in labels], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("M lookups/s in XDP (BPF_PROG_TEST_RUN, every answer checked)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle(f"offlow bench xdp: {res['routes']:,} IPv4, {res['routes6']:,} IPv6 routes "
                 f"on {res['machine']['cpu']}", fontsize=8)
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

