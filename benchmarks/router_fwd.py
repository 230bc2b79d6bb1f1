"""Forwarding runs of the router program for `offlow bench router`: the packet size
sweep (synthetic traffic), vector vs per-packet lookups (the same traffic, the lookup
elements' batch bodies or their per-packet bodies, side by side) and the runs beside
DPDK's l3fwd (a replayed pcap).

The program is examples/router.py, compiled and run through the runner, in two
placements:

- "as placed": as the example places it (parse and lookups on the NIC, next-hop
  rewrite and sink on the host: three busy-polling threads on the CPUs the runner
  gives the two devices);
- "one core": the same elements in one segment on one NIC core (one thread), the
  placement that compares per core with a one-lcore l3fwd.

A run's rate is the packets that reached the sink over the longest core clock of the
run (each core's clock starts at its first packet); Gb/s counts frame bytes (no FCS,
preamble or gap). A run with drops, errors, or fewer packets out than in is reported
as such, never as a rate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common.spread import spread
from offlow.build import Build, build
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.paths import ROOT
from offlow.report import summarize
from offlow.runner import Run, RunOptions, oversubscription

if TYPE_CHECKING:
    from matplotlib.axes import Axes

EXAMPLE = ROOT / "examples" / "router.py"
SIZES = (64, 128, 256, 512, 1024, 1500)
PLACEMENTS = ("one core", "as placed")


@dataclass(frozen=True)
class SizeSweep:
    """What the packet size sweep measures."""

    sizes: tuple[int, ...] = SIZES
    duration: float = 1.0       # seconds of traffic per run
    reps: int = 3               # runs per size and placement
    count: int = 65536          # synthetic packets per pass (they repeat)
    placements: tuple[str, ...] = PLACEMENTS


FULL = SizeSweep()
QUICK = SizeSweep(duration=0.3, reps=1)
# The segment that holds the lookups, per placement.
LOOKUPS = {"one core": "all", "as placed": "route"}
MODES = ("vector", "per packet")


@dataclass(frozen=True)
class VectorSweep:
    """What the vector vs per-packet comparison measures: runs of both, taking turns."""

    size: int = 64              # frame bytes
    duration: float = 1.0
    reps: int = 5               # pairs of runs per placement
    count: int = 65536
    placements: tuple[str, ...] = PLACEMENTS


VECTOR_FULL = VectorSweep()
VECTOR_QUICK = VectorSweep(duration=0.3, reps=3)


def program(placement: str) -> Program:
    """examples/router.py as placed, or its elements in one segment on one NIC core."""
    from offlow.dsl.loader import load_program

    p = load_program(EXAMPLE)
    if placement == "as placed":
        return p
    if placement != "one core":
        raise OfflowError(f"unknown placement `{placement}`; known: {', '.join(PLACEMENTS)}")
    q = Program(f"{p.name}_one_core", mtu=p.mtu, ring_size=p.ring_size, batch=p.batch)
    q.segment("all", [el for s in p.segments.values() for el in s.elements], device="nic",
              cores=[0])
    return q


def lookups(placement: str, mode: str) -> Program:
    """The router in `placement` with its lookups' batch bodies (mode "vector") or
    their per-packet bodies ("per packet": --set SEG.vector=off)."""
    p = program(placement)
    if mode not in MODES:
        raise OfflowError(f"unknown mode `{mode}`; known: {', '.join(MODES)}")
    if mode == "per packet":
        p.apply_setting(f"{LOOKUPS[placement]}.vector=off")
    return p


def cpus_of(b: Build) -> list[int]:
    """The CPUs the runner pins a build's segment cores to."""
    return sorted({c for s in b.graph.segments for c in b.plan.cpus(s.name)})


def threads_of(b: Build) -> int:
    """Busy-polling threads of a build (one per segment core, inline copy engine)."""
    return sum(len(s.cores) for s in b.graph.segments)


def forward(b: Build, opts: RunOptions, pids: dict[str, int] | None = None) -> dict:
    """Run a build once: forwarded packets and the rate, or why there is none (`pids`:
    filled with each process's pid once started). (The runner's oversubscription
    warning is not printed: placement_info reports it.)"""
    r = Run(b, opts)
    r.start()
    if pids is not None:
        pids.update({name: p.pid for name, p in r.procs.items()})
    res = r.wait()
    if res.interrupted:  # Ctrl-C: the run stopped cleanly; the sweep stops too
        raise KeyboardInterrupt
    s = summarize(b.plan, res.stats)
    src = sum(v.get("packets", 0) for v in s["sources"].values())
    out = sum(v.get("packets", 0) for v in s["sinks"].values())
    out_bytes = sum(v.get("bytes", 0) for v in s["sinks"].values())
    secs = max((seg["seconds"] for seg in s["segments"]), default=0.0)
    drops = {el: v["drop"] for el, v in s["elements"].items() if v["drop"]}
    # the busiest core thread's CPU time from its first packet to its end
    cpu_s = max((c.get("cpu_ns", 0) for dev in res.stats.values()
                 for c in dev.get("cores", [])), default=0) / 1e9
    row: dict = {"in": src, "out": out, "seconds": secs, "cpu_s": cpu_s, "drops": drops,
                 "errors": res.errors, "mpps": None, "gbps": None}
    why = None
    if res.errors:
        why = "; ".join(res.errors)
    elif drops:
        why = "dropped " + ", ".join(f"{k} {v}" for k, v in drops.items())
    elif out != src or out == 0 or secs <= 0:
        why = f"{out} of {src} packets came out"
    if why:
        row["why"] = why
    else:
        row["mpps"] = out / secs / 1e6
        row["gbps"] = out_bytes * 8 / secs / 1e9
    return row


def placement_info(b: Build, opts: RunOptions) -> dict:
    """Where a placement runs: threads, CPUs, and the runner's oversubscription note."""
    return {"threads": threads_of(b), "cpus": cpus_of(b),
            "oversubscribed": oversubscription(b, opts)}


def measure_sizes(prefixes: Path, sw: SizeSweep) -> dict:
    """The router forwarding synthetic IPv4/UDP traffic of each frame size to
    destinations inside the table's prefixes (the synthetic source draws them), with
    the table built from the same prefix file."""
    builds = {p: build(program(p)) for p in sw.placements}
    tables = (f"routes4.path={prefixes}", f"routes6.path={prefixes}")
    rows = []
    info = {}
    for size in sw.sizes:
        for place in sw.placements:
            runs = []
            opts = RunOptions(duration=sw.duration, count=sw.count, sizes=str(size),
                              prefixes=prefixes, opts=tables, timeout=sw.duration + 120)
            info[place] = placement_info(builds[place], opts)
            for _ in range(sw.reps):
                runs.append(forward(builds[place], opts))
            ok = [r for r in runs if r["mpps"] is not None]
            rows.append({"size": size, "placement": place,
                         "mpps": spread([r["mpps"] for r in ok]),
                         "gbps": spread([r["gbps"] for r in ok]),
                         "mpps_per_cpu": spread([r["mpps"] / len(info[place]["cpus"])
                                                 for r in ok]),
                         "runs": runs,
                         "why": None if ok else runs[0].get("why")})
    return {"settings": asdict(sw), "program": str(EXAMPLE), "source": "synthetic IPv4/UDP",
            "prefixes": str(prefixes), "placements": info, "rows": rows}


def measure_vector(prefixes: Path, sw: VectorSweep) -> dict:
    """The router forwarding the same synthetic traffic with vector and with per-packet
    lookups, one run of each in turn (which goes first alternates), per placement; the
    ratio pairs each vector run with the per-packet run beside it."""
    tables = (f"routes4.path={prefixes}", f"routes6.path={prefixes}")
    opts = RunOptions(duration=sw.duration, count=sw.count, sizes=str(sw.size),
                      prefixes=prefixes, opts=tables, timeout=sw.duration + 120)
    rows, info = [], {}
    for place in sw.placements:
        builds = {m: build(lookups(place, m)) for m in MODES}
        info[place] = placement_info(builds["vector"], opts)
        info[place]["vector"] = list(builds["vector"].plan.segment(LOOKUPS[place]).vector)
        runs: dict[str, list[dict]] = {m: [] for m in MODES}
        for k in range(sw.reps):
            for m in (MODES if k % 2 == 0 else MODES[::-1]):
                runs[m].append(forward(builds[m], opts))
        pairs = [(v["mpps"], p["mpps"]) for v, p in zip(runs["vector"], runs["per packet"],
                                                         strict=True)
                 if v["mpps"] is not None and p["mpps"] is not None]
        ncpu = len(info[place]["cpus"])
        rows.append({"placement": place,
                     **{m: spread([v for v, _ in pairs] if m == "vector" else
                                  [p for _, p in pairs]) for m in MODES},
                     "mpps_per_cpu": {m: spread([(v if m == "vector" else p) / ncpu
                                                 for v, p in pairs]) for m in MODES},
                     "ratio": spread([v / p for v, p in pairs]),
                     "runs": runs,
                     "why": None if pairs else next(
                         (r.get("why") for m in MODES for r in runs[m] if r.get("why")), None)})
    return {"settings": asdict(sw), "program": str(EXAMPLE), "source": "synthetic IPv4/UDP",
            "prefixes": str(prefixes), "placements": info, "rows": rows}


def format_vector(vr: dict) -> list[str]:
    """Vector vs per-packet lookups as report lines."""
    st = vr["settings"]
    out = ["", f"vector vs per-packet lookups: {Path(vr['program']).name} forwarding synthetic "
               f"{st['size']} B IPv4/UDP frames to destinations in the table, the lookup "
               "elements' batch bodies (the tables' batched lookups) or their per-packet "
               f"bodies, runs taking turns ({st['duration']:g} s each, median (min-max) of "
               f"{st['reps']} pairs)"]
    for place, inf in vr["placements"].items():
        note = f"; {inf['oversubscribed']}" if inf["oversubscribed"] else ""
        out.append(f"  {place}: {inf['threads']} busy-polling thread(s) on CPU(s) "
                   f"{','.join(map(str, inf['cpus']))}; vector elements "
                   f"{', '.join(inf['vector']) or 'none'}{note}")
    head = (f"{'placement':10} | {'vector Mpps':>20} | {'per-packet Mpps':>20} | "
            f"{'Mpps/CPU vec/pp':>15} | {'ratio vector/per-packet':>24}")
    out += [head, "-" * len(head)]
    for r in vr["rows"]:
        if r["ratio"] is None:
            out.append(f"{r['placement']:10} | no rate: {r['why']}")
            continue
        v, p, q = r["vector"], r["per packet"], r["ratio"]
        pc = r["mpps_per_cpu"]
        out.append(f"{r['placement']:10} | {v['median']:>6.2f} ({v['min']:.2f}-{v['max']:.2f}) | "
                   f"{p['median']:>6.2f} ({p['min']:.2f}-{p['max']:.2f}) | "
                   f"{pc['vector']['median']:>6.2f}/{pc['per packet']['median']:<8.2f} | "
                   f"{q['median']:>6.2f}x ({q['min']:.2f}-{q['max']:.2f})")
    return out


def format_sizes(sz: dict) -> list[str]:
    """The packet size sweep as report lines."""
    st = sz["settings"]
    out = ["", f"packet size sweep: {Path(sz['program']).name} forwarding synthetic IPv4/UDP "
               f"frames to destinations in the table ({st['duration']:g} s per run, median "
               f"(min-max) of {st['reps']}; the synthetic source's work is part of it)"]
    for place, inf in sz["placements"].items():
        note = f"; {inf['oversubscribed']}" if inf["oversubscribed"] else ""
        out.append(f"  {place}: {inf['threads']} busy-polling thread(s) on CPU(s) "
                   f"{','.join(map(str, inf['cpus']))}{note}")
    head = f"{'frame B':>7} | {'placement':10} | {'Mpps':>20} | {'Gb/s':>20} | {'Mpps/CPU':>8}"
    out += [head, "-" * len(head)]
    for r in sz["rows"]:
        if r["mpps"] is None:
            out.append(f"{r['size']:>7} | {r['placement']:10} | no rate: {r['why']}")
            continue
        m, g = r["mpps"], r["gbps"]
        out.append(f"{r['size']:>7} | {r['placement']:10} | "
                   f"{m['median']:>6.2f} ({m['min']:.2f}-{m['max']:.2f}) | "
                   f"{g['median']:>6.2f} ({g['min']:.2f}-{g['max']:.2f}) | "
                   f"{r['mpps_per_cpu']['median']:>8.2f}")
    return out


def plot_sizes(sz: dict, ax: Axes) -> None:
    """Mpps (left axis) and Gb/s (right axis) against the frame size."""
    ax2 = ax.twinx()
    for k, place in enumerate(sz["settings"]["placements"]):
        rows = [r for r in sz["rows"] if r["placement"] == place and r["mpps"]]
        xs = [r["size"] for r in rows]
        ax.plot(xs, [r["mpps"]["median"] for r in rows], marker="o", color=f"C{k}",
                label=f"{place}, Mpps")
        ax2.plot(xs, [r["gbps"]["median"] for r in rows], marker="s", linestyle="--",
                 color=f"C{k}", label=f"{place}, Gb/s")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax.set_xlabel("frame size, bytes")
    ax.set_ylabel("Mpps (solid)")
    ax2.set_ylabel("Gb/s (dashed)")
    ax.set_title("router, synthetic traffic: packet size sweep")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7)
