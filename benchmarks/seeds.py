"""`offlow bench seeds`: two of the seeds' results, predicted by the planner beside the
seeds' own figures.

- The active-NIC seed's Figure 4 (seed 004, section 4): a Filter on the NIC and an
  Aggregate on the host (examples/streams_query.py, the stream operators of
  offlow/elements/streams.py over a capture of the seed's 164-byte tuples, one a frame),
  1-4 NIC cores at one tenth and one fifth of the host's speed (profiles cmp-nic-200 and
  cmp-nic-400): the speed-up over both operators on one host core. The operators' costs
  are calibrated on this host (offlow.planner.calibrate); the model
  (offlow.planner.model) does the rest. Twice: the query as written (its Filter keeps a
  fifth of the tuples: the NIC's stage is the heavier, and the speed-up only rises
  within 4 cores), then tuned as the seed tuned its operators ("we adjusted the
  parameters of the same Filter and Aggregate"; its Filter about 0.4 of its Aggregate,
  balancing at 4 cores of 200 MHz): the Filter keeping 80% and each tuple in 80
  overlapping windows (TUNED), so that the Aggregate outweighs the Filter and the
  speed-up peaks where the stages balance. The ratio of each is printed.
- The LSO seed's Tables 3 and 4 (seed 002): the clock a core needs for 40 and 100 Gb/s
  at 512, 1024 and 1500 B, from the instructions per packet of offlow's segmentation
  code (runtime/lib/lso, counted by callgrind as `offlow bench lso` does) at the
  lso-risc profile's instructions per cycle, and what the profile's core (423 MHz)
  would carry with that code.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import lso
from benchmarks.common.machine import machine, machine_line, quiet_check
from offlow.planner import profile
from offlow.planner.calibrate import calibrate
from offlow.planner.model import HOST, Placement, clock_needed_mhz, predict
from offlow.planner.search import DEVICE, model_inputs
from offlow.streams import tuples

QUERY = Path(__file__).resolve().parent.parent / "examples" / "streams_query.py"
# The query's parameters for the tuned run (examples/streams_query.py's program()):
# v1 < 80 kept, windows of 8 ms every 100 us (80 a tuple).
TUNED = {"keep_below": 80, "window_us": 8000, "advance_us": 100}
TUPLE_PORT = 9000  # the tuples' UDP port (any: the query takes every UDP tuple)
# Seed 004's Figure 4, as its text gives it (the figure's bars are not in the text):
# speed-up over host-only per NIC cores, with caches.
SEED_FIG4 = {
    "cmp-nic-200": {1: "< 1 (NIC the bottleneck)", 2: "< 1 (NIC the bottleneck)", 3: "-",
                    4: "1.30 (balanced)"},
    "cmp-nic-400": {1: "-", 2: "balanced (its peak)", 3: "-", 4: "no better than 2 (host "
                    "the bottleneck)"},
}


def tuned_query(work: Path, params: dict[str, int]) -> Path:
    """A program file under `work` that gives the stream query with `params`."""
    path = work / "streams_query_tuned.py"
    path.write_text("import runpy\n\n\ndef program():\n"
                    f"    return runpy.run_path({str(QUERY)!r})['program'](**{params!r})\n")
    return path


def active_nic(packets: int, work: Path, query: Path = QUERY) -> dict[str, Any]:
    """Figure 4's speed-ups, predicted from a calibration of the stream query (the
    program file `query`) over a capture of the seed's tuples (20,000, replayed)."""
    capture = work / "tuples.pcap"
    tuples.write_pcap(capture, [(t, TUPLE_PORT) for t in tuples.generate(1, 20_000)])
    cal = calibrate(query, [], capture, packets)
    segs, crossings = model_inputs(cal)
    host = profile.load("host")
    ns = {s.name: sum(s.ns.values()) for s in segs}
    out: dict[str, Any] = {"filter_ns": ns["select"], "aggregate_ns": ns["aggregate"],
                           "elements": [e.__dict__ for e in cal.elements], "rows": []}
    only = Placement({"select": HOST, "aggregate": HOST}, {"select": (0,), "aggregate": (0,)})
    for name in ("cmp-nic-200", "cmp-nic-400"):
        profiles = {HOST: host, DEVICE: profile.load(name)}
        base = predict(segs, crossings, only, profiles)
        for k in range(1, 5):
            split = Placement({"select": DEVICE, "aggregate": HOST},
                              {"select": tuple(range(k)), "aggregate": (0,)})
            p = predict(segs, crossings, split, profiles)
            out["rows"].append({"profile": name, "nic_cores": k,
                                "speedup": p.mpps / base.mpps,
                                "bottleneck": p.bottleneck.name,
                                "seed": SEED_FIG4[name][k]})
    return out


def lso_clocks(work: Path) -> dict[str, Any]:
    """Tables 3-4's clocks from offlow's instructions per packet at lso-risc's IPC."""
    risc = profile.load("lso-risc")
    ins = lso.instructions(lso.build_offlow(), work, lso.QUICK)
    if "skipped" in ins:
        return {"skipped": ins["skipped"]}
    rows = []
    for proto in lso.PROTOS:
        for method, seed in (("in place", lso.SEED_T3), ("pio", lso.SEED_T4_COPIED)):
            for mtu in reversed(lso.MTUS):
                n = ins[proto][method][mtu]["per_packet"]
                wire = mtu + lso.WIRE
                rows.append({
                    "proto": proto, "method": method, "mtu": mtu, "instructions": n,
                    "mhz_40": clock_needed_mhz(n, risc.ipc, 40, wire),
                    "mhz_100": clock_needed_mhz(n, risc.ipc, 100, wire),
                    "seed_40": seed[40][mtu], "seed_100": seed[100][mtu],
                    "gbps_at_profile": risc.clock_mhz * 1e6 * risc.ipc / n * wire * 8 / 1e9})
    return {"profile": risc.name, "clock_mhz": risc.clock_mhz, "ipc": risc.ipc, "rows": rows}


def peaks(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Per profile, the fewest NIC cores that give its highest speed-up (to 2 places)."""
    out: dict[str, int] = {}
    for name in dict.fromkeys(r["profile"] for r in rows):
        mine = [r for r in rows if r["profile"] == name]
        best = max(round(r["speedup"], 2) for r in mine)
        out[name] = min(r["nic_cores"] for r in mine if round(r["speedup"], 2) == best)
    return out


def _figure_4(title: str, a: dict[str, Any]) -> list[str]:
    lines = [title,
             f"  calibrated here: the NIC's segment (reading the tuples, Filter) "
             f"{a['filter_ns']:.0f} ns, the host's (Aggregate, replies) "
             f"{a['aggregate_ns']:.0f} ns per tuple read (ratio "
             f"{a['filter_ns'] / a['aggregate_ns']:.2f}; the stages balance at F / (speed x "
             "cores) = A)"]
    rows = [["NIC", "cores", "speed-up", "bottleneck", "seed 004"]]
    for r in a["rows"]:
        rows.append([r["profile"], str(r["nic_cores"]), f"{r['speedup']:.2f}", r["bottleneck"],
                     r["seed"]])
    lines += lso.columns(rows)
    lines.append("  peak (the fewest NIC cores at the highest speed-up): " + ", ".join(
        f"{name} at {k}" + (" (its NIC still the bottleneck: the balance lies beyond 4)"
                            if _rising(a["rows"], name) else "")
        for name, k in peaks(a["rows"]).items()))
    return lines


def _rising(rows: list[dict[str, Any]], name: str) -> bool:
    """Whether `name`'s NIC core is still the bottleneck at 4 cores (no balance yet)."""
    last = [r for r in rows if r["profile"] == name][-1]
    return last["bottleneck"].startswith("nic")


def report(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [machine_line(m) + f"; busy before: {doc['busy']}", ""]
    lines += _figure_4("active-NIC seed, Figure 4: Filter on the NIC, Aggregate on the host; "
                       "speed-up over both on one host core (predicted); the query as written",
                       doc["active_nic"])
    lines += [""] + _figure_4(
        "the same query tuned as the seed tuned its own (" + ", ".join(
            f"{k}={v}" for k, v in TUNED.items()) + ")", doc["active_nic_tuned"])
    ls = doc["lso"]
    lines += ["", "LSO seed, Tables 3-4: the clock a core needs for 40 / 100 Gb/s (offlow's "
              "segmentation code, callgrind instructions per packet, at the lso-risc profile's "
              f"{ls.get('ipc', '-')} instruction a cycle)"]
    if "skipped" in ls:
        lines.append(f"  skipped: {ls['skipped']}")
    else:
        rows = [["proto", "method", "MTU", "inst/pkt", "MHz 40G", "MHz 100G", "seed 40G",
                 "seed 100G", f"Gb/s at {ls['clock_mhz']:.0f} MHz"]]
        for r in ls["rows"]:
            rows.append([r["proto"], r["method"], str(r["mtu"]), f"{r['instructions']:.0f}",
                         f"{r['mhz_40']:.0f}", f"{r['mhz_100']:.0f}", str(r["seed_40"]),
                         str(r["seed_100"]), f"{r['gbps_at_profile']:.0f}"])
        lines += lso.columns(rows)
    return "\n".join(lines)


def run(quick: bool = False, out_json: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    busy = quiet_check(1.0)
    doc: dict[str, Any] = {"machine": machine(), "busy": busy}
    with tempfile.TemporaryDirectory(prefix="offlow-bench-seeds-") as d:
        n = 40_000 if quick else 200_000
        doc["active_nic"] = active_nic(n, Path(d))
        doc["active_nic_tuned"] = active_nic(n, Path(d), tuned_query(Path(d), TUNED))
        doc["lso"] = lso_clocks(Path(d))
    print(report(doc))
    if out_json:
        Path(out_json).write_text(json.dumps(doc, indent=2))
    return doc
