"""A host program's session with a running offlow program: start it, talk to its
devices over channels by name, stop it.

    with offlow.session(program, RunOptions(input=...)) as s:
        s.wait_drained()                       # every packet processed (drained(): now?)
        answer = s.channel("pcsa").request(b"summary")
    print(s.result.ok)

The processes run with --serve: after their packets they keep serving channels
until the session ends (or one of them fails). Leaving the block ends a run whose
sources would not end by themselves (a UDP or TCP port, a packet port, an interface)
as Ctrl-C does: the sources stop, the queues drain, the counts are written; a capture,
a count or a duration is taken to its end first. Inside the block, `s.stats()` reads
the run's counters now and `s.stop()` ends it early, as Ctrl-C does.

A program started elsewhere (`offlow run PROGRAM --serve`, which prints its window,
or another session's `s.window`) is attached to instead; leaving the block closes
this process's channel ends and leaves the program running:

    with offlow.session.attach("/dev/shm/offlow-...") as a:
        answer = a.channel("pcsa").request(b"summary")
        a.tables["routes4"].add("10.0.0.0/8", 5)      # offlow/control.py"""

from __future__ import annotations

import signal
import time
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from offlow.channels import Channel, Region, open_running
from offlow.control import Tables, region_tables
from offlow.errors import OfflowError
from offlow.ir.graph import CTL_CHANNEL_PREFIX, RELOAD_CHANNEL_PREFIX, TABLE_CHANNEL_PREFIX

if TYPE_CHECKING:
    from offlow.build import Build
    from offlow.dsl import Program
    from offlow.runner import RunOptions, RunResult


class Session:
    """A started program and its channel region (see the module docstring)."""

    def __init__(self, b: Build, o: RunOptions) -> None:
        from offlow.runner import Run

        if not b.plan.program_channels:
            raise OfflowError(f"program `{b.graph.name}` has no channels and no tables; a "
                              "session talks to a program through Program.channel(...) and "
                              "its tables")
        self.build = b
        self.run = Run(b, replace(o, serve=True))
        self.region: Region | None = None
        self.result: RunResult | None = None
        self._stopping = False  # stop() was called
        self._warnings: list[str] = []  # what the run was warned of as it started

    def __enter__(self) -> Session:
        from offlow.runner import warn

        self._warnings = warn(self.build, self.run.opts)
        self.run.start()
        try:
            self.region = Region(self.run.window)
        except BaseException:
            self._stop()
            raise
        return self

    @property
    def window(self) -> Path:
        """The program's window file: other host programs attach to it (attach)."""
        return self.run.window

    def channel(self, name: str) -> Channel:
        """The host end of channel `name` (opened once)."""
        if self.region is None:
            raise OfflowError("the session is not running (use it in a `with` block)")
        return _open(self.region, name, f"program `{self.build.graph.name}`",
                     [c.name for c in self.build.graph.channels])

    @property
    def tables(self) -> Tables:
        """The program's tables by name, to read and change while it runs
        (offlow/control.py)."""
        return region_tables(self._region)

    def _region(self) -> Region:
        if self.region is None:
            raise OfflowError("the session is not running (use it in a `with` block)")
        return self.region

    def drained(self) -> bool:
        """Whether every process has processed all its packets now (sources done,
        queues empty: what wait_drained waits for), without waiting; an error once the
        program stopped before draining. A run whose sources never end by themselves
        (a UDP or TCP port, a packet port, an interface) is never drained."""
        region = self._region()
        if region.word("drained") >= len(self.run.procs):
            return True
        failed = [d for d, p in self.run.procs.items() if p.poll() is not None]
        if failed or region.word("abort"):
            raise OfflowError(f"the program stopped before draining ({', '.join(failed)} "
                              "exited); see its errors")
        return False

    def wait_drained(self, timeout: float = 60.0) -> None:
        """Wait until every process has processed all its packets (sources done,
        queues empty), so the device state reflects the whole input."""
        deadline = time.monotonic() + timeout
        while not self.drained():
            if time.monotonic() > deadline:
                raise OfflowError(f"the program did not drain within {timeout:g} s")
            time.sleep(0.001)

    def stats(self, tables: bool = True) -> tuple[dict[str, Any], bool]:
        """The run's counters now: (device -> that process's stats, as its stats file
        holds them, read while it runs: offlow.live; whether any process is still
        running). False once they have all ended (after stop(), say) or when they do
        not answer within a second: the counts are then the last read. Packets read,
        forwarded and dropped: offlow.runner.progress_totals(stats). `tables=False`:
        each shared array as its length only, {"kind": "array", "length": N}, not its
        every element (a loop that watches the packet counts of a program with a
        large array need not have the processes write it all at each look)."""
        if self.result is not None:
            raise OfflowError("the session has ended: its counts are in `result.stats`")
        self._region()
        return self.run.live_stats(tables=tables)

    def stop(self) -> None:
        """End the run now, as Ctrl-C does: the sources stop, the queues drain, the
        counts are written; leaving the `with` block then collects the result (which
        counts what was processed until then, marked `interrupted`, `stopped_by`
        "stop()"). Calling it again does nothing more."""
        if self.result is not None:
            raise OfflowError("the session has ended: stop() is for a running session, "
                              "inside its `with` block")
        self._region()
        if not self._stopping:
            self._stopping = True
            self.run.stop(signal.SIGINT)

    def _stop(self) -> RunResult:
        if self.region is not None:
            self.region.set_word("stop", 1)
            self.region.close()
            self.region = None
            if _endless(self.run.opts):  # its sources end as on Ctrl-C: queues drain
                self.run.stop()
        else:  # the window could not be mapped: stop the processes by hand
            for p in self.run.procs.values():
                if p.poll() is None:
                    p.terminate()
        res = self.run.wait()
        if self._stopping and not res.interrupted:  # stop() ended it, as Ctrl-C would
            res = replace(res, interrupted=True, stopped_by="stop()")
        res.warnings += self._warnings
        self.result = res
        return res

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        res = self._stop()
        if exc is None and not res.ok:
            raise OfflowError("the program failed: " + "; ".join(res.errors))


def _endless(o: RunOptions) -> bool:
    """Whether the run's sources would not end by themselves: they serve a UDP or TCP
    port, a packet port or an interface (a capture, a count or a duration ends)."""
    return o.udp_port is not None or o.tcp_port is not None or bool(o.ports) or bool(o.iface)


def _open(region: Region, name: str, what: str, names: list[str]) -> Channel:
    """The host end of channel `name` of `region`, or an error naming the channels a
    host program may open (`names`)."""
    if name not in names:
        has = (f"channels: {', '.join(names)}" if names else "it has none (a program "
               "declares one with `p.channel(NAME, handler)`)")
        raise OfflowError(f"{what} has no channel `{name}`; {has}")
    return region.channel(name)


class Attached:
    """The host ends of a running program's channels, found by its window file (see
    the module docstring). Closing it closes only this process's ends."""

    def __init__(self, window: str | Path) -> None:
        self.window = Path(window)
        self.region: Region | None = open_running(self.window)

    def _mapped(self) -> Region:
        if self.region is None:
            raise OfflowError(f"{self.window}: closed")
        return self.region

    def names(self) -> list[str]:
        """The program's channels a host program may open."""
        return [n for n in self._mapped().names()
                if not n.startswith((TABLE_CHANNEL_PREFIX, CTL_CHANNEL_PREFIX,
                                     RELOAD_CHANNEL_PREFIX))]

    @property
    def tables(self) -> Tables:
        """The program's tables by name, to read and change while it runs
        (offlow/control.py)."""
        return region_tables(self._mapped)

    def channel(self, name: str) -> Channel:
        """The host end of channel `name` (opened once; another host program that has
        it open makes this fail with EBUSY)."""
        return _open(self._mapped(), name, f"the program at {self.window}", self.names())

    def close(self) -> None:
        if self.region is not None:
            self.region.close()
            self.region = None

    def __enter__(self) -> Attached:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def attach(window: str | Path) -> Attached:
    """Attach to the running program whose window is `window` (offlow run --serve prints
    it; a Session has it as `window`), to talk to its devices over channels by name."""
    return Attached(window)


def session(program: Program | Build, options: RunOptions | None = None) -> Session:
    """Start `program` (built first, for `options`, when it is a Program) for a host
    program."""
    from offlow.build import Build
    from offlow.runner import RunOptions, build_for

    o = options or RunOptions()
    b = program if isinstance(program, Build) else build_for(program, o)
    return Session(b, o)
