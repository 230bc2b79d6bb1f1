"""CPU time of a process's threads, from /proc: a forwarding loop's packets per second
of CPU it got, which holds when other work shares the cores (a wall-clock rate on a
busy machine measures the scheduler as much as the loop)."""

from __future__ import annotations

import os

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
