"""`offlow plan --validate`: each alternative predicted and measured (profile-scaled
emulation, `offlow run --profile`), with the error of each."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.planner.calibrate import workload_options
from offlow.planner.model import Prediction, Stage
from offlow.planner.search import Ranked
from offlow.runner import build_for, run


@dataclass(frozen=True)
class Check:
    ranked: Ranked
    measured_mpps: float
    # per thread: (device, the segments it runs) -> busy ns per packet read
    threads: dict[tuple[str, frozenset[str]], float] = field(default_factory=dict)
    # the device's segments' ns per packet read on this host: calibrated as they are
    # (not slowed), and under the profile's slow-down (what the prediction used)
    device_ns: tuple[float, float] = (0.0, 0.0)
    # every round's error, in order (a pooled check: the rounds it pools)
    rounds: tuple[float, ...] = ()
    pooled_mpps: float = 0.0  # pooled rounds: their predicted throughput (0: ranked's)
    # the crossing probe's points its prediction used, (bytes, push ns, pop ns, push
    # copies ns, pop copies ns) per entry (pooled: every round's, in order); () where
    # the placement crosses no threads
    crossings: tuple[tuple[float, float, float, float, float], ...] = ()

    @property
    def predicted_mpps(self) -> float:
        return self.pooled_mpps or self.ranked.prediction.mpps

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return self.predicted_mpps / self.measured_mpps - 1.0

    def stages(self) -> list[tuple[str, float, float | None]]:
        """Each predicted core stage beside its thread's measured busy ns per packet
        read (None: no thread ran those segments), then the other stages (links, DMA)."""
        p = self.ranked.placement
        on: dict[tuple[str, int], set[str]] = {}
        for seg, dev in p.devices.items():
            for c in p.cores[seg]:
                on.setdefault((dev, c), set()).add(seg)
        out = []
        for st in self.ranked.prediction.stages:
            dev, _, core = st.name.partition(" core ")
            segs = on.get((dev, int(core)), set()) if core else set()
            what = f"{st.name} ({','.join(sorted(segs))})" if segs else st.name
            out.append((what, st.ns, self.threads.get((dev, frozenset(segs))) if segs else None))
        return out


def pooled(rounds: Sequence[Check]) -> Check:
    """The rounds of one placement as one check, their time pooled (what one long run
    interleaved with its calibrations would count): predicted and measured throughput
    each from the mean over the rounds of its time per packet read (the slowest stage's;
    the busiest thread's), so that every round weighs in and a round the machine slowed
    on one side moves the row by its share only. The stages (and latency) and the
    threads shown beside them are the rounds' means too; `rounds` each round's error."""
    first = rounds[0]
    stages = tuple(Stage(st.name, statistics.fmean(
        next((s.ns for s in c.ranked.prediction.stages if s.name == st.name), 0.0)
        for c in rounds)) for st in first.ranked.prediction.stages)
    pred = Prediction(stages, statistics.fmean(c.ranked.prediction.latency_us
                                               for c in rounds))
    threads = {k: statistics.fmean(c.threads.get(k, 0.0) for c in rounds)
               for k in dict.fromkeys(k for c in rounds for k in c.threads)}
    return Check(replace(first.ranked, prediction=pred),
                 _per_ns([c.measured_mpps for c in rounds]), threads,
                 device_ns=(statistics.fmean(c.device_ns[0] for c in rounds),
                            statistics.fmean(c.device_ns[1] for c in rounds)),
                 rounds=tuple(c.error for c in rounds),
                 pooled_mpps=_per_ns([c.ranked.prediction.mpps for c in rounds]),
                 crossings=tuple(p for c in rounds for p in c.crossings))


def _per_ns(mpps: Sequence[float]) -> float:
    """Mpps from the mean of the rates' times per packet (1e3 / Mpps ns)."""
    return 1e3 / statistics.fmean(1e3 / m for m in mpps)


def measure(program: Path, settings: list[str], capture: Path | None, packets: int,
            device: str) -> tuple[float, dict[tuple[str, frozenset[str]], float]]:
    """Packets read per second (Mpps) by the program's sources, run with `settings` and
    the device `nic` slowed to profile `device`, and each thread's busy ns per packet
    read (thread_ns)."""
    opts = workload_options(capture, packets, profile=device)
    b = build_for(load_program(program, settings), opts)
    res = run(b, opts)
    if not res.ok:
        raise OfflowError(f"--validate: the run with {' '.join(settings) or 'no --set'} "
                          "failed: " + "; ".join(res.errors))
    return source_mpps(b.graph, res.stats), thread_ns(b.graph, res.stats)


def _threads(g: Graph, stats: dict) -> dict[tuple[str, int], tuple[set[str], float, int]]:
    """Per thread (device, CPU): its segments, its busy CPU ns less the instruments
    (the sources' reading, the element timers' cost) and the packets its sources read."""
    sources = {n.name for n in g.nodes if n.kind == "source"}
    cores_of: dict[tuple[str, int], list[dict]] = {}
    for dev, d in stats.items():
        for c in d.get("cores", []):
            cores_of.setdefault((dev, c["cpu"]), []).append(c)
    out = {}
    for key, cores in cores_of.items():
        els = [(name, v) for c in cores for name, v in c.get("elements", {}).items()]
        read = sum(v["in"] for name, v in els if name in sources)
        timer = max((c.get("timer_ns", 0.0) for c in cores), default=0.0)
        instruments = sum(v.get("ns", 0) for name, v in els if name in sources) + timer * sum(
            v["in"] for name, v in els)
        busy = sum(c.get("busy_cpu_ns", 0) for c in cores) - instruments
        out[key] = ({c["segment"] for c in cores}, busy, read)
    return out


def thread_ns(g: Graph, stats: dict) -> dict[tuple[str, frozenset[str]], float]:
    """Each thread's busy ns (as source_mpps counts it) per packet read, keyed by its
    device and the segments it runs (what the model's core stages name)."""
    ts = _threads(g, stats)
    read = sum(r for _, _, r in ts.values())
    return {(dev, frozenset(segs)): busy / read for (dev, _), (segs, busy, _) in ts.items()
            if read}


def source_mpps(g: Graph, stats: dict) -> float:
    """Packets read per busy CPU-second of the busiest thread, in millions: the run's
    throughput had that thread a CPU to itself (on a shared machine the wall clock also
    counts the neighbours' work). Busy: its CPU time in turns that moved packets (its
    cores' busy_cpu_ns; waiting for packets is not busy). As the model, it leaves out
    the sources' reading (the wire) and the element timers' own cost (the emulation's
    instruments)."""
    ts = _threads(g, stats)
    read = sum(r for _, _, r in ts.values())
    busiest = max((b for _, b, _ in ts.values()), default=0.0)
    return read / busiest * 1e3 if busiest > 0 else 0.0
