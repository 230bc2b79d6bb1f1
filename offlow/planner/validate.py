"""`offlow plan --validate`: each alternative predicted and measured (profile-scaled
emulation, `offlow run --profile`), with the error of each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.planner.search import Ranked
from offlow.runner import RunOptions, build_for, run


@dataclass(frozen=True)
class Check:
    ranked: Ranked
    measured_mpps: float

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return self.ranked.prediction.mpps / self.measured_mpps - 1.0


def measure(program: Path, settings: list[str], capture: Path | None, packets: int,
            device: str) -> float:
    """Packets read per second (Mpps) by the program's sources, run with `settings` and
    the device `nic` slowed to profile `device`."""
    if capture is None:
        opts = RunOptions(count=min(packets, 20_000), loops=max(1, -(-packets // 20_000)),
                          profile=device)
    else:
        opts = RunOptions(input=capture, loops=max(1, packets // 1_000), profile=device)
    b = build_for(load_program(program, settings), opts)
    res = run(b, opts)
    if not res.ok:
        raise OfflowError(f"--validate: the run with {' '.join(settings) or 'no --set'} "
                          "failed: " + "; ".join(res.errors))
    return source_mpps(b.graph, res.stats)


def source_mpps(g: Graph, stats: dict) -> float:
    """Packets read per busy CPU-second of the busiest thread, in millions: the run's
    throughput had that thread a CPU to itself (on a shared machine the wall clock also
    counts the neighbours' work). Busy: its CPU time in turns that moved packets (its
    cores' busy_cpu_ns; waiting for packets is not busy). As the model, it leaves out
    the sources' reading (the wire) and the element timers' own cost (the emulation's
    instruments)."""
    sources = {n.name for n in g.nodes if n.kind == "source"}
    threads: dict[tuple[str, int], list[dict]] = {}
    for dev, d in stats.items():
        for c in d.get("cores", []):
            threads.setdefault((dev, c["cpu"]), []).append(c)
    read, busiest = 0, 0.0
    for cores in threads.values():
        els = [(name, v) for c in cores for name, v in c.get("elements", {}).items()]
        read += sum(v["in"] for name, v in els if name in sources)
        timer = max((c.get("timer_ns", 0.0) for c in cores), default=0.0)
        instruments = sum(v.get("ns", 0) for name, v in els if name in sources) + timer * sum(
            v["in"] for name, v in els)
        busiest = max(busiest, sum(c.get("busy_cpu_ns", 0) for c in cores) - instruments)
    return read / busiest * 1e3 if busiest > 0 else 0.0
