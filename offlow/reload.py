"""Hot reload: replace the code of a running program's segments with a new build of a
compatible program, keeping its tables and every packet (docs/reload.md).

    offlow reload WINDOW PROGRAM.py          # or offlow.reload.reload(WINDOW, program)

A run that takes reloads (--serve, or a --duration) writes the description of its
build beside its window (WINDOW.reload.json): its layout (offlow.layout) and a digest
of each process's generated code. A reload builds the new program for the running
one's mtu, refuses it with what differs when its layout is not the same, and sends
each process whose code changed the path of a shared object of its new loops over its
channel reload.DEVICE; the process swaps its loops' turn functions between batches
(runtime/core/include/offlow/reload.h)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offlow import targets
from offlow.build import Build, build, reload_object
from offlow.cbuild import digest
from offlow.channels import ChannelError, Region, open_running
from offlow.codegen.c import layout_hash
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.ir.graph import RELOAD_CHANNEL_PREFIX
from offlow.layout import describe, differences
from offlow.programwarn import program_warnings

PATH_MAX = 55  # a reload message: "l" and the path, in one 56-byte direct message
REPLY_TIMEOUT = 10.0  # seconds: the process waits up to 2 s for its cores (reload.h)


def description_path(window: Path) -> Path:
    """Where a run that takes reloads describes its build: beside its window."""
    return window.with_name(window.name + ".reload.json")


def _describe(b: Build) -> dict[str, Any]:
    return {"program": b.graph.name, "mtu": b.graph.mtu, "layout": describe(b.plan),
            "hash": layout_hash(b.plan),
            "code": {d.name: digest(b.sources[f"{d.name}.c"].encode())
                     for d in b.plan.devices if f"{d.name}.c" in b.sources},
            "reloadable": [c[len(RELOAD_CHANNEL_PREFIX):] for c in b.plan.window_channels
                           if c.startswith(RELOAD_CHANNEL_PREFIX)],
            "no_reload": {d.name: targets.get(d.target).no_reload for d in b.plan.devices
                          if targets.get(d.target).no_reload}}


def write_description(b: Build, window: Path) -> None:
    """Describe build `b` beside `window` (the runner, before its processes start)."""
    path = description_path(window)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_describe(b), indent=1))
    tmp.replace(path)


@dataclass(frozen=True)
class Reloaded:
    """What a reload did: the processes given new code, those whose code was the same."""

    program: str
    reloaded: tuple[str, ...]
    unchanged: tuple[str, ...]


def reload(window: str | Path, program: Program,
           warn: Callable[[str], None] | None = None) -> Reloaded:
    """Replace the code of the segments of the program running at `window` whose code
    differs in `program`; a clear error, with the program untouched, when there is no
    running program there, `program` does not compile, or its layout differs. What the
    new program is warned of (as `offlow run` warns: offlow.programwarn)
    goes to `warn`, once it is known to fit and before any process takes its code."""
    window = Path(window)
    region = open_running(window)
    lock = -1
    try:
        lock = _lock(window)
        old = _read_description(window)
        b = build(program, fit=(old["mtu"], "the running program's"))
        new = _describe(b)
        changed = _check(window, old, new)
        objects = {d: reload_object(b, d) for d in changed}
        if warn is not None and changed:
            for w in program_warnings(b):
                warn(w)
        for d in changed:
            _send(region, d, objects[d])
            old["code"][d] = new["code"][d]
            _rewrite(window, old)
    finally:
        if lock >= 0:
            os.close(lock)
        region.close()
    return Reloaded(b.graph.name, tuple(changed),
                    tuple(d for d in new["code"] if d not in changed))


def _lock(window: Path) -> int:
    """One reload of a window at a time, from reading its description to rewriting it
    (an exclusive flock on the window file, released when the fd is closed): two at
    once each compared with the same description, and the second to write it put back
    the digest of code the first had replaced, so a later reload skipped a process
    running other code than it meant. The other waits for the first to be done."""
    try:
        fd = os.open(window, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise OfflowError(f"{window}: cannot open it: {e.strerror}") from None
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _read_description(window: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(description_path(window).read_text()))
    except FileNotFoundError:
        raise OfflowError(f"{window}: this run takes no reloads (start it with --serve or "
                          "--duration)") from None


def _rewrite(window: Path, desc: dict[str, Any]) -> None:
    """The description after a process took new code (the next reload compares with it)."""
    path = description_path(window)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(desc, indent=1))
    tmp.replace(path)


def _check(window: Path, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The processes whose code changed, or an error saying why the new build cannot
    replace the running one's code."""
    what = f"{window} runs `{old['program']}`"
    diffs = differences(old["layout"], new["layout"])
    if diffs:
        raise OfflowError(f"{what}; the new program's layout differs, so it cannot replace "
                          "its code (tables, queues, segments and elements must be the "
                          "same):\n  " + "\n  ".join(diffs))
    if old["hash"] != new["hash"]:
        raise OfflowError(f"{what}; the new program's shared layout (state record, ring "
                          "entries, window tables) differs")
    changed = [d for d, code in new["code"].items() if old["code"].get(d) != code]
    fixed = [d for d in changed if d not in old["reloadable"]]
    why = old.get("no_reload", {})
    for d in fixed:
        if d in why:
            raise OfflowError(f"{what}; the code of {d} changed, and {d} takes no reloads: "
                              f"{why[d]}")
    if fixed:
        raise OfflowError(f"{what}; the code of {', '.join(fixed)} changed, and its target "
                          "takes no reloads")
    grouped = [name for name, seg in new["layout"]["segments"].items()
               if "(core group)" in seg and seg.split(" ")[0] in changed]
    if grouped:
        raise OfflowError(f"{what}; segments with core groups ({', '.join(grouped)}) take "
                          "no reloads yet (their workers run the old code)")
    return changed


def _send(region: Region, device: str, so: Path) -> None:
    """Have `device`'s process load `so` (a copy at a short, unique path: a message holds
    at most PATH_MAX bytes, and dlopen would return an earlier load of the same path)."""
    fd, name = tempfile.mkstemp(prefix="offlow-rl-", suffix=".so", dir="/tmp")
    os.close(fd)
    path = Path(name)
    try:
        shutil.copyfile(so, path)
        msg = b"l" + str(path).encode()
        assert len(str(path)) <= PATH_MAX, path
        try:
            chan = region.channel(RELOAD_CHANNEL_PREFIX + device)
        except ChannelError as e:
            if e.errno != errno.EPIPE:
                raise
            raise OfflowError(f"the {device} process has ended (its packets are done); "
                              "its code was not replaced") from None
        reply = chan.request(msg, REPLY_TIMEOUT)
    finally:
        path.unlink(missing_ok=True)
    (status,) = struct.unpack_from("<i", reply)
    if status < 0:
        raise OfflowError(f"the {device} process refused the new code: "
                          f"{reply[4:].decode(errors='replace')}")
