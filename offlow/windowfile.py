"""A run's window, machine-readable (`offlow run --window-file PATH`).

Once a run's processes are started (the moment `offlow run` prints its "offlow:
running ..." line), the run writes PATH: a JSON object naming its window (what
`offlow stats`, `offlow ctl` and `offlow.session.attach` take), offlow's pid, the
program's name and the devices whose processes run, one per process. It is written
to PATH.tmp and renamed, so a reader never sees half of it; it is left in place when
the run ends (its window is gone then). A tool starts the run, then `wait_for` reads
the file: the pid tells this run's file from one an earlier run left there.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from offlow.argtypes import unwritable
from offlow.errors import OfflowError

POLL = 0.02  # seconds between looks for the file


@dataclass(frozen=True)
class RunWindow:
    """What a run's window file says."""

    window: Path  # the run's window (/dev/shm/offlow-PROGRAM-PID-TAG)
    pid: int  # the `offlow run` process (or the process that ran Run.start)
    program: str  # the program's name (Program(NAME))
    devices: tuple[str, ...]  # the devices whose processes run, in the plan's order

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps({"window": str(self.window), "pid": self.pid,
                           "program": self.program, "devices": list(self.devices)},
                          indent=2) + "\n"

    @staticmethod
    def parse(text: str) -> RunWindow:
        """A window file's text read back; a clear error when it is not one."""
        try:
            data = json.loads(text)
        except ValueError as e:
            raise OfflowError(f"not a window file (not JSON: {e})") from e
        if not isinstance(data, dict):
            raise OfflowError("not a window file (not a JSON object)")
        window, pid, program, devices = (data.get(k) for k in
                                         ("window", "pid", "program", "devices"))
        if not (isinstance(window, str) and isinstance(pid, int) and isinstance(program, str)
                and isinstance(devices, list) and all(isinstance(d, str) for d in devices)):
            raise OfflowError("not a window file (window, pid, program and devices expected)")
        return RunWindow(Path(window), pid, program, tuple(devices))


def check_target(path: Path) -> None:
    """That `path` can be written as a window file: not a folder, in a folder that
    exists and takes files (checked before any process starts)."""
    why = unwritable(path)
    if why:
        raise OfflowError(f"--window-file {path}: {why}")


def write(path: Path, info: RunWindow) -> None:
    """Write `info` to `path` at once: to PATH.tmp, then renamed over PATH. A failure
    is a clear error and leaves no PATH.tmp."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(info.to_json())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OfflowError(f"--window-file {path}: cannot write it: {e.strerror or e}") from e


class Process(Protocol):
    """The started `offlow run` (a subprocess.Popen)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...


def _read(path: Path) -> RunWindow | None:
    """The file at `path`, or None when there is none (yet) or it is not one."""
    try:
        return RunWindow.parse(path.read_text())
    except (OSError, UnicodeDecodeError, OfflowError):
        return None


def wait_for(path: Path, run: Process, within: float) -> RunWindow:
    """The window file `run` (an `offlow run ... --window-file PATH` just started,
    offlow itself, not a wrapper that forks it) writes at `path`, waited for while
    `run` lives, at most `within` seconds. A file another process wrote (an earlier
    run's) is not it. A clear error when `run` ends without writing it or the time
    is up."""
    deadline = time.monotonic() + within
    while True:
        got = _read(path)
        if got is not None and got.pid == run.pid:
            return got
        if run.poll() is not None:
            got = _read(path)  # (written just before it ended)
            if got is not None and got.pid == run.pid:
                return got
            raise OfflowError(f"offlow run (pid {run.pid}) ended without writing its "
                              f"window file {path}")
        if time.monotonic() > deadline:
            other = f" (it names pid {got.pid})" if got is not None else ""
            raise OfflowError(f"offlow run (pid {run.pid}) did not write its window file "
                              f"{path} within {within:g} s{other}")
        time.sleep(POLL)
