"""CPU time of a process's threads, from /proc: a forwarding loop's packets per second
of CPU it got, which holds when other work shares the cores (a wall-clock rate on a
busy machine measures the scheduler as much as the loop)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of each thread of process `pid`; {} once it is gone."""
    out: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out[tid] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def busiest(before: dict[str, float], after: dict[str, float]) -> float:
    """The CPU seconds the busiest thread used between two readings."""
    return max((t - before.get(tid, 0.0) for tid, t in after.items()), default=0.0)


def share_before_end(samples: list[tuple[float, dict[str, float]]], start: float,
                     stop: float) -> float | None:
    """The share of one CPU the busiest thread got from `start` to `stop` seconds
    before its last reading (where it ended, or the process did), from samples (time,
    thread_cpu) in time order; None without two readings there."""
    if not samples:
        return None
    finals: dict[str, float] = {}
    for _, c in samples:
        finals.update(c)
    tid = max(finals, key=lambda t: finals[t])
    mine = [(t, c[tid]) for t, c in samples if tid in c]
    end = mine[-1][0]
    inside = [(t, c) for t, c in mine if end - start <= t <= end - stop]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


@contextmanager
def watch(pids: dict[str, int], name: str,
          every: float = 0.05) -> Iterator[list[tuple[float, dict[str, float]]]]:
    """Read the threads of process `pids[name]` (set once it has started) every `every`
    s until the block ends or the process does; yields the list of (monotonic time,
    thread_cpu) it appends to."""
    samples: list[tuple[float, dict[str, float]]] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            if name in pids:
                now = thread_cpu(pids[name])
                if now:
                    samples.append((time.monotonic(), now))

    th = threading.Thread(target=run, daemon=True)
    th.start()
    try:
        yield samples
    finally:
        stop.set()
        th.join()
