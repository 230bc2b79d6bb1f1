"""`offlow bench tsp`: NFComms' TSP case study timed (Table 3's shape): 10,000 2-opt
climbs from random tours on kroA100, with the climbers on the host (one climber
thread, and one per CPU), on the emulated NIC (one per CPU) and on the gpu climber's
OpenCL device (PoCL here: this machine's CPU), each through its manager, beside in the
same run:

- "ceiling": the same climb code called in a loop on one core, with no manager,
  channel or result queue around it (what a climber thread can do at most);
- "plain": the textbook best-improvement 2-opt from the same random tours (every pair
  of edges scanned per move: the code the issue sized its targets with, ~17 s for
  10,000 climbs on one Xeon core), timed over fewer climbs and scaled to 10,000;
- the seed's Table 3 (NFP 27.53 s, host 13.37 s, GPU 0.33 s: averages; other hardware).

Each row's best length is set beside the optimum 21,282; every best tour is checked
to be a permutation whose length is recomputed here. The issue's targets: 10,000
climbs on one host core in at most 1 s, and on a real GPU in at most 0.05 s at the
optimum; reported, never enforced."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import time
from pathlib import Path

from benchmarks.common import output
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from benchmarks.common.routes import TOOLS
from offlow import cbuild
from offlow.errors import OfflowError
from offlow.targets import get as target
from offlow.tsp import clib, gpu, manager
from offlow.tsp.cli import OPTIMA, default_file, example

C = Path(__file__).resolve().parent / "c"
SEED_TABLE3 = {"nfp": 27.53, "host": 13.37, "gpu": 0.33}  # seconds, 10,000 climbs
HOST_TARGET_S, GPU_TARGET_S = 1.0, 0.05


def build() -> Path:
    return cbuild.build_exe("bench_tsp", [C / "bench_tsp.c", TOOLS / "tool_io.c"], ["tsp"],
                            includes=[TOOLS])


def _checked(cities: clib.Cities, tour: tuple[int, ...], length: int, what: str) -> None:
    """The tour is a permutation and its length, recomputed here, is the one reported."""
    ok = sorted(tour) == list(range(cities.n)) and length == sum(
        int(math.dist(cities.xy[a], cities.xy[b]) + 0.5)
        for a, b in zip(tour, tour[1:] + tour[:1], strict=True))
    if not ok:
        raise OfflowError(f"bench tsp: {what}: the reported tour is not a tour of length "
                          f"{length}")


def _row(name: str, times: list[float], length: int, climbers: int, note: str = "") -> dict:
    return {"name": name, "climbers": climbers, "min_s": min(times),
            "median_s": statistics.median(times), "max_s": max(times), "runs": len(times),
            "best": length, "note": note}


def measure(path: Path, climbs: int, repeat: int, plain_climbs: int) -> dict:
    t_start = time.monotonic()
    cities = clib.load(path)
    cpus = os.cpu_count() or 1
    info = machine()
    info["quiet"] = quiet_check(0.3)
    rows = []
    for dev, k in (("host", 1), ("host", cpus), ("nic", cpus)):
        rs = manager.runs(example(dev, path), climbs, opts=(f"cities.climbers={k}",),
                          repeat=repeat)
        _checked(cities, rs[0].tour, rs[0].length, f"{dev} x{k}")
        rows.append(_row(f"{dev}, {k} climber thread{'s' if k > 1 else ''}",
                         [r.seconds for r in rs], rs[0].length, k))
    why = target("gpu").unusable()
    # the gpu climber's batch geometry: batches in flight, and every climb in one batch
    for batch, depth in ((2500, 2), (climbs, 1)) if why is None else ():
        times = []
        for _ in range(repeat):
            r, device = gpu.run(path, climbs, batch=batch, depth=depth)
            times.append(r.seconds)
        _checked(cities, r.tour, r.length, "gpu")
        pocl = " (PoCL: this CPU)" if "Portable Computing Language" in device else ""
        rows.append(_row(f"gpu{pocl}, batches of {min(batch, climbs):,}, {depth} in flight",
                         times, r.length, r.climbers, device))
    res = subprocess.run([str(build()), str(path), str(plain_climbs), str(climbs), "1"],
                         capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise OfflowError(f"bench_tsp failed (exit {res.returncode}): {res.stderr.strip()}")
    one = json.loads(res.stdout)
    rows.append(_row("ceiling: the climb loop, 1 core, no manager", [one["fast_s"]],
                     one["fast_best"], 1))
    scaled = one["plain_s"] * climbs / max(one["plain_climbs"], 1)
    rows.append(_row(f"plain best-improvement 2-opt, 1 core ({one['plain_climbs']} climbs, "
                     "scaled)", [scaled], one["plain_best"], 1,
                     f"best of {one['plain_climbs']} climbs only"))
    return {"benchmark": "tsp", "machine": info, "features": cpu_features(),
            "input": {"file": str(path), "cities": cities.n, "optimum": OPTIMA.get(path.stem),
                      "climbs": climbs, "seeds": f"1..{climbs}"},
            "gpu_unusable": why, "rows": rows, "seed_table3_s": SEED_TABLE3,
            "elapsed_s": round(time.monotonic() - t_start, 1)}


def format_report(res: dict) -> str:
    m, inp = res["machine"], res["input"]
    quiet = ", ".join(f"{k} {v:.0%}" for k, v in m.get("quiet", {}).items())
    opt = inp["optimum"]
    out = [f"offlow bench tsp: {inp['file']}: {inp['cities']} cities, {inp['climbs']:,} climbs "
           f"from random tours (seeds {inp['seeds']}); optimum {opt or '-'}",
           machine_line(m, res["features"]) + f"; busy before the run: {quiet}"]
    head = (f"{'climbers':<58} | {'min s':>7} {'median s':>8} {'max s':>7} | "
            f"{'best':>6} {'vs opt':>7} | {'x ceiling':>9}")
    out += [head, "-" * len(head)]
    ceiling = next(r for r in res["rows"] if r["name"].startswith("ceiling"))["min_s"]
    for r in res["rows"]:
        gap = f"{(r['best'] - opt) / opt:+.2%}" if opt else "-"
        out.append(f"{r['name']:<58} | {r['min_s']:>7.3f} {r['median_s']:>8.3f} "
                   f"{r['max_s']:>7.3f} | {r['best']:>6} {gap:>7} | "
                   f"{ceiling / r['median_s']:>8.2f}x")
    s = res["seed_table3_s"]
    out.append(f"seed 000, Table 3 (10,000 climbs, average; the authors' NFP, host and GPU): "
               f"NFP {s['nfp']} s, host {s['host']} s, GPU {s['gpu']} s")
    one = next(r for r in res["rows"] if r["name"] == "host, 1 climber thread")
    per10k = one["median_s"] * 10_000 / inp["climbs"]
    met = "meets" if per10k <= HOST_TARGET_S else "misses"
    out.append(f"one host core: {per10k:.3f} s per 10,000 climbs (target <= {HOST_TARGET_S} s: "
               f"{met}); the seed's host took {s['host'] / per10k:.0f}x as long")
    if res["gpu_unusable"]:
        out.append(f"gpu: not run ({res['gpu_unusable']})")
    out.append("(x ceiling: the climb loop's time on one core over the row's median; every "
               f"best tour checked; elapsed {res['elapsed_s']} s)")
    return "\n".join(out)


def plot(res: dict, path: Path) -> None:
    """Seconds for the climbs per row (log scale) beside the seed's Table 3."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    names = [r["name"] for r in rows] + [f"seed Table 3: {k}" for k in res["seed_table3_s"]]
    vals = [r["median_s"] for r in rows] + list(res["seed_table3_s"].values())
    colors = ["tab:blue"] * len(rows) + ["tab:gray"] * len(res["seed_table3_s"])
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(names) + 1.5))
    ax.barh(range(len(names)), vals, color=colors)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(f"seconds for {res['input']['climbs']:,} climbs (median; log scale)")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.suptitle(f"offlow bench tsp: {res['input']['file']} on {res['machine']['cpu']}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool, out_json: str | os.PathLike[str] | None,
        out_png: str | os.PathLike[str] | None = None, path: Path | None = None) -> dict:
    """Run it (--quick: 2,000 climbs once, the plain climb 20 times; else 10,000 climbs
    three times, the plain climb 200 times), print the report, write JSON and the plot."""
    climbs, repeat, plain = (2000, 1, 20) if quick else (10_000, 3, 200)
    res = measure(path or default_file(), climbs, repeat, plain)
    print(format_report(res))
    output.save(res, out_json, out_png, plot)
    return res
