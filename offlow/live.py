"""The counters of a running program, read while it runs.

A reader raises the window header's `stats_req` word; every device process of the run
answers by writing the live copy of its stats file (DEVICE.json.live in the run
folder, the same JSON as the stats file it writes at exit, with `live_seq`, the request
answered), without pausing its cores (runtime/core/include/offlow/live.h).  A process
about to exit writes a last copy marked `live_final`, which answers every later
request.  `offlow stats`, the metrics server of `offlow run --metrics` and the progress
lines of long runs read the counters this way.

A request is a number raised by 2; its bit 0 (TABLES, live.h's OFL_LIVE_TABLES) asks
for the shared arrays' elements and hash maps' pairs too.  Without it an array is
written as its length only, {"kind": "array", "length": N}, and a map as its counters
without "pairs" (items, entries, full): a 4M-entry histogram costs a reader of counters
nothing.  The xdp process answers the same way.  A reader that asks for the elements
takes only an answer that has them (its request's or a later one that asked too, or a
last copy): one written for a later request without the bit is not enough, and it asks
again.
"""

from __future__ import annotations

import json
import mmap
import time
from pathlib import Path
from typing import Any

from offlow.channels import WindowHeader, _Lib, _library
from offlow.errors import OfflowError
from offlow.lifecycle import run_folder_of

LIVE_SUFFIX = ".json.live"  # a process's live copy: DEVICE.json.live
POLL = 0.005  # seconds between looks at the answers
TABLES = 1  # a request's bit 0: the arrays' elements too (live.h: OFL_LIVE_TABLES)


def _fresh(stats: dict[str, Any], req: int) -> bool:
    """`stats` answers request `req` or a later one (the count, above bit 0, wraps at
    32 bits), with the arrays' elements when `req` asked for them, or is a process's
    last word."""
    if stats.get("live_final"):
        return True
    seq = int(stats.get("live_seq", 0))
    if req & TABLES and not seq & TABLES:
        return False
    return ((seq >> 1) - (req >> 1)) % (1 << 31) < 1 << 30


def header() -> WindowHeader:
    """The window header's layout (from the C library, built on first use: get it once,
    before a run starts, not at each read)."""
    return WindowHeader.of(_Lib(_library()))


def _ask(window: Path, hdr: WindowHeader, tables: bool = False) -> int:
    """Raise the window's request word by 2 (never to 0: a process's first answer),
    with bit 0 set when `tables`; returns the request to wait for."""
    try:
        with open(window, "r+b") as f, mmap.mmap(f.fileno(), hdr.size) as m:
            if hdr.get(m, "magic") != hdr.magic or hdr.get(m, "version") != hdr.version:
                raise OfflowError(f"{window}: not an offlow window (or another version's)")
            req = ((hdr.get(m, "stats_req") & ~TABLES) + 2) % (1 << 32) or 2
            req |= TABLES if tables else 0
            hdr.put(m, "stats_req", req)
            return req
    except FileNotFoundError as e:
        raise OfflowError(f"{window}: no such window: the run has ended, or never "
                          "started") from e
    except (OSError, ValueError) as e:  # a file too short to map is not a window
        raise OfflowError(f"{window}: cannot open it as an offlow window: {e}") from e


def _read(path: Path) -> dict[str, Any] | None:
    """One live copy, or None when it is gone (the run ended) or not JSON."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _answers(window: Path, hdr: WindowHeader, folder: Path, req: int, deadline: float,
             timeout: float) -> dict[str, dict[str, Any]]:
    """Wait until every process has answered request `req` (device -> its stats). A
    request for the elements that a later one without them overtook (answered
    without elements) is asked again."""
    while True:
        paths = sorted(folder.glob(f"*{LIVE_SUFFIX}"))
        answers = {p.name[:-len(LIVE_SUFFIX)]: _read(p) for p in paths}
        if paths and all(a is not None and _fresh(a, req) for a in answers.values()):
            return {d: a for d, a in answers.items() if a is not None}
        if req & TABLES and any(a is not None and _fresh(a, req & ~TABLES)
                                and not _fresh(a, req) for a in answers.values()):
            req = _ask(window, hdr, tables=True)
        if time.monotonic() > deadline:
            if not folder.is_dir():
                raise OfflowError(f"{window}: the run ended while its counters were read")
            late = sorted(d for d, a in answers.items() if a is None or not _fresh(a, req))
            raise OfflowError(f"{window}: no answer within {timeout:g} s from "
                              f"{', '.join(late) or 'any process (none has started)'}")
        time.sleep(POLL)


def _with_later_sources(first: dict[str, Any], later: dict[str, Any] | None) -> dict[str, Any]:
    """`first` (one process's answer) with each core's sources as `later` counted them."""
    if later is None:
        return first
    sources = {(c.get("segment"), c.get("core")): c.get("sources", {})
               for c in later.get("cores", [])}
    cores = [{**c, "sources": sources.get((c.get("segment"), c.get("core")),
                                          c.get("sources", {}))}
             for c in first.get("cores", [])]
    return {**first, "cores": cores}


def read(window: str | Path, timeout: float = 1.0, hdr: WindowHeader | None = None,
         tables: bool = False) -> dict[str, dict[str, Any]]:
    """Ask the processes of the run whose window is `window` for their counters and
    return each device's answer (device -> the stats JSON of that process). A clear
    error when the run has ended, or when a process does not answer within `timeout`
    seconds. `hdr`: the header's layout (header()), when the caller has it. `tables`:
    with every element of each shared array (as the stats file at exit has them);
    without, an array is {"kind": "array", "length": N} (a table object's counters
    are there either way).

    The counts add up: no packet is counted forwarded, dropped or consumed without
    having been counted read. Each process answers on its own, while its cores run,
    so one answer alone does not promise that (a process answering after the one
    that reads the packets counts what they read since). So the processes are asked
    twice: everything comes from the first answers but the sources' counts, which
    come from the second, asked once every first answer was written (a packet counted
    anywhere in those had been read by then). Processes that first answered in the
    second round are left out (as those that have not answered yet)."""
    window = Path(window)
    hdr = hdr or header()
    req = _ask(window, hdr, tables)
    folder = run_folder_of(window)
    if folder is None:
        raise OfflowError(f"{window}: its run folder is gone: the run has ended")
    deadline = time.monotonic() + timeout
    first = _answers(window, hdr, folder, req, deadline, timeout)
    later = _answers(window, hdr, folder, _ask(window, hdr), deadline, timeout)
    return {d: _with_later_sources(a, later.get(d)) for d, a in first.items()}
