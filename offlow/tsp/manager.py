"""The host's manager of the TSP case study: starts a program whose `tsp` channel is
served by climbers (examples/tsp.py), posts jobs of climbs on it, keeps at most the
result queue's slots of them unfetched, and fetches each job's best tour in order from
the circular result queue (runtime/lib/tsp/include/offlow/tsp_climbers.h)."""

from __future__ import annotations

import os
import struct
import sys
import time
from dataclasses import dataclass

from offlow.channels import Channel
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.runner import RunOptions
from offlow.session import session

# enum ofl_tsp_op and struct ofl_tsp_result (tsp_climbers.h)
OP_INFO, OP_POST, OP_READY, OP_FETCH = 1, 2, 3, 4
RESULT_HEADER = struct.Struct("<IIQq")


@dataclass(frozen=True)
class Result:
    """The best tour of `climbs` climbs, where it was found, and how long they took."""

    length: int
    tour: tuple[int, ...]
    seed: int
    climbs: int
    seconds: float  # from the first post to the last fetch
    cities: int
    climbers: int
    jobs: int


def _status(reply: bytes, what: str) -> tuple[int, ...]:
    vals = struct.unpack("<iIIII", reply[:20])
    if vals[0] < 0:
        raise OfflowError(f"tsp channel: {what} refused (error {vals[0]})")
    return vals


def _fetch(ch: Channel, job: int, n: int) -> tuple[int, int, tuple[int, ...]]:
    ch.send(struct.pack("<II", OP_FETCH, job))
    raw = ch.bulk_recv(RESULT_HEADER.size + 4 * n)
    got, _, seed, length = RESULT_HEADER.unpack_from(raw)
    if got != job:
        raise OfflowError(f"tsp channel: fetched job {got}, expected {job}")
    return length, seed, struct.unpack_from(f"<{n}I", raw, RESULT_HEADER.size)


def manage(ch: Channel, climbs: int, job: int = 50, seed: int = 1) -> Result:
    """Run `climbs` climbs (seeds seed, seed+1, ...) in jobs of `job` through the
    climbers serving `ch`; the best tour (the first of equal lengths). The device numbers
    jobs from its start: this call's are base, base+1, ... (base from the info reply)."""
    if climbs < 1 or job < 1:
        raise OfflowError(f"climbs ({climbs}) and the job size ({job}) must be at least 1")
    _, n, climbers, slots, base = _status(ch.request(struct.pack("<I", OP_INFO)), "info")
    cpus = os.cpu_count() or 1
    if climbers >= cpus:  # they spin beside this manager and the program's own threads
        print(f"offlow tsp: warning: oversubscribed: {climbers} climber threads, this "
              f"manager and the program's threads on {cpus} CPUs; they take turns (spin, "
              "then yield), so expect slower and noisier times", file=sys.stderr)
    jobs = -(-climbs // job)
    best: tuple[int, int, tuple[int, ...]] | None = None
    posted = fetched = idle = 0
    t0 = time.perf_counter()
    while fetched < jobs:
        while posted < jobs and posted - fetched < slots:
            count = min(job, climbs - posted * job)
            _status(ch.request(struct.pack("<IIIQ", OP_POST, base + posted, count,
                                           seed + posted * job)), f"post of job {posted}")
            posted += 1
        if _status(ch.request(struct.pack("<II", OP_READY, base + fetched)), "ready")[0] != 1:
            idle += 1  # bounded spin, then naps: leave the CPUs to the climbers
            if idle > 50:
                time.sleep(0.0002)
            continue
        idle = 0
        got = _fetch(ch, base + fetched, n)
        if best is None or got[0] < best[0]:
            best = got
        fetched += 1
    seconds = time.perf_counter() - t0
    assert best is not None
    return Result(best[0], best[2], best[1], climbs, seconds, n, climbers, jobs)


def run(program: Program, climbs: int, job: int = 50, seed: int = 1,
        opts: tuple[str, ...] = (), timeout: float = 600.0) -> Result:
    """Start `program` (its `tsp` channel served by climbers), manage `climbs` climbs
    through it, stop it."""
    return runs(program, climbs, job, seed, opts, timeout)[0]


def runs(program: Program, climbs: int, job: int = 50, seed: int = 1,
         opts: tuple[str, ...] = (), timeout: float = 600.0, repeat: int = 1) -> list[Result]:
    """As run, every repetition's result (the same climbs each time: for timing)."""
    options = RunOptions(count=1, serve=True, opts=opts, timeout=timeout)
    with session(program, options) as s:
        ch = s.channel("tsp")
        return [manage(ch, climbs, job, seed) for _ in range(repeat)]
