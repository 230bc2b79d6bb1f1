"""`offlow bench router`: longest-prefix-match table builds and lookups, offlow beside
DPDK 22.11, in one run on the same machine, routes and addresses.

Two C programs, compiled once per content hash into $OFFLOW_CACHE or ~/.cache/offlow
with the same flags (runtime/build.toml's `native` set: -O3 -march=native):

- benchmarks/c/bench_lpm.c: offlow's IPv4 DIR-24-8 (lpm4.h) and IPv6 binary search on
  prefix lengths (lpm6.h), scalar and batched (latency-hiding) lookups;
- benchmarks/c/bench_dpdk_lpm.c: DPDK's rte_lpm and rte_fib (DIR24_8) for IPv4,
  rte_lpm6 and rte_fib6 (TRIE) for IPv6, with EAL on --no-huge memory; compiled with
  `pkg-config --cflags --libs libdpdk` and the runtime's lpm library: it times offlow's
  lookups too, taking turns with DPDK's in every repetition, and the ratios pair those
  repetitions (rates drift between processes on a shared machine; side by side they
  hold). When libdpdk is missing, the setup step installs Debian's libdpdk-dev (as
  root, with apt-get); when that cannot be done, offlow is measured alone and the
  reason is reported.

The prefix file is read once by the runtime's reader (hops by the documented FNV-1a
rule); both programs get the same routes (slices: every k-th prefix, evenly spaced)
and the same destination addresses (seeded): "random" (uniform over the address space)
and "hits" (inside a uniformly chosen prefix of the table, random host bits). Every
lookup's answers on all those addresses are compared with offlow's scalar lookup, with
DPDK's "no route" read as the /0 hop (0 without a /0 route). Lookup rates: median and
min-max over repetitions, one core pinned, bursts of 64 addresses per call for all.
Ratios (median and min-max of the per-repetition ratios) and target verdicts are
printed; the targets are reported, never enforced.

That is the "lookups" sweep. The others (benchmarks.router_sweeps) are the offload
batch size sweep (router_offload: host -> NIC over offlow's queues, Knapp Figure 6),
the packet size sweep (router_fwd: examples/router.py on synthetic traffic of each
frame size) and the router beside DPDK's l3fwd on the same replayed pcap (router_l3fwd).
run() runs them all unless told which; each adds its part to the report, the JSON and
the plot.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks import router_sweeps
from benchmarks.common import output
from benchmarks.common.machine import machine, machine_line, quiet_check
from benchmarks.common.peers import bench_cpu, pkg_config, setup_dpdk
from benchmarks.common.routes import (
    LPM_COMMON,
    LPM_SETS,
    NPORTS,
    SEED,
    TOOLS,
    C,
    addresses4,
    addresses6,
    build_offlow,
    load_routes,
    prefix_file,
    take,
)
from benchmarks.common.spread import spread
from offlow.cbuild import build_exe, flags
from offlow.errors import OfflowError
from offlow.router.check import DEFAULT_PREFIXES

if TYPE_CHECKING:
    from benchmarks.router_fwd import SizeSweep, VectorSweep
    from benchmarks.router_l3fwd import L3fwdSweep
    from benchmarks.router_offload import OffloadSweep
    from benchmarks.router_ports import PortSweep

BURST = 64  # addresses per lookup call, a compile-time constant in both C programs
# offlow's lookups (lpm_bench.h): one by one, the batched scalar path, and (IPv4) the
# batched path the table chose by the CPU's features and OFFLOW_SIMD
OURS = ("offlow scalar", "offlow batched", "offlow vector")
DISTS = ("random", "hits")
EXAMPLES = 3
BUSY = 0.2  # the pinned CPU's busy fraction before the run above which the report warns

# Targets (reported, never enforced): IPv4 offlow vector (the batched path the table
# chose: AVX-512, AVX2 or scalar, docs/simd.md) vs rte_fib; IPv6 offlow batched vs the
# faster of rte_lpm6 / rte_fib6. Each against the fastest lookup function the peer
# table offers (scalar, or AVX-512 where the CPU has it).
TARGETS = (
    {"family": 4, "ours": "offlow vector", "peers": ("rte_fib", "rte_fib avx512"),
     "peer": "rte_fib", "target": 1.25},
    {"family": 6, "ours": "offlow batched",
     "peers": ("rte_lpm6", "rte_fib6", "rte_fib6 avx512"),
     "peer": "the faster of rte_lpm6 / rte_fib6", "target": 1.0},
)

@dataclass(frozen=True)
class Sweep:
    """What one run measures."""

    build_sizes: tuple[int | None, ...]  # table sizes (prefixes per family); None: full
    lookup_size: int | None  # the table the lookups use; None: full
    addresses: int           # addresses per family and distribution (multiple of BURST)
    lookup_reps: int         # timed repetitions per lookup and distribution
    min_time: float          # seconds per repetition (whole passes over the addresses)
    build_reps: int          # builds per table, while under build_budget seconds
    build_budget: float
    lpm_budget: float        # the longest estimated rte_lpm build (s) this run attempts;
                             # an attempt gives up at twice that


FULL = Sweep(build_sizes=(10_000, 100_000, None), lookup_size=None, addresses=1 << 20,
             lookup_reps=7, min_time=0.2, build_reps=5, build_budget=2.0, lpm_budget=240.0)
# --quick: the lookups on the full table too, with fewer addresses and shorter timings.
QUICK = Sweep(build_sizes=(10_000, 100_000, None), lookup_size=None, addresses=1 << 18,
              lookup_reps=5, min_time=0.04, build_reps=3, build_budget=0.5, lpm_budget=5.0)


# ---- building the C programs ---------------------------------------------------------


def build_dpdk() -> Path:
    """bench_dpdk_lpm against the installed libdpdk (pkg-config)."""
    cflags, libs = pkg_config("--cflags"), pkg_config("--libs")
    if cflags is None or libs is None:
        raise OfflowError("pkg-config does not find libdpdk")
    # DPDK's flags first: its -march=corei7 is overridden by ours (-march=native). The
    # lpm library goes in too: offlow's lookups take turns with DPDK's.
    return build_exe("bench_dpdk_lpm", [C / "bench_dpdk_lpm.c", *LPM_COMMON], ["lpm"], LPM_SETS,
                     includes=[C, TOOLS], peer=cflags.split(), link=libs.split())


def _text(family: int, a: np.ndarray) -> str:
    if family == 4:
        return str(ipaddress.IPv4Address(int(a)))
    return str(ipaddress.IPv6Address(bytes(a)))


# ---- running the programs ------------------------------------------------------------


def _dpdk_runtime_dirs(pid: int) -> list[Path]:
    base = [Path("/var/run/dpdk"), Path("/tmp/dpdk")]
    if os.environ.get("XDG_RUNTIME_DIR"):
        base.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "dpdk")
    return [b / f"offlow-bench-{pid}" for b in base]


def _run(cmd: list[str], what: str, timeout: float) -> dict:
    """Run one of the programs; its JSON. DPDK's runtime folder (named after the pid)
    is removed afterwards."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise OfflowError(f"{what} ran past {timeout:.0f} s") from None
    finally:
        for d in _dpdk_runtime_dirs(proc.pid):
            shutil.rmtree(d, ignore_errors=True)
    if proc.returncode != 0:
        msg = " ".join(err.strip().splitlines()[-3:]) or f"exit {proc.returncode}"
        raise OfflowError(f"{what} failed (exit {proc.returncode}): {msg}")
    return json.loads(out)


def _side_args(family: int, routes_file: Path, sw: Sweep, cpu: int, work: Path,
               addr_files: dict[str, Path]) -> list[str]:
    return [str(family), str(routes_file), str(sw.build_reps), str(sw.build_budget),
            str(sw.lookup_reps), str(sw.min_time), str(cpu), str(work),
            *(f"{k}={v}" for k, v in addr_files.items())]


def _label(size: int | None, n: int) -> str:
    """A table size as the report names it: "10k", "500", "full"."""
    if size is None or size >= n:
        return "full"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


# ---- the benchmark ---------------------------------------------------------------------


def measure(prefixes: Path, sw: Sweep, use_dpdk: bool = True) -> dict:
    """Run both sides; return every number (see run() for the printed form)."""
    t_start = time.monotonic()
    prefixes = prefix_file(prefixes)
    if sw.addresses % BURST:
        raise OfflowError(f"addresses must be a multiple of {BURST}")
    info = machine()
    cpu = bench_cpu()
    info["quiet"] = quiet_check(1.0 if sw is FULL else 0.3)

    dpdk: dict[str, object] = {"available": False, "version": None, "reason": None}
    dpdk_exe = None
    if use_dpdk:
        version, reason = setup_dpdk()
        if version:
            try:
                dpdk_exe = build_dpdk()
                dpdk.update(available=True, version=version)
            except OfflowError as e:
                reason = f"bench_dpdk_lpm.c does not build: {str(e).splitlines()[-1]}"
        dpdk["reason"] = reason
    else:
        dpdk["reason"] = "not asked for"
    exe = build_offlow()

    builds: list[dict] = []
    lookups: list[dict] = []
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory(prefix="offlow-bench-router-") as d:
        work = Path(d)
        summary, all4, all6 = load_routes(exe, prefixes, work)
        for family, routes in ((4, all4), (6, all6)):
            n = len(routes)
            sizes: list[int | None] = []
            for s in sw.build_sizes:  # distinct table sizes, smallest first
                s = None if s is None or s >= n else s
                if s not in sizes:
                    sizes.append(s)
            lsize = None if sw.lookup_size is None or sw.lookup_size >= n else sw.lookup_size
            if lsize not in sizes:
                sizes.append(lsize)
            sizes.sort(key=lambda s: n if s is None else s)
            lpm_times: dict[int, float] = {}
            for size in sizes:
                table = take(routes, size)
                rfile = work / f"routes{family}-{len(table)}.bin"
                table.tofile(rfile)
                label = _label(size, n)
                afiles: dict[str, Path] = {}
                addrs: dict[str, np.ndarray] = {}
                if size == lsize:
                    gen = addresses4 if family == 4 else addresses6
                    addrs = gen(table, sw.addresses, rng)
                    for dist, a in addrs.items():
                        afiles[dist] = work / f"addrs{family}-{dist}"
                        np.ascontiguousarray(a).tofile(afiles[dist])
                    for f in work.glob("hops-*"):
                        f.unlink()
                sides = [_run([str(exe), *_side_args(family, rfile, sw, cpu, work, afiles)],
                              "bench_lpm", 900)]
                if dpdk_exe is not None:
                    opts: list[str] = []
                    skip_lpm = None
                    if family == 4:
                        skip_lpm = _lpm_skip(lpm_times, len(table), sw.lpm_budget)
                        if skip_lpm:
                            opts += ["-x", "rte_lpm"]
                        opts += ["-t", str(2 * sw.lpm_budget)]
                    try:
                        side = _run([str(dpdk_exe), *opts,
                                     *_side_args(family, rfile, sw, cpu, work, afiles)],
                                    "bench_dpdk_lpm", 900 + 2 * sw.lpm_budget)
                    except OfflowError as e:
                        dpdk_exe = None
                        dpdk.update(available=False, reason=str(e))
                    else:
                        for b in side["builds"]:
                            if b["name"] == "rte_lpm" and skip_lpm:
                                b["skipped"] = skip_lpm
                            if b["name"] == "rte_lpm" and b["build_s"]:
                                lpm_times[len(table)] = statistics.median(b["build_s"])
                        dpdk.update({k: side[k] for k in ("heap", "avx512")})
                        sides.append(side)
                for side in sides:
                    for b in side["builds"]:
                        row = {"family": family, "size": label, "routes": len(table),
                               "table": b["name"], "build_s": spread(b["build_s"]),
                               "memory": b["memory"] if b["build_s"] else None,
                               "skipped": b.get("skipped")}
                        row.update({k: v for k, v in b.items()
                                    if k not in row and k not in ("name", "build_s")})
                        builds.append(row)
                if not afiles:
                    continue
                lookups += _lookups(family, label, len(table), sides, addrs, work, dpdk)
    ratios, verdicts = _ratios(lookups, dpdk)
    return {"benchmark": "router", "machine": info, "pinned_cpu": cpu, "dpdk": dpdk,
            "simd": summary["simd"],
            "input": {"prefixes": str(prefixes), "v4": summary["v4"], "v6": summary["v6"],
                      "garbage_lines": summary["bad"], "load_s": summary["load_s"],
                      "nports": NPORTS, "seed": SEED,
                      "hop_rule": "FNV-1a-32(address bytes, length) % nports + 1"},
            "sweep": asdict(sw), "burst": BURST, "cflags": " ".join(flags("native")),
            "builds": builds, "lookups": lookups, "ratios": ratios, "verdicts": verdicts,
            "elapsed_s": round(time.monotonic() - t_start, 1)}


def _lpm_skip(times: dict[int, float], n: int, budget: float) -> str | None:
    """Why rte_lpm is not built with n routes, or None. Its rte_lpm_add scans every rule
    of the new rule's length, so building is quadratic: the estimate fits a*n + b*n^2
    to the builds of the smaller tables measured before."""
    pts = sorted(times.items())
    if not pts:
        return None
    if len(pts) == 1:
        (n1, t1), = pts
        est = t1 * (n / n1) ** 2
    else:
        (n1, t1), (n2, t2) = pts[-2], pts[-1]
        b = max((t2 / n2 - t1 / n1) / (n2 - n1), 0.0)
        a = max(t1 / n1 - b * n1, 0.0)
        est = a * n + b * n * n
    if est <= budget:
        return None
    shown = ", ".join(f"{k:,} routes {v:.2f} s" for k, v in pts)
    return (f"not timed: estimated {est:.0f} s to build (rte_lpm_add scans all rules of "
            f"the same length: quadratic; measured {shown}), over this run's "
            f"{budget:.0f} s budget for one rte_lpm build")


def _lookups(family: int, label: str, nroutes: int, sides: list[dict],
             addrs: dict[str, np.ndarray], work: Path, dpdk: dict) -> list[dict]:
    """Lookup rows of one family: rates, and answers compared with offlow scalar (of
    the offlow program). "process" says which program measured the row: the DPDK
    program times offlow's lookups too, taking turns with DPDK's."""
    rows = []
    ref = {d: np.fromfile(work / f"hops-offlow_scalar-{d}.u16", dtype=np.uint16)
           for d in DISTS}
    for side in sides:
        prefix = "dpdk-" if side["side"] == "dpdk" else ""
        for lk in side["lookups"]:
            stem = lk["name"].replace(" ", "_")
            for dist in DISTS:
                got = np.fromfile(work / f"{prefix}hops-{stem}-{dist}.u16", dtype=np.uint16)
                bad = np.flatnonzero(got != ref[dist]) if len(got) == len(ref[dist]) else None
                row = {"family": family, "size": label, "routes": nroutes, "dist": dist,
                       "lookup": lk["name"],
                       "side": "offlow" if lk["name"].startswith("offlow") else "dpdk",
                       "process": side["side"], "table": lk["table"],
                       "addresses": len(ref[dist]), "mlps": spread(lk["mlps"][dist]),
                       "mlps_reps": lk["mlps"][dist], "passes": lk["passes"][dist],
                       "compared": len(got),
                       "disagreements": len(ref[dist]) if bad is None else len(bad),
                       "examples": [] if bad is None else [
                           {"address": _text(family, addrs[dist][i]),
                            "offlow": int(ref[dist][i]), lk["name"]: int(got[i])}
                           for i in bad[:EXAMPLES]]}
                rows.append(row)
    # DPDK tables that were not built: a row that says why.
    for side in sides:
        if side["side"] != "dpdk":
            continue
        for b in side["builds"]:
            if b.get("skipped"):
                for dist in DISTS:
                    rows.append({"family": family, "size": label, "routes": nroutes,
                                 "dist": dist, "lookup": b["name"], "side": "dpdk",
                                 "process": "dpdk", "table": b["name"], "mlps": None,
                                 "skipped": f"no table: {b['skipped']}"})
    if not any(s["side"] == "dpdk" for s in sides):
        for dist in DISTS:
            rows.append({"family": family, "size": label, "routes": nroutes, "dist": dist,
                         "lookup": "DPDK", "side": "dpdk", "process": None, "table": None,
                         "mlps": None, "skipped": f"DPDK not available: {dpdk['reason']}"})
    return rows


def _ratios(lookups: list[dict], dpdk: dict) -> tuple[list[dict], list[dict]]:
    """Every offlow lookup against every DPDK lookup, paired: in each repetition of the
    DPDK program, offlow's rate over the peer's, measured side by side; the median and
    min-max over the repetitions. And the target verdicts, each against the peer lookup
    with the highest median rate."""
    timed = {(r["family"], r["dist"], r["lookup"]): r for r in lookups
             if r.get("mlps") and r["process"] == "dpdk"}
    ratios = []
    for (fam, dist, ours), o in timed.items():
        if o["side"] != "offlow":
            continue
        for (f2, d2, peer), p in timed.items():
            if f2 == fam and d2 == dist and p["side"] == "dpdk":
                per = [a / b for a, b in zip(o["mlps_reps"], p["mlps_reps"], strict=True)]
                ratios.append({"family": fam, "dist": dist, "ours": ours, "peer": peer,
                               "ratio": statistics.median(per), "min": min(per),
                               "max": max(per), "per_rep": per})
    verdicts = []
    for t in TARGETS:
        for dist in DISTS:
            peers = {p: timed[(t["family"], dist, p)]["mlps"]["median"] for p in t["peers"]
                     if (t["family"], dist, p) in timed}
            v = {"family": t["family"], "dist": dist, "ours": t["ours"], "peer": t["peer"],
                 "target": t["target"], "ratio": None, "best_peer": None, "meets": None}
            best = max(peers, key=lambda p: peers[p]) if peers else None
            r = next((r for r in ratios if (r["family"], r["dist"], r["ours"], r["peer"])
                      == (t["family"], dist, t["ours"], best)), None)
            if r is not None:
                v.update(ratio=r["ratio"], min=r["min"], max=r["max"], best_peer=best,
                         meets=r["ratio"] >= t["target"])
            else:
                v["why"] = (f"DPDK not available: {dpdk['reason']}" if not dpdk["available"]
                            else "no peer lookup measured")
            verdicts.append(v)
    return ratios, verdicts


def verdict_line(v: dict) -> str:
    """One line saying whether a target is met."""
    head = (f"verdict: IPv{v['family']} {v['ours']} vs {v['peer']}, {v['dist']} "
            f"addresses")
    if v["ratio"] is None:
        return f"{head}: not judged ({v.get('why')})"
    spread = f" ({v['min']:.2f}-{v['max']:.2f})" if "min" in v else ""
    return (f"{head}: {v['ratio']:.2f}x{spread} (fastest peer lookup: {v['best_peer']}) vs "
            f"target {v['target']:.2f}x: {'meets' if v['meets'] else 'misses'}")


# ---- printing, JSON, PNG ----------------------------------------------------------------


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / 2**20:.1f} MiB"


def shown_rows(rows: list[dict]) -> list[dict]:
    """The lookup rows of a family to show: those timed side by side in the DPDK program
    when it ran (offlow's and DPDK's), else the offlow program's and the reason rows."""
    shown = [r for r in rows if r["process"] != "offlow"]
    if any(r.get("mlps") for r in shown):
        return shown
    return [r for r in rows if r["process"] != "dpdk"]


def _rate_line(name: str, by: dict[str, dict]) -> str:
    cells = []
    for d in DISTS:
        s = by[d]["mlps"]
        cells.append(f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})")
    dis = sum(by[d]["disagreements"] for d in DISTS)
    line = f"{name:16} | {cells[0]:>22} | {cells[1]:>22} | {dis:>8}"
    for d in DISTS:
        for ex in by[d].get("examples", []):
            line += f"\n    {d}: {ex}"
    return line


def format_report(res: dict) -> str:
    """The result as text: the setup, then each sweep that ran (lookups: builds,
    lookups, ratios, verdicts; then offload, packet sizes, l3fwd)."""
    m, inp = res["machine"], res["input"]
    quiet = ", ".join(f"{k} {v:.0%}" for k, v in m.get("quiet", {}).items())
    out = [f"offlow bench router: {inp['prefixes']} ({inp['v4']:,} IPv4 + {inp['v6']:,} "
           f"IPv6 prefixes; hops {inp['hop_rule']}, {inp['nports']} ports)",
           machine_line(m) + f"; busy before the run: {quiet}",
           f"offlow's batched IPv4 lookups (the \"offlow vector\" rows, the router's vector "
           f"elements): the {res.get('simd', '?')} path (the CPU's widest, capped by "
           "OFFLOW_SIMD; docs/simd.md)"]
    if "lookups" in res:
        out[-1] += f"; lookups pinned to CPU {res['pinned_cpu']}; both sides {res['cflags']}"
        out += _lookup_report(res)
    out += router_sweeps.format_report(res)
    out.append(f"elapsed {res['elapsed_s']} s")
    return "\n".join(out)


def _trie_line(b: dict) -> str:
    """What an offlow IPv6 build holds: the trie the lookups walk (its own build time
    and memory) beside the hash levels the gpu target reads, and the batch's path."""
    rest = b["build_s"]["median"] - b["trie_build_s"]
    return (f"  IPv6 offlow lpm6 {b['size']}: trie {b['trie_build_s']:.4f} s, "
            f"{_mib(b['trie_memory']).strip()}, {b['trie_nodes']:,} nodes, depth "
            f"{b['trie_depth']}; hash levels (gpu target) ~{max(rest, 0.0):.4f} s, "
            f"{_mib(b['memory'] - b['trie_memory']).strip()}; batch path {b['simd']} "
            f"(CPU's widest: {b['simd_cpu']})")


def _lookup_report(res: dict) -> list[str]:
    """Report lines of the lookup sweep."""
    m, dp = res["machine"], res["dpdk"]
    sw = res["sweep"]
    out: list[str] = []
    busy = m.get("quiet", {}).get(f"cpu{res['pinned_cpu']}", 0.0)
    if busy > BUSY:
        out.append(f"warning: CPU {res['pinned_cpu']} was {busy:.0%} busy before the run; "
                   "expect noisy numbers (the ratios hold better than absolute rates)")
    if dp["available"]:
        out.append(f"DPDK {dp['version']} (pkg-config libdpdk): EAL --no-huge --no-pci "
                   f"--no-telemetry, one lcore; tables on an {dp.get('heap', '?')}")
    else:
        out.append(f"DPDK not available: {dp['reason']} (offlow measured alone)")
    # Builds.
    sizes: list[str] = []
    for b in res["builds"]:
        if b["size"] not in sizes:
            sizes.append(b["size"])
    out.append("")
    out.append(f"table build (median of up to {sw['build_reps']} builds) and memory:")
    head = f"{'':5} {'table':12}" + "".join(f" | {s:>26}" for s in sizes)
    out += [head, "-" * len(head)]
    seen: dict[tuple[int, str], dict[str, dict]] = {}
    counts: dict[tuple[int, str], int] = {}
    for b in res["builds"]:
        seen.setdefault((b["family"], b["table"]), {})[b["size"]] = b
        counts[(b["family"], b["size"])] = b["routes"]
    notes = []
    for (fam, table), by in seen.items():
        cells = []
        for s in sizes:
            b = by.get(s)
            if b is None:
                cells.append(f"{'':>26}")
            elif b["build_s"] is None:
                cells.append(f"{'skipped (see below)':>26}")
                notes.append(f"  IPv{fam} {table} {s}: {b['skipped']}")
            else:
                cells.append(f"{b['build_s']['median']:>9.4f} s {_mib(b['memory']):>14}")
        out.append(f"IPv{fam:<3} {table:12}" + "".join(f" | {c}" for c in cells))
    out.append("  routes: " + ", ".join(f"IPv{f} {s} = {n:,}" for (f, s), n in counts.items()))
    out += notes
    out += [_trie_line(b) for b in res["builds"] if "trie_memory" in b and b["build_s"]]
    if not dp["available"]:
        out.append(f"  DPDK tables: DPDK not available: {dp['reason']}")
    # Lookups.
    for fam in (4, 6):
        rows = [r for r in res["lookups"] if r["family"] == fam]
        if not rows:
            continue
        shown = shown_rows(rows)
        alone = [r for r in rows if r["process"] == "offlow" and r.get("mlps")]
        r0 = next((r for r in rows if r.get("mlps")), rows[0])
        out.append("")
        out.append(f"IPv{fam} lookups, {r0['size']} table ({r0['routes']:,} prefixes), "
                   f"{r0.get('addresses', 0):,} addresses per distribution, bursts of "
                   f"{res['burst']}: M lookups/s, median (min-max) of {sw['lookup_reps']}; "
                   f"disagreements with offlow scalar")
        head = f"{'lookup':16} | {'random':>22} | {'hits':>22} | {'disagree':>8}"
        out += [head, "-" * len(head)]
        names: list[str] = []
        for r in shown:
            if r["lookup"] not in names:
                names.append(r["lookup"])
        for name in names:
            by = {r["dist"]: r for r in shown if r["lookup"] == name}
            if all(not r.get("mlps") for r in by.values()):
                out.append(f"{name:16} | {next(iter(by.values()))['skipped']}")
                continue
            out.append(_rate_line(name, by))
        if alone and shown is not alone and any(r["process"] == "dpdk" for r in shown):
            out.append("  offlow's lookups took turns with DPDK's in the DPDK program; "
                       "in the offlow program alone:")
            for name in OURS:
                by = {r["dist"]: r for r in alone if r["lookup"] == name}
                if len(by) == len(DISTS):
                    out.append(_rate_line(name, by))
    if any(r["family"] == 6 and r.get("mlps") for r in res["lookups"]):
        out.append("  (IPv6 random: uniform over all 2^128 addresses, so nearly all miss "
                   "the table, which holds only 2000::/3 space)")
    # Ratios.
    if res["ratios"]:
        out.append("")
        out.append("ratios offlow / DPDK, side by side in each repetition: median "
                   "(min-max) over the repetitions")
        for fam in (4, 6):
            for ours in OURS:
                rs = [r for r in res["ratios"] if r["family"] == fam and r["ours"] == ours]
                peers: list[str] = []
                for r in rs:
                    if r["peer"] not in peers:
                        peers.append(r["peer"])
                for p in peers:
                    vals = {r["dist"]: r for r in rs if r["peer"] == p}
                    out.append(f"  IPv{fam} {ours} / {p}: " + ", ".join(
                        f"{d} {vals[d]['ratio']:.2f}x ({vals[d]['min']:.2f}-"
                        f"{vals[d]['max']:.2f})" for d in DISTS if d in vals))
    out.append("")
    out += [verdict_line(v) for v in res["verdicts"]]
    return out


def plot(res: dict, path: Path) -> None:
    """One figure, two panels a row: lookup rates per implementation (both families
    and distributions, min-max bars) and build time and memory per table size when the
    lookups ran; then the other sweeps' panels (router_sweeps.plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lookup_rows = 2 if "lookups" in res else 0
    nrows = max(1, lookup_rows + router_sweeps.panels(res))
    fig, axes = plt.subplots(nrows, 2, figsize=(13, 4.5 * nrows), squeeze=False)
    if lookup_rows:
        _plot_lookups(res, axes)
    router_sweeps.plot(res, [list(row) for row in axes[lookup_rows:]])
    m, dp = res["machine"], res.get("dpdk") or {"available": False}
    peer = f"DPDK {dp['version']}" if dp["available"] else "DPDK not available"
    what = f"offlow vs {peer} LPM" if lookup_rows else "offlow bench router"
    fig.suptitle(f"{what}, {m['cpu']} ({m['cpus']} CPUs)", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / (4.5 * nrows)))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_lookups(res: dict, axes: np.ndarray) -> None:
    for ax, fam in zip(axes[0], (4, 6), strict=True):
        rows = [r for r in shown_rows([r for r in res["lookups"] if r["family"] == fam])
                if r.get("mlps")]
        names: list[str] = []
        for r in rows:
            if r["lookup"] not in names:
                names.append(r["lookup"])
        x = np.arange(len(names))
        for k, dist in enumerate(DISTS):
            by = {r["lookup"]: r["mlps"] for r in rows if r["dist"] == dist}
            med = [by[n]["median"] if n in by else 0 for n in names]
            lo = [by[n]["median"] - by[n]["min"] if n in by else 0 for n in names]
            hi = [by[n]["max"] - by[n]["median"] if n in by else 0 for n in names]
            ax.bar(x + (k - 0.5) * 0.4, med, 0.4, yerr=[lo, hi], capsize=3, label=dist)
        ax.set_xticks(x, names, rotation=25, ha="right", fontsize=8)
        size = rows[0]["size"] if rows else "?"
        ax.set_title(f"IPv{fam} lookups ({size} table), one core")
        ax.set_ylabel("M lookups/s (median, min-max)")
        ax.legend()
    for ax, key, ylabel in ((axes[1][0], "build", "build time, s (log)"),
                            (axes[1][1], "memory", "memory, MiB")):
        tables: dict[tuple[int, str], list[tuple[int, float]]] = {}
        for b in res["builds"]:
            if b["build_s"] is None:
                continue
            v = b["build_s"]["median"] if key == "build" else b["memory"] / 2**20
            tables.setdefault((b["family"], b["table"]), []).append((b["routes"], v))
        for (fam, table), pts in tables.items():
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    linestyle="-" if fam == 4 else "--", label=f"IPv{fam} {table}")
        ax.set_xscale("log")
        if key == "build":
            ax.set_yscale("log")
        ax.set_xlabel("prefixes in the table (log)")
        ax.set_ylabel(ylabel)
        ax.set_title("table build time" if key == "build" else "table memory")
        ax.legend(fontsize=7)


def _base(prefixes: Path, quick: bool) -> dict:
    """The common part of a result without the lookup sweep: machine and input."""
    prefixes = prefix_file(prefixes)
    info = machine()
    info["quiet"] = quiet_check(0.3 if quick else 1.0)
    exe = build_offlow()
    with tempfile.TemporaryDirectory(prefix="offlow-bench-router-") as d:
        summary, _, _ = load_routes(exe, prefixes, Path(d))
    return {"benchmark": "router", "machine": info, "simd": summary["simd"],
            "input": {"prefixes": str(prefixes), "v4": summary["v4"], "v6": summary["v6"],
                      "garbage_lines": summary["bad"], "load_s": summary["load_s"],
                      "nports": NPORTS, "seed": SEED,
                      "hop_rule": "FNV-1a-32(address bytes, length) % nports + 1"}}


def run(quick: bool = False, out_json: str | os.PathLike[str] | None = None,
        out_png: str | os.PathLike[str] | None = None,
        prefixes: str | os.PathLike[str] = DEFAULT_PREFIXES, *,
        sweep: Sweep | None = None, use_dpdk: bool = True,
        sweeps: Sequence[str] | str | None = None,
        offload: OffloadSweep | None = None, sizes: SizeSweep | None = None,
        l3fwd: L3fwdSweep | None = None, vector: VectorSweep | None = None,
        ports: PortSweep | None = None) -> dict:
    """Run the router benchmark, print the report, optionally write JSON and a PNG;
    return the result (the JSON's content).

    sweeps: which to run, of "lookups", "offload", "sizes", "vector", "l3fwd", "ports", "groups"
    (a list or a comma-separated string; "all"); default all, except that a caller who
    overrides the lookup settings with `sweep` and names no sweep gets the lookups
    alone. quick: the quick settings of every sweep (the lookups on the full table
    with fewer addresses, fewer and shorter repetitions). sweep, offload, sizes, l3fwd, vector:
    override one sweep's settings (tests use tiny ones). use_dpdk: False measures
    offlow alone (no DPDK tables, no l3fwd)."""
    t_start = time.monotonic()
    chosen = router_sweeps.choose(sweeps, sweep is not None)
    prefixes = Path(prefixes)
    if "lookups" in chosen:
        sw = sweep or (QUICK if quick else FULL)
        res = measure(prefixes, sw, use_dpdk=use_dpdk)
    else:
        res = _base(prefixes, quick)
    res["sweeps"] = list(chosen)
    st = router_sweeps.settings(quick, offload, sizes, l3fwd, vector=vector, ports=ports)
    res.update(router_sweeps.measure(prefixes, chosen, st, use_dpdk=use_dpdk))
    res["elapsed_s"] = round(time.monotonic() - t_start, 1)
    print(format_report(res))
    output.save(res, out_json, out_png, plot)
    return res


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.router`: the benchmark with every option of run()."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m benchmarks.router", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="quick settings (about a minute)")
    p.add_argument("--json-out", type=Path, help="where to write the JSON results")
    p.add_argument("--png", type=Path, help="where to write the plot")
    p.add_argument("--prefixes", type=Path, default=DEFAULT_PREFIXES, help="prefix file")
    p.add_argument("--sweeps", default="all",
                   help="comma-separated: lookups, offload, sizes, vector, l3fwd, ports, groups "
                        "(default all)")
    p.add_argument("--no-dpdk", action="store_true", help="measure offlow alone")
    a = p.parse_args(argv)
    try:
        run(quick=a.quick, out_json=a.json_out, out_png=a.png, prefixes=a.prefixes,
            sweeps=a.sweeps, use_dpdk=not a.no_dpdk)
    except OfflowError as e:
        print(f"offlow: error: {e}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
