"""The sweeps of `offlow bench router` beyond the lookup tables: which run, their
settings, and their part of the result, report and plot.

- "lookups": LPM builds and lookups beside DPDK's tables (benchmarks.router);
- "offload": offload batch size sweep, host -> NIC over offlow's queues
  (benchmarks.router_offload, Knapp Figure 6);
- "sizes": the router program forwarding synthetic traffic of each frame size
  (benchmarks.router_fwd);
- "vector": the router program's lookups as vector elements (the tables' batched
  lookups) beside their per-packet bodies, on the same traffic, in turns
  (benchmarks.router_fwd);
- "l3fwd": the router and DPDK's l3fwd on the same replayed pcap, one core each
  (benchmarks.router_l3fwd);
- "ports": the router on a DPDK port (`--port dpdk:`, net_pcap replay) beside l3fwd and
  I/O forwarding on the same replay (benchmarks.router_ports);
- "groups": the lookup segment as a core group of 1..8 cores and data-parallel
  (benchmarks.groups, Knapp Figure 8).

A sweep that fails is reported with its error; the others still run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks import groups, router_fwd, router_l3fwd, router_offload, router_ports
from benchmarks.common.routes import SEED, addresses4, addresses6, build_offlow, load_routes
from offlow.errors import OfflowError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

SWEEPS = ("lookups", "offload", "sizes", "vector", "l3fwd", "ports", "groups")


@dataclass(frozen=True)
class Settings:
    """The settings of the sweeps beyond the lookups."""

    offload: router_offload.OffloadSweep
    sizes: router_fwd.SizeSweep
    l3fwd: router_l3fwd.L3fwdSweep
    groups: groups.GroupSweep
    vector: router_fwd.VectorSweep
    ports: router_ports.PortSweep = router_ports.FULL


def settings(quick: bool, offload: router_offload.OffloadSweep | None = None,
             sizes: router_fwd.SizeSweep | None = None,
             l3fwd: router_l3fwd.L3fwdSweep | None = None,
             group: groups.GroupSweep | None = None,
             vector: router_fwd.VectorSweep | None = None,
             ports: router_ports.PortSweep | None = None) -> Settings:
    """The quick or full settings, each replaceable."""
    return Settings(offload or (router_offload.QUICK if quick else router_offload.FULL),
                    sizes or (router_fwd.QUICK if quick else router_fwd.FULL),
                    l3fwd or (router_l3fwd.QUICK if quick else router_l3fwd.FULL),
                    group or (groups.QUICK if quick else groups.FULL),
                    vector or (router_fwd.VECTOR_QUICK if quick else router_fwd.VECTOR_FULL),
                    ports or (router_ports.QUICK if quick else router_ports.FULL))


def choose(sweeps: Sequence[str] | str | None, lookups_override: bool) -> tuple[str, ...]:
    """The sweeps to run, in SWEEPS order: the names given (a sequence or a comma-separated
    string; "all" for every one), else all of them, except that a caller overriding the
    lookup settings and naming no sweep gets the lookups alone."""
    if sweeps is None:
        return ("lookups",) if lookups_override else SWEEPS
    names = [s.strip() for s in (sweeps.split(",") if isinstance(sweeps, str) else sweeps)]
    if "all" in names:
        return SWEEPS
    bad = [s for s in names if s not in SWEEPS]
    if bad or not names:
        raise OfflowError(f"unknown sweep(s) {', '.join(bad) or '(none given)'}; known: "
                          f"{', '.join(SWEEPS)} (or all)")
    return tuple(s for s in SWEEPS if s in names)


def _routes(prefixes: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    import tempfile

    exe = build_offlow()
    with tempfile.TemporaryDirectory(prefix="offlow-bench-routes-") as d:
        return load_routes(exe, prefixes, Path(d))


def measure(prefixes: Path, chosen: tuple[str, ...], st: Settings,
            use_dpdk: bool = True) -> dict:
    """The chosen sweeps other than "lookups": {"offload": ..., "sizes": ..., "l3fwd": ...},
    each a result or {"error": why}."""
    runs: dict[str, Callable[[], dict]] = {
        "sizes": lambda: router_fwd.measure_sizes(prefixes, st.sizes),
        "vector": lambda: router_fwd.measure_vector(prefixes, st.vector),
        "groups": lambda: groups.measure(prefixes, st.groups),
    }
    if "offload" in chosen or "l3fwd" in chosen or "ports" in chosen:
        _, r4, r6 = _routes(prefixes)
        rng = np.random.default_rng(SEED)
        n = st.offload.addresses
        runs["offload"] = lambda: router_offload.measure(
            prefixes, {4: addresses4(r4, n, rng)["hits"], 6: addresses6(r6, n, rng)["hits"]},
            st.offload)
        runs["l3fwd"] = lambda: router_l3fwd.measure(r4, r6, st.l3fwd, prefixes,
                                                     use_l3fwd=use_dpdk)
        runs["ports"] = lambda: router_ports.measure(r4, r6, st.ports, use_dpdk=use_dpdk)
    out: dict = {}
    for name in SWEEPS:
        if name in chosen and name in runs:
            try:
                out[name] = runs[name]()
            except OfflowError as e:
                out[name] = {"error": str(e)}
    return out


def format_report(res: dict) -> list[str]:
    """Report lines of the sweeps in `res` (those present)."""
    out: list[str] = []
    for key, fmt in (("offload", router_offload.format_report),
                     ("sizes", router_fwd.format_sizes),
                     ("vector", router_fwd.format_vector),
                     ("l3fwd", router_l3fwd.format_report),
                     ("ports", router_ports.format_report),
                     ("groups", lambda r: ["", *groups.format_report(r).splitlines()])):
        part = res.get(key)
        if part is None:
            continue
        if "error" in part:
            out += ["", f"{key} sweep failed: {part['error']}"]
        else:
            out += fmt(part)
    return out


def panels(res: dict) -> int:
    """Plot rows the sweeps in `res` need (two panels a row)."""
    rows = 0
    if res.get("offload") and "error" not in res["offload"]:
        rows += 1
    if any(res.get(k) and "error" not in res[k] for k in ("sizes", "l3fwd")):
        rows += 1
    if res.get("groups") and "error" not in res["groups"]:
        rows += 1
    return rows


def plot(res: dict, axes: list[list[Axes]]) -> None:
    """Fill the rows of `axes` (panels(res) of them, two axes each)."""
    row = 0
    if res.get("offload") and "error" not in res["offload"]:
        router_offload.plot(res["offload"], axes[row][0], axes[row][1])
        row += 1
    if row < len(axes) and any(res.get(k) and "error" not in res[k] for k in ("sizes", "l3fwd")):
        left, right = axes[row]
        if res.get("sizes") and "error" not in res["sizes"]:
            router_fwd.plot_sizes(res["sizes"], left)
        else:
            left.set_axis_off()
        if res.get("l3fwd") and "error" not in res["l3fwd"]:
            router_l3fwd.plot(res["l3fwd"], right)
        else:
            right.set_axis_off()
        row += 1
    if res.get("groups") and "error" not in res["groups"] and row < len(axes):
        groups.plot(res["groups"], axes[row][0])
        axes[row][1].set_axis_off()
