"""The counters of a running program, read while it runs.

A reader raises the window header's `stats_req` word; every device process of the run
answers by writing the live copy of its stats file (DEVICE.json.live in the run
folder, the same JSON as the stats file it writes at exit, with `live_seq`, the request
answered), without pausing its cores (runtime/core/include/offlow/live.h).  A process
about to exit writes a last copy marked `live_final`, which answers every later
request.  `offlow stats`, the metrics server of `offlow run --metrics` and the progress
lines of long runs read the counters this way.
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


def _fresh(stats: dict[str, Any], req: int) -> bool:
    """`stats` answers request `req` or a later one (the 32-bit count wraps), or is
    a process's last word."""
    if stats.get("live_final"):
        return True
    return (int(stats.get("live_seq", 0)) - req) % (1 << 32) < 1 << 31


def header() -> WindowHeader:
    """The window header's layout (from the C library, built on first use: get it once,
    before a run starts, not at each read)."""
    return WindowHeader.of(_Lib(_library()))


def _ask(window: Path, hdr: WindowHeader) -> int:
    """Raise the window's request word; returns the request to wait for."""
    try:
        with open(window, "r+b") as f, mmap.mmap(f.fileno(), hdr.size) as m:
            if hdr.get(m, "magic") != hdr.magic or hdr.get(m, "version") != hdr.version:
                raise OfflowError(f"{window}: not an offlow window (or another version's)")
            req = (hdr.get(m, "stats_req") + 1) % (1 << 32) or 1
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


def _answers(window: Path, folder: Path, req: int, deadline: float,
             timeout: float) -> dict[str, dict[str, Any]]:
    """Wait until every process has answered request `req` (device -> its stats)."""
    while True:
        paths = sorted(folder.glob(f"*{LIVE_SUFFIX}"))
        answers = {p.name[:-len(LIVE_SUFFIX)]: _read(p) for p in paths}
        if paths and all(a is not None and _fresh(a, req) for a in answers.values()):
            return {d: a for d, a in answers.items() if a is not None}
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


def read(window: str | Path, timeout: float = 1.0,
         hdr: WindowHeader | None = None) -> dict[str, dict[str, Any]]:
    """Ask the processes of the run whose window is `window` for their counters and
    return each device's answer (device -> the stats JSON of that process). A clear
    error when the run has ended, or when a process does not answer within `timeout`
    seconds. `hdr`: the header's layout (header()), when the caller has it.

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
    req = _ask(window, hdr)
    folder = run_folder_of(window)
    if folder is None:
        raise OfflowError(f"{window}: its run folder is gone: the run has ended")
    deadline = time.monotonic() + timeout
    first = _answers(window, folder, req, deadline, timeout)
    later = _answers(window, folder, _ask(window, hdr), deadline, timeout)
    return {d: _with_later_sources(a, later.get(d)) for d, a in first.items()}
