"""Segmentation offload, host and device together: start a program whose device cuts
sends (examples/lso.py), post sends to it through a send port from Python, and collect
what it made.

    with session(load_program(EXAMPLE), output=Path("out.pcap")) as s:
        s.port.send(template, payload, mss=1460)      # any number of sends
    print(s.result.ok, s.port.completions())

run_capture() does the same for a capture of frames that each carry a whole send (what
`offlow lso sends` writes, or a TSO/GSO capture), which `offlow lso run` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import dpkt

from offlow.dsl import Program
from offlow.elements.lso import KIND_SLOTS
from offlow.errors import OfflowError
from offlow.lso.port import Completion, SendPort
from offlow.report import format_summary, summarize
from offlow.runner import Run, RunOptions, RunResult, build_for, oversubscription

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lso.py"


@dataclass
class Settings:
    """How the device cuts: the link's IP MTU, how payloads move (pio, dma, auto with DMA
    from `dma_min` bytes, place), the copy engine of the program's queues."""

    mtu: int = 1500
    move: str = "pio"
    dma_min: int | None = None
    copy_engine: str = "inline"
    output: Path | None = None
    timeout: float = 120.0


@dataclass
class Outcome:
    """What a session ended with."""

    result: RunResult
    summary: dict[str, Any]
    completions: list[Completion]
    posted: int = 0
    skipped: int = 0  # frames of a capture that carry no send
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.result.ok and not self.errors


class Session:
    """A started program and the send port it cuts sends from (see the module doc)."""

    def __init__(self, program: Program, s: Settings) -> None:
        if s.move not in ("pio", "dma", "auto", "place"):
            raise OfflowError(f"move `{s.move}`: expected pio, dma, auto or place")
        self.settings = s
        self.port = SendPort.create()
        try:
            opts = RunOptions(output=s.output, copy_engine=s.copy_engine, timeout=s.timeout)
            self.build = build_for(program, opts)
            extra = self.port.run_opts(self.build.graph, s.mtu, s.move, s.dma_min)
            self.opts = RunOptions(output=s.output, copy_engine=s.copy_engine,
                                   timeout=s.timeout, opts=extra)
            self.run = Run(self.build, self.opts)
        except BaseException:
            self.port.close()
            raise
        self.outcome: Outcome | None = None
        self.skipped = 0

    def __enter__(self) -> Session:
        try:
            self.run.start()
        except BaseException:
            self.port.close()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        errors = []
        try:
            if et is None:
                self.port.finish(self.settings.timeout)
        except OfflowError as e:
            errors.append(str(e))
        finally:
            if et is not None or errors:
                self.run.stop()
            res = self.run.wait()
            warning = oversubscription(self.build, self.opts)
            if warning:
                res.warnings.append(warning)
            done = self.port.completions()
            self.port.close()
        self.outcome = Outcome(res, summarize(self.build.plan, res.stats), done,
                               self.port.sent, self.skipped, errors)

    @property
    def result(self) -> Outcome:
        if self.outcome is None:
            raise OfflowError("the session has not ended (use it in a `with` block)")
        return self.outcome


def session(program: Program, output: Path | None = None, **settings: Any) -> Session:
    """A session with `program` (see Settings for the keywords)."""
    return Session(program, Settings(output=output, **settings))


def read_frames(path: Path) -> list[bytes]:
    """The frames of a capture (dpkt)."""
    try:
        with open(path, "rb") as f:
            return [bytes(buf) for _, buf in dpkt.pcap.Reader(f)]
    except (OSError, ValueError, dpkt.dpkt.NeedData) as e:
        raise OfflowError(f"--input {path}: not a capture dpkt can read: {e}") from None


def run_capture(program: Program, capture: Path, offload: bool = False,
                **settings: Any) -> Outcome:
    """Post every frame of `capture` that carries a whole send (the largest MSS the
    link's MTU allows) and return what the device made of them."""
    frames = read_frames(capture)
    with session(program, **settings) as s:
        _, s.skipped = s.port.send_frames(frames, s.settings.mtu, offload=offload)
    return s.result


def format_outcome(o: Outcome) -> str:
    """The run's report, then the host's side: sends posted, completions, refusals."""
    refused: dict[str, int] = {}
    for c in o.completions:
        if c.status:
            refused[c.reason or str(c.status)] = refused.get(c.reason or str(c.status), 0) + 1
    lines = [format_summary({**o.summary, "ok": o.result.ok, "errors": o.result.errors,
                             "warnings": o.result.warnings})]
    lines.append(f"host: {o.posted:,} sends posted ({o.skipped:,} frames carried none), "
                 f"{len(o.completions):,} completed, "
                 f"{sum(c.packets for c in o.completions):,} packets made"
                 + (", refused: " + ", ".join(f"{k} {v}" for k, v in sorted(refused.items()))
                    if refused else ""))
    return "\n".join(lines)


def kinds_of(summary: dict[str, Any], table: str = "kinds") -> dict[str, int]:
    """The Segment element's packets per protocol and message kind, by name."""
    values = summary["tables"].get(table, [])
    return {slot: int(values[i]) if i < len(values) else 0
            for i, slot in enumerate(KIND_SLOTS)}
