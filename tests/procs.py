"""`offlow run` in a process group of its own, and what its run leaves behind.

Other runs (other people's tests, CI) share this machine, so a run is known only by
what is its own: the process group its runner leads (start_new_session), the window
named with the runner's pid, and a private temp folder (TMPDIR) for its run folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from offlow.lifecycle import SHM


def _live_pids(field: int, value: int) -> list[int]:
    """Processes whose /proc/PID/stat field `field` (after the name: 1 the parent, 2 the
    process group) is `value` and that have not exited (zombies are left out: they
    have)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] not in ("Z", "X") and int(fields[field]) == value:
            pids.append(int(entry.name))
    return pids


def group_pids(pgid: int) -> list[int]:
    """Processes of process group `pgid` that have not exited."""
    return _live_pids(2, pgid)


def child_pids(ppid: int) -> list[int]:
    """Processes whose parent is `ppid` and that have not exited."""
    return _live_pids(1, ppid)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time process `pid` has used so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class CliRun:
    """`offlow run ARGS` started by start_cli."""

    proc: subprocess.Popen[bytes]
    tmp: Path  # its TMPDIR: where its run folder goes
    out: Path  # its stdout and stderr, as files
    err: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 240) -> bool:
        """Whether `text` appears in its stderr within `timeout` s (False once it ended
        without it); a cold cache compiles the runtime first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.stderr():
                return True
            if self.proc.poll() is not None:
                return text in self.stderr()
            time.sleep(0.02)
        return False

    def children(self) -> list[int]:
        """The run's processes other than the runner."""
        return [p for p in group_pids(self.pid) if p != self.pid]

    def wait_gone(self, timeout: float = 30) -> list[int]:
        """Wait until the runner has exited and no process of its group is left;
        returns those still there at the timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None and not group_pids(self.pid):
                return []
            time.sleep(0.02)
        self.proc.poll()
        return group_pids(self.pid)

    def leftovers(self) -> list[str]:
        """Its window (named with the runner's pid) and anything in its TMPDIR."""
        found = [str(p) for p in SHM.glob(f"offlow-*-{self.pid}-*")]
        return found + [str(p) for p in self.tmp.iterdir()]

    def kill_all(self) -> None:
        """Clean up after a failed test: SIGKILL the whole group."""
        for pid in group_pids(self.pid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        self.proc.wait()


def start_cli(args: list[str], folder: Path, shell_prefix: str = "") -> CliRun:
    """`python -m offlow.cli run ARGS` leading a process group of its own, with TMPDIR
    `folder`/tmp and its output in `folder`/out.txt and err.txt. `shell_prefix`: sh
    commands run before it is exec'ed (e.g. trap '' INT: start it with SIGINT
    ignored)."""
    tmp = folder / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    out, err = folder / "out.txt", folder / "err.txt"
    cmd = [sys.executable, "-m", "offlow.cli", "run", *map(str, args)]
    if shell_prefix:
        cmd = ["sh", "-c", f'{shell_prefix}; exec "$@"', "sh", *cmd]
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(cmd, stdout=o, stderr=e, start_new_session=True,
                                env={**os.environ, "TMPDIR": str(tmp)})
    return CliRun(proc, tmp, out, err)
