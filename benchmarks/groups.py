"""Core-group size sweep (Knapp Figure 8): the router example with its lookup segment
on a core group of G cores, beside the same cores used data-parallel, on synthetic
traffic to the BGP table's destinations.

The ceiling is linear scaling from one core; the ratio printed is the rate at G
cores over G times the one-core rate (the scaling efficiency). Where the machine
has fewer CPUs than busy threads the run is oversubscribed, and the report says so
on every such row: on this 2-CPU machine the sweep shows the cost of sharing CPUs,
not the gain of a bigger group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common.machine import machine, machine_line
from offlow import runner
from offlow.build import build
from offlow.cbuild import ROOT
from offlow.dsl.loader import load_program
from offlow.report import summarize
from offlow.router.check import DEFAULT_PREFIXES

if TYPE_CHECKING:
    from matplotlib.axes import Axes

ROUTER = ROOT / "examples" / "router.py"


@dataclass(frozen=True)
class GroupSweep:
    sizes: tuple[int, ...]
    packets: int  # synthetic packets per run
    reps: int


FULL = GroupSweep(sizes=(1, 2, 4, 8), packets=2_000_000, reps=3)
QUICK = GroupSweep(sizes=(1, 2), packets=100_000, reps=1)


def _settings(size: int, grouped: bool, batch: int) -> list[str]:
    # NIC core 0 runs rx: the lookup cores start at 1
    cores = ",".join(str(c) for c in range(1, size + 1))
    return [f"route.cores={cores}", f"route.group={'on' if grouped else 'off'}",
            f"batch={batch}"]


def measure_one(size: int, grouped: bool, prefixes: Path, sw: GroupSweep,
                batch: int = 256) -> dict:
    """Route-segment Mpps (best of `sw.reps` runs) with `size` cores, grouped or not."""
    prog = load_program(ROUTER, _settings(size, grouped, batch))
    b = build(prog)
    opts = runner.RunOptions(count=sw.packets, prefixes=prefixes, sizes="64:1", timeout=600,
                      opts=(f"routes4.path={prefixes}", f"routes6.path={prefixes}"))
    rates, errors = [], []
    for _ in range(sw.reps):
        res = runner.run(b, opts)
        if not res.ok:
            errors += res.errors
            continue
        s = summarize(b.plan, res.stats)
        route = next(x for x in s["segments"] if x["segment"] == "route")
        rates.append(route["mpps"])
    return {"cores": size, "grouped": grouped, "batch": batch,
            "mpps": max(rates) if rates else None, "runs": rates, "errors": errors[:3],
            "oversubscribed": runner.oversubscription(b, opts) is not None}


def measure(prefixes: Path, sw: GroupSweep, progress: bool = True) -> dict:
    """Every group size, grouped and data-parallel, with the scaling efficiency."""
    rows = []
    for grouped in (True, False):
        for size in sw.sizes:
            if progress:
                print(f"  groups: {size} core(s), {'group' if grouped else 'data-parallel'}",
                      flush=True)
            rows.append(measure_one(size, grouped, prefixes, sw))
    for r in rows:
        one = next((x["mpps"] for x in rows
                    if x["cores"] == 1 and x["grouped"] == r["grouped"]), None)
        r["efficiency"] = (r["mpps"] / (one * r["cores"])
                           if r["mpps"] and one else None)
    return {"cpus": os.cpu_count(), "packets": sw.packets, "rows": rows, "machine": machine()}


def format_report(res: dict) -> str:
    """The sweep as a table: Mpps and scaling efficiency per group size."""
    lines = [f"core-group sweep (Knapp Fig. 8): router lookup segment, {res['packets']:,} "
             f"64-B packets per run, {res['cpus']} CPUs here",
             *([machine_line(res["machine"])] if "machine" in res else []),
             f"{'cores':>5}  {'layout':<13} {'Mpps':>7}  {'vs linear':>9}  note"]
    for r in res["rows"]:
        mpps = f"{r['mpps']:.3f}" if r["mpps"] else "failed"
        eff = f"{r['efficiency']:.2f}x" if r["efficiency"] else "-"
        note = "oversubscribed" if r["oversubscribed"] else ""
        if r["errors"]:
            note += f" error: {r['errors'][0]}"
        lines.append(f"{r['cores']:>5}  {'group' if r['grouped'] else 'data-parallel':<13} "
                     f"{mpps:>7}  {eff:>9}  {note}")
    return "\n".join(lines)


def plot(res: dict, ax: Axes) -> None:
    """Mpps against cores, one line per layout, with linear scaling dashed."""
    for grouped, style in ((True, "o-"), (False, "s--")):
        rows = [r for r in res["rows"] if r["grouped"] == grouped and r["mpps"]]
        ax.plot([r["cores"] for r in rows], [r["mpps"] for r in rows], style,
                label="core group" if grouped else "data-parallel")
    one = next((r["mpps"] for r in res["rows"] if r["cores"] == 1 and r["mpps"]), None)
    if one:
        xs = sorted({r["cores"] for r in res["rows"]})
        ax.plot(xs, [one * x for x in xs], ":", color="grey", label="linear")
    ax.set_xlabel("cores in the lookup segment")
    ax.set_ylabel("Mpps")
    over = all(r["oversubscribed"] for r in res["rows"])
    ax.set_title(f"core groups on {res['cpus']} CPUs"
                 + (" (every run oversubscribed)" if over else ""))
    ax.legend()


def run(quick: bool = False, out_json: Path | None = None, out_png: Path | None = None,
        prefixes: Path | None = None) -> dict:
    """`offlow bench groups`: run the sweep, print it, write JSON and a PNG."""
    import json


    res = measure(prefixes or DEFAULT_PREFIXES, QUICK if quick else FULL)
    print(format_report(res))
    if out_json:
        out_json.write_text(json.dumps(res, indent=1))
        print(f"wrote {out_json}")
    if out_png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        plot(res, ax)
        fig.tight_layout()
        fig.savefig(out_png, dpi=120)
        plt.close(fig)
        print(f"wrote {out_png}")
    return res
