"""`offlow bench streams`: the stream operators' throughput in the active-NIC seed's
shape (its Figures 7-12 and Figure 4), beside the seed's figures and a ceiling measured
in the same run.

- Operators (Figures 7-12): each of Filter, Map, Aggregate, BSort, Join and Resample,
  with the seed's settings (Filter keeps 20% by an integer field, Map keeps three
  fields, Aggregate averages one field in sliding windows, BSort sorts with a window
  of 20 tuples, Join joins within about 10 tuples, Resample averages the right stream
  near each left tuple), on the host alone, then the host plus 1, 2 and 4 NIC cores,
  every core running the operator on a stream of its own (independent streams: one
  segment, source and operator per core). MB/s of 164-byte tuples (ts and 39 values,
  the seed's), in all and per core, and the ratio to the host alone beside the seed's.
- Ceiling: the same streams with no operator (TupleIn alone: source, parse, count), per
  core, in the same run; each operator's per-core rate is also given as a fraction of it.
- Pipeline (Figure 4): one stream, Filter on 1, 2 or 4 NIC cores (the stream split
  between them) and Aggregate on the host, beside both on the host alone; with several
  NIC cores a BSort (slack 4095) on the host puts the interleaved rings back in ts
  order first (the tuples still late, dropped by the Aggregate, are counted). MB/s of
  input tuples and the speed-up.
- Word count (Floem's Storm-style analytics, examples/wordcount.py and
  wordcount_nic.py): the two offload designs side by side on one generated text stream,
  lines/s and MB/s of text through the spout, and the second's rate over the first's
  (Floem: +75-96%).
- Crypto: the rows of `offlow bench crypto` (per core beside OpenSSL, Figure 6), measured
  in the same run (benchmarks/crypto.py).

`--png` plots the operators per core, the speed-ups beside the seed's, the crypto ratios
beside their targets and the two word-count designs.

Input: a seeded stream (offlow.streams.tuples.generate) as a capture, replayed for the
run's duration with advance_ts (each replay's time goes on). On this 2-CPU machine the
host runs on CPU 0 and NIC core c on CPU (1 + c) mod 2, so every row with more than one
NIC core is oversubscribed and says so: those rows show the cost of sharing CPUs, not
the gain of more cores (the planner's device profiles are where the seed's NIC speeds
come in)."""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dpkt

from benchmarks import crypto
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from offlow import Element, Program, Sink, Source, runner
from offlow.build import Build, build
from offlow.dsl.loader import load_program
from offlow.elements.streams import Aggregate, BSort, Filter, Join, Map, Resample, TupleIn
from offlow.report import summarize
from offlow.streams.tuples import SEED_VALUES, generate, write_pcap

TUPLE_BYTES = 8 + 4 * SEED_VALUES  # 164: the seed's tuple (ts and 39 values)
GAP_NS = 1000  # mean ts gap of the generated stream
LEFT, RIGHT = 7001, 7002
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DESIGNS = {"bolts on the host": "wordcount.py", "bolts on the NIC": "wordcount_nic.py"}

# name -> a maker of the operator with the seed's settings (seed 004, "Next, we will
# compare the processing throughput of 6 operators")
OPERATORS: dict[str, Callable[[str], Element | None]] = {
    "pass": lambda n: None,  # the ceiling: no operator
    "filter": lambda n: Filter(n, attr=1, op="<", value=20),  # 20% of uniform 0..99
    "map": lambda n: Map(n, attrs=(1, 2, 3)),
    "aggregate": lambda n: Aggregate(n, fn="avg", attr=2, size=20 * GAP_NS,
                                     advance=10 * GAP_NS),
    "bsort": lambda n: BSort(n, slack=20),
    "join": lambda n: Join(n, size=5 * GAP_NS, left_port=LEFT, right_port=RIGHT,
                           left_key=3, right_key=3),  # about 10 tuples in the window
    "resample": lambda n: Resample(n, size=5 * GAP_NS, left_port=LEFT, right_port=RIGHT,
                                   attr=2),
}

# The seed's figures (4 NIC cores of 200 MHz with 8 KB caches, 1 Gb/s link): host alone
# MB/s where given, and the aggregate with NIC cores as a factor of the host alone.
SEED = {
    "filter": {"host": None, "4 NIC cores": "106.1 MB/s (link-bound)"},
    "map": {"host": None, "4 NIC cores": "84.9 MB/s (link-bound)"},
    "aggregate": {"host": 14.0, "4 NIC cores": "1.39x"},
    "resample": {"host": 31.0, "2 NIC cores": "1.22x", "4 NIC cores": "1.34x"},
    "join": {"host": 50.3, "4 NIC cores": "1.40x"},
    "bsort": {"host": 93.0, "4 NIC cores": "1.21x (1.44x at 10 Gb/s)"},
    "pipeline": {"4 NIC cores": "1.30x (balanced; 1.76x with re-tuned operators at 400 MHz)"},
}


@dataclass(frozen=True)
class Sweep:
    nic_cores: tuple[int, ...]
    operators: tuple[str, ...]
    duration: float  # seconds per run
    reps: int
    tuples: int  # in the capture (replayed)
    lines: int = 0  # word count: lines in its capture (replayed); 0: no word count
    crypto: crypto.Sweep | None = None  # the crypto rows; None: none


FULL = Sweep((0, 1, 2, 4), tuple(OPERATORS), duration=0.5, reps=3, tuples=20_000,
             lines=20_000, crypto=crypto.FULL)
QUICK = Sweep((0, 1, 2), tuple(OPERATORS), duration=0.3, reps=1, tuples=5_000,
              lines=5_000, crypto=crypto.QUICK)


def write_input(path: Path, n: int) -> None:
    """`n` seed-shaped tuples, the left and right streams alternating (Join, Resample)."""
    tuples = generate(1, n, values=SEED_VALUES, gap_ns=GAP_NS)
    write_pcap(path, [(t, (LEFT, RIGHT)[k % 2]) for k, t in enumerate(tuples)])


def independent(op: str, nic_cores: int) -> Program:
    """One stream on host core 0 and one on each of `nic_cores` NIC cores, each its own
    source, TupleIn, operator and sink in a segment of its own."""
    p = Program(f"streams_{op}_{nic_cores}")
    for i in range(nic_cores + 1):
        src, tin, out = Source(f"rx{i}"), TupleIn(f"tin{i}"), Sink(f"tx{i}")
        el = OPERATORS[op](f"{op}{i}")
        chain = [src, tin, *([el] if el else []), out]
        for a, b in zip(chain, chain[1:], strict=False):
            a >> b
        device, core = ("host", 0) if i == 0 else ("nic", i - 1)
        p.segment(f"s{i}", chain, device=device, cores=[core])
    return p


def pipeline(nic_cores: int) -> Program:
    """Filter then Aggregate on one stream: both on the host (0), or the Filter on
    `nic_cores` NIC cores and the Aggregate (after a BSort merge when they are several)
    on the host."""
    p = Program(f"streams_pipeline_{nic_cores}")
    src, tin, out = Source("rx0"), TupleIn("tin"), Sink("tx")
    sel, agg = OPERATORS["filter"]("select"), OPERATORS["aggregate"]("average")
    assert sel and agg
    merge = [BSort("merge", slack=4095)] if nic_cores > 1 else []
    chain = [src, tin, sel, *merge, agg, out]
    for a, b in zip(chain, chain[1:], strict=False):
        a >> b
    if nic_cores == 0:
        p.segment("s0", chain, device="host", cores=[0])
    else:
        p.segment("select", [src, tin, sel], device="nic", cores=list(range(nic_cores)))
        p.segment("s0", [*merge, agg, out], device="host", cores=[0])
    return p


def _opts(b: Build, capture: Path, duration: float) -> runner.RunOptions:
    sources = [n.name for n in b.plan.graph.nodes if n.kind == "source"]
    return runner.RunOptions(input=capture, duration=duration, timeout=120 + 4 * duration,
                             opts=tuple(f"{s}.advance_ts=1" for s in sources))


def measure(prog: Program, capture: Path, sw: Sweep) -> dict[str, Any]:
    """Run `prog` `sw.reps` times: per segment, the best tuples/s; drops; oversubscription."""
    b = build(prog)
    o = _opts(b, capture, sw.duration)
    best: dict[str, float] = {}
    errors: list[str] = []
    late = 0
    for _ in range(sw.reps):
        res = runner.run(b, o)
        if not res.ok:
            errors += res.errors
            continue
        s = summarize(b.plan, res.stats)
        for seg in s["segments"]:
            best[seg["segment"]] = max(best.get(seg["segment"], 0.0), seg["mpps"] * 1e6)
        late = max(late, sum(d["packets"] for d in s["accounting"]["dropped"]
                             if d["reason"] == "late"))
    return {"tuples_per_s": best, "errors": errors[:3], "late": late,
            "oversubscribed": runner.oversubscription(b, o) is not None}


def write_text(path: Path, n: int) -> float:
    """`n` datagrams of text, each a line of 1..19 words drawn by Zipf from 5,000
    (seed 1); returns the mean bytes of text a line."""
    rng = random.Random(1)
    vocab = [f"w{k}".encode() for k in range(5000)]
    weights = [1 / (k + 1) for k in range(len(vocab))]
    total = 0
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for i in range(n):
            line = b" ".join(rng.choices(vocab, weights, k=rng.randrange(1, 20)))
            total += len(line)
            udp = dpkt.udp.UDP(sport=4000, dport=5000, ulen=8 + len(line), data=line)
            ip = dpkt.ip.IP(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]), p=17, data=udp)
            ip.len = 28 + len(line)
            w.writepkt(bytes(dpkt.ethernet.Ethernet(src=b"\x02" + bytes(5), type=0x0800,
                                                    dst=b"\x02" + bytes(4) + b"\x01",
                                                    data=ip)), ts=i * 1e-6)
    return total / n


def wordcount(work_dir: Path, sw: Sweep, progress: bool) -> list[dict[str, Any]]:
    """The two word-count designs on one text stream: lines/s and MB/s of text through
    the spout, and each design's rate over the first's."""
    cap = work_dir / "lines.pcap"
    mean = write_text(cap, sw.lines)
    rows = []
    for design, file in DESIGNS.items():
        if progress:
            print(f"  streams: word count, {design}", flush=True)
        m = measure(load_program(EXAMPLES / file), cap, sw)
        lps = m["tuples_per_s"].get("spout")
        rows.append({"design": design, "example": f"examples/{file}", "lines_per_s": lps,
                     "mbps": lps * mean / 1e6 if lps else None, "errors": m["errors"],
                     "oversubscribed": m["oversubscribed"]})
    first = rows[0]["lines_per_s"]
    for r in rows:
        r["vs_first"] = r["lines_per_s"] / first if r["lines_per_s"] and first else None
    return rows


def _mbps(tps: float) -> float:
    return tps * TUPLE_BYTES / 1e6


def operators(capture: Path, sw: Sweep, progress: bool) -> list[dict[str, Any]]:
    rows = []
    for op in sw.operators:
        for k in sw.nic_cores:
            if progress:
                print(f"  streams: {op}, host + {k} NIC core(s)", flush=True)
            m = measure(independent(op, k), capture, sw)
            per = [_mbps(v) for v in m["tuples_per_s"].values()]
            rows.append({"operator": op, "nic_cores": k, "streams": k + 1,
                         "mbps": sum(per) if per else None,
                         "mbps_per_core": sum(per) / (k + 1) if per else None,
                         "host_mbps": _mbps(m["tuples_per_s"].get("s0", 0.0)) or None,
                         "errors": m["errors"], "oversubscribed": m["oversubscribed"]})
    for r in rows:
        alone = next((x["mbps"] for x in rows if x["operator"] == r["operator"]
                      and x["nic_cores"] == 0), None)
        ceiling = next((x["mbps_per_core"] for x in rows if x["operator"] == "pass"
                        and x["nic_cores"] == r["nic_cores"]), None)
        r["vs_host_alone"] = r["mbps"] / alone if r["mbps"] and alone else None
        r["vs_ceiling"] = (r["mbps_per_core"] / ceiling
                           if r["mbps_per_core"] and ceiling else None)
    return rows


def pipelines(capture: Path, sw: Sweep, progress: bool) -> list[dict[str, Any]]:
    rows = []
    for k in sw.nic_cores:
        if progress:
            print(f"  streams: pipeline, Filter on {k or 'the host'} "
                  f"{'NIC core(s)' if k else ''}", flush=True)
        m = measure(pipeline(k), capture, sw)
        src = m["tuples_per_s"].get("select" if k else "s0")
        rows.append({"nic_cores": k, "mbps": _mbps(src) if src else None, "late": m["late"],
                     "errors": m["errors"], "oversubscribed": m["oversubscribed"]})
    alone = next((r["mbps"] for r in rows if r["nic_cores"] == 0), None)
    for r in rows:
        r["speedup"] = r["mbps"] / alone if r["mbps"] and alone else None
    return rows


def _f(x: float | None, fmt: str) -> str:
    return format(x, fmt) if x is not None else "-"


def report(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [f"stream operators (active-NIC seed, Figures 7-12): {TUPLE_BYTES}-byte tuples, "
             f"{doc['duration']} s a run, best of {doc['reps']}",
             machine_line(m, doc['features']) + f"; busy before: {doc['busy']}",
             f"{'operator':<10}{'NIC':>4}{'MB/s':>9}{'per core':>10}{'host':>8}"
             f"{'vs host':>9}{'vs ceil':>9}  seed  note"]
    for r in doc["operators"]:
        seed = SEED.get(r["operator"], {})
        said = (seed.get(f"{r['nic_cores']} NIC cores", "") if r["nic_cores"]
                else f"{seed['host']} MB/s" if seed.get("host") else "")
        note = "oversubscribed" if r["oversubscribed"] else ""
        if r["errors"]:
            note += f" error: {r['errors'][0]}"
        lines.append(f"{r['operator']:<10}{r['nic_cores']:>4}{_f(r['mbps'], '.1f'):>9}"
                     f"{_f(r['mbps_per_core'], '.1f'):>10}{_f(r['host_mbps'], '.1f'):>8}"
                     f"{_f(r['vs_host_alone'], '.2f'):>8}x{_f(r['vs_ceiling'], '.2f'):>8}x"
                     f"  {said}  {note}".rstrip())
    lines += ["", "pipeline (Figure 4): Filter on NIC cores, Aggregate on the host "
              "(0: both on the host)",
              f"{'NIC':>4}{'MB/s':>9}{'speed-up':>10}{'late':>8}  seed  note"]
    for r in doc["pipeline"]:
        said = SEED["pipeline"].get(f"{r['nic_cores']} NIC cores", "")
        note = "oversubscribed" if r["oversubscribed"] else ""
        if r["errors"]:
            note += f" error: {r['errors'][0]}"
        lines.append(f"{r['nic_cores']:>4}{_f(r['mbps'], '.1f'):>9}"
                     f"{_f(r['speedup'], '.2f'):>9}x{r['late']:>8}  {said}  {note}".rstrip())
    if doc.get("wordcount"):
        lines += ["", "word count (Floem's Storm-style analytics): the two offload designs",
                  f"{'design':<20}{'lines/s':>10}{'MB/s':>8}{'vs first':>10}  seed  note"]
        for r in doc["wordcount"]:
            note = "oversubscribed" if r["oversubscribed"] else ""
            if r["errors"]:
                note += f" error: {r['errors'][0]}"
            seed = "+75-96% (Floem)" if r is not doc["wordcount"][0] else ""
            lines.append(f"{r['design']:<20}{_f(r['lines_per_s'], '.0f'):>10}"
                         f"{_f(r['mbps'], '.1f'):>8}{_f(r['vs_first'], '.2f'):>9}x"
                         f"  {seed}  {note}".rstrip())
    if doc.get("crypto"):
        lines += ["", "crypto (the rows of `offlow bench crypto`, measured in this run)",
                  crypto.format_report(doc["crypto"])]
    return "\n".join(lines)


def measure_all(sw: Sweep, progress: bool = True) -> dict[str, Any]:
    busy = quiet_check(1.0)
    with tempfile.TemporaryDirectory(prefix="offlow-bench-streams-") as d:
        capture = Path(d) / "stream.pcap"
        write_input(capture, sw.tuples)
        return {"machine": machine(), "features": cpu_features(), "busy": busy,
                "cpus": os.cpu_count(), "duration": sw.duration, "reps": sw.reps,
                "input": f"{sw.tuples} generated tuples of {SEED_VALUES} values (seed 1, "
                         f"ts gaps 0..{2 * GAP_NS} ns), replayed with advance_ts",
                "seed": SEED, "operators": operators(capture, sw, progress),
                "pipeline": pipelines(capture, sw, progress),
                "wordcount": wordcount(Path(d), sw, progress) if sw.lines else [],
                "crypto": crypto.measure(sw.crypto) if sw.crypto else None}


def plot(doc: dict[str, Any], path: Path) -> None:
    """Four panels: each operator's MB/s per core against NIC cores (Figures 7-12), the
    speed-ups of the pipeline and of Figure 6 beside the seed's, the crypto ratios to
    OpenSSL beside their targets, and the two word-count designs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((a, b), (c, d)) = plt.subplots(2, 2, figsize=(13, 9))
    for op in dict.fromkeys(r["operator"] for r in doc["operators"]):
        rows = [r for r in doc["operators"] if r["operator"] == op and r["mbps_per_core"]]
        a.plot([r["nic_cores"] for r in rows], [r["mbps_per_core"] for r in rows], marker="o",
               linestyle="--" if op == "pass" else "-",
               label="ceiling (no operator)" if op == "pass" else op)
    a.set(xlabel="NIC cores beside the host (each its own stream)", ylabel="MB/s per core",
          title="(a) operators per core (seed Figures 7-12)")
    a.legend(fontsize=8)
    pipe = [r for r in doc["pipeline"] if r["speedup"]]
    b.plot([r["nic_cores"] for r in pipe], [r["speedup"] for r in pipe], marker="o",
           label="Filter on NIC + Aggregate on host")
    b.plot([4], [1.30], "r*", label="seed: pipeline 1.30x on 4 NIC cores")
    for work in ("md5", "blowfish"):
        rows = [r for r in (doc.get("crypto") or {}).get("figure6", []) if r["speedup"]]
        rows = [r for r in rows if r["work"] == work]
        b.plot([r["cores"] for r in rows], [r["speedup"] for r in rows], marker="s",
               label=f"{work} (Figure 6)")
        seed = crypto.SEED_FIG6[work]
        b.plot(list(seed), list(seed.values()), "x", markersize=9, label=f"seed: {work}")
    b.set(xlabel="NIC cores (oversubscribed on this machine beyond its CPUs)",
          ylabel="speed-up", title="(b) speed-ups beside the seed's")
    b.legend(fontsize=8)
    rows = (doc.get("crypto") or {}).get("rows", [])
    names = [f"{r['op']} {r['size']} B" for r in rows]
    c.barh(names, [r["ratio"] for r in rows])
    for k, r in enumerate(rows):
        if r["target"]:
            c.plot([r["target"]] * 2, [k - 0.4, k + 0.4], color="red")
    c.axvline(1.0, color="gray", linestyle=":")
    c.set(xlabel="offlow / OpenSSL (red: target)", title="(c) crypto per core")
    c.tick_params(axis="y", labelsize=7)
    wc = [r for r in doc.get("wordcount", []) if r["mbps"]]
    d.bar([r["design"] for r in wc], [r["mbps"] for r in wc])
    d.set(ylabel="MB/s of text", title="(d) word count: the two offload designs")
    fig.suptitle(f"offlow bench streams: {doc['machine']['cpu']}, {doc['machine']['cpus']} "
                 f"CPUs", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(quick: bool = False, out_json: Path | None = None,
        out_png: Path | None = None) -> dict[str, Any]:
    """`offlow bench streams`: measure, print the tables, write JSON and the plot."""
    doc = measure_all(QUICK if quick else FULL)
    print(report(doc))
    if out_json:
        out_json.write_text(json.dumps(doc, indent=1))
        print(f"wrote {out_json}")
    if out_png:
        plot(doc, out_png)
        print(f"wrote {out_png}")
    return doc
