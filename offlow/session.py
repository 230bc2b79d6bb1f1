"""A host program's session with a running offlow program: start it, talk to its
devices over channels by name, stop it.

    with offlow.session(program, RunOptions(input=...)) as s:
        s.wait_drained()                       # every packet processed
        answer = s.channel("pcsa").request(b"summary")
    print(s.result.ok)

The processes run with --serve: after their packets they keep serving channels
until the session ends (or one of them fails)."""

from __future__ import annotations

import time
from dataclasses import replace
from types import TracebackType

from offlow.build import Build, build
from offlow.channels import Channel, Region
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.runner import Run, RunOptions, RunResult


class Session:
    """A started program and its channel region (see the module docstring)."""

    def __init__(self, b: Build, o: RunOptions) -> None:
        if not b.graph.channels:
            raise OfflowError(f"program `{b.graph.name}` has no channels; a session talks to "
                              "a program through Program.channel(...)")
        self.build = b
        self.run = Run(b, replace(o, serve=True))
        self.region: Region | None = None
        self.result: RunResult | None = None

    def __enter__(self) -> Session:
        self.run.start()
        try:
            self.region = Region(self.run.window)
        except BaseException:
            self._stop()
            raise
        return self

    def channel(self, name: str) -> Channel:
        """The host end of channel `name` (opened once)."""
        if self.region is None:
            raise OfflowError("the session is not running (use it in a `with` block)")
        if name not in {c.name for c in self.build.graph.channels}:
            names = ", ".join(c.name for c in self.build.graph.channels)
            raise OfflowError(f"program `{self.build.graph.name}` has no channel `{name}`; "
                              f"channels: {names}")
        return self.region.channel(name)

    def wait_drained(self, timeout: float = 60.0) -> None:
        """Wait until every process has processed all its packets (sources done,
        queues empty), so the device state reflects the whole input."""
        if self.region is None:
            raise OfflowError("the session is not running (use it in a `with` block)")
        deadline = time.monotonic() + timeout
        want = len(self.run.procs)
        while self.region.word(Region.HDR_DRAINED) < want:
            failed = [d for d, p in self.run.procs.items() if p.poll() is not None]
            if failed or self.region.word(Region.HDR_ABORT):
                raise OfflowError(f"the program stopped before draining ({', '.join(failed)} "
                                  "exited); see its errors")
            if time.monotonic() > deadline:
                raise OfflowError(f"the program did not drain within {timeout:g} s")
            time.sleep(0.001)

    def _stop(self) -> RunResult:
        if self.region is not None:
            self.region.set_word(Region.HDR_STOP, 1)
            self.region.close()
            self.region = None
        else:  # the window could not be mapped: stop the processes by hand
            for p in self.run.procs.values():
                if p.poll() is None:
                    p.terminate()
        self.result = self.run.wait()
        return self.result

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        res = self._stop()
        if exc is None and not res.ok:
            raise OfflowError("the program failed: " + "; ".join(res.errors))


def session(program: Program | Build, options: RunOptions | None = None) -> Session:
    """Start `program` (built first when it is a Program) for a host program."""
    b = program if isinstance(program, Build) else build(program)
    return Session(b, options or RunOptions())
