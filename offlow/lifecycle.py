"""What a run leaves on the machine, and the signals that end it.

A run owns a window in /dev/shm (offlow-NAME-PID-HEX) and a run folder in the temp
directory (offlow-run-PID-...), PID being the runner's.  The runner removes both when
it ends; when it is killed (SIGKILL, the OOM killer), its processes notice through
their liveness pipe and remove them (runtime/core/include/offlow/lifeline.h); what a
runner killed before any process started leaves, the next run removes (sweep_stale).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

SHM = Path("/dev/shm")
RUN_FOLDER_PREFIX = "offlow-run-"
# a window (the runner's pid, the run's token), and the description of its program
# beside it (offlow/reload.py)
_WINDOW = re.compile(r"^offlow-.+-(\d+)-([0-9a-f]{8})(\.reload\.json)?$")
_FOLDER = re.compile(rf"^{RUN_FOLDER_PREFIX}(\d+)-")


class Terminated(KeyboardInterrupt):
    """SIGTERM in a stop_signals block: a request to stop, taken as Ctrl-C is."""


class Stops:
    """What a stop_signals block was sent: `taken`, the first SIGINT or SIGTERM that
    arrived in it (None: none). It tells a stop from a failure when an import turned the
    KeyboardInterrupt into an ImportError (numpy's C extension does)."""

    def __init__(self) -> None:
        self.taken: int | None = None

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        self.taken = self.taken or signum
        raise KeyboardInterrupt()

    def _terminate(self, signum: int, frame: FrameType | None) -> None:
        self.taken = self.taken or signum
        raise Terminated()


@contextmanager
def stop_signals() -> Iterator[Stops]:
    """In this block SIGINT raises KeyboardInterrupt and SIGTERM raises Terminated (a
    KeyboardInterrupt), so a run being watched stops cleanly on either (Run.wait),
    even in a process started with SIGINT ignored (a shell script's background job
    is, and Python then installs no handler of its own); the block's Stops records which
    came. The handlers before it come back after it. Outside the main thread it does
    nothing (Python runs signal handlers in the main thread only)."""
    stops = Stops()
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, stops._interrupt)
    signal.signal(signal.SIGTERM, stops._terminate)
    try:
        yield stops
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait (blocked) until the end of the block, then take effect:
    for imports of C extensions, which turn a KeyboardInterrupt raised in them into
    an ImportError (numpy does)."""
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie has)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's: alive
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] not in ("Z", "X")


def run_folder(token: str) -> Path:
    """A new run folder for this process's run, named with its pid and the run's
    `token` (the last part of its window's name: offlow.live finds one from the other)."""
    return Path(tempfile.mkdtemp(prefix=f"{RUN_FOLDER_PREFIX}{os.getpid()}-{token}-"))


def run_folder_of(window: Path) -> Path | None:
    """The run folder of the run whose window is `window` (offlow-NAME-PID-TOKEN) in
    the temp directory, or None when there is none (the run has ended, or the name is
    not a window's)."""
    m = _WINDOW.match(window.name)
    if not m:
        return None
    name = f"{RUN_FOLDER_PREFIX}{m.group(1)}-{m.group(2)}-*"
    found = sorted(Path(tempfile.gettempdir()).glob(name))
    return found[0] if found else None


def _stale(path: Path, pattern: re.Pattern[str]) -> bool:
    """`path` is named by `pattern` with the pid of a runner that is gone, and is ours."""
    m = pattern.match(path.name)
    if not m:
        return False
    try:
        mine = path.lstat().st_uid == os.getuid()
    except OSError:
        return False
    return mine and not pid_alive(int(m.group(1)))


def sweep_stale(shm: Path = SHM, tmp: Path | None = None) -> list[Path]:
    """Remove this user's windows in `shm` and run folders in `tmp` (default: the temp
    directory) whose runner is gone: what a runner killed before its processes
    started could not hand over. Returns what it removed."""
    removed = []
    for folder, pattern in ((shm, _WINDOW), (tmp or Path(tempfile.gettempdir()), _FOLDER)):
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for path in entries:
            if not _stale(path, pattern):
                continue
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except OSError:
                continue
            removed.append(path)
    return removed
