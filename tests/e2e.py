"""Helpers for end-to-end tests: build and run example programs, read pcaps back."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dpkt

from offlow import Element, Program, Sink, Source, windowfile
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.paths import DATA
from offlow.report import summarize
from offlow.runner import Run, RunOptions, RunResult, build_for, run

ROOT = Path(__file__).resolve().parents[1]
TLS = DATA / "tls_ciphers.pcap"
QUIC = DATA / "quic.pcap"
EXAMPLE = ROOT / "examples" / "ttl_pipeline.py"


def run_example(settings: Sequence[str] = (), program: Path = EXAMPLE,
                **opts: Any) -> dict[str, Any]:
    """Build and run a program file (the TTL pipeline by default); return the summary
    (with `ok` and `errors`)."""
    prog = load_program(program, list(settings))
    o = RunOptions(**{"timeout": 60, **opts})
    b = build_for(prog, o, werror=True)
    res = run(b, o)
    s = summarize(b.plan, res.stats)
    s["ok"], s["errors"] = res.ok, res.errors
    return s


def read_frames(path: Path) -> list[bytes]:
    """Every frame of a pcap file, read by dpkt (independent of offlow)."""
    with open(path, "rb") as f:
        return [bytes(buf) for _, buf in dpkt.pcap.Reader(f)]


@contextmanager
def kvs_over_tcp(check: Callable[[RunResult], None] = lambda res: None) -> Iterator[Run]:
    """examples/kvs.py serving TCP on a free port (Run.tcp_port); on leaving, stopped,
    its result checked ok and then by `check`."""
    r = Run(build(load_program(ROOT / "examples" / "kvs.py")),
            RunOptions(tcp_port=0, timeout=600))
    r.start()
    try:
        yield r
    finally:
        r.stop()
        res = r.wait()
        assert res.ok, res.errors
        check(res)


def one_segment(*middle: Element, name: str = "edge", cores: tuple[int, ...] = (0,),
                group: bool = False, device: str = "xdp") -> Program:
    """rx >> middle... >> tx, all in one segment on `device`."""
    p = Program("refused")
    src, out = Source("rx"), Sink("tx")
    prev: Element = src
    for m in middle:
        prev >> m
        prev = m
    prev >> out
    p.segment(name, [src, *middle, out], device=device, cores=cores, group=group)
    return p


def window_in(run: subprocess.Popen[str], file: Path, within: float = 120.0) -> str:
    """The window `run` (`offlow run ... --window-file FILE`, just started) writes in
    FILE, waited for while it runs (offlow.windowfile.wait_for; `within` is generous: a
    cold cache compiles first). A failure says why, with the run's output once it has
    ended."""
    try:
        return str(windowfile.wait_for(file, run, within).window)
    except OfflowError as e:
        said = run.communicate(timeout=60) if run.poll() is not None else ("", "")
        raise AssertionError(f"{e}\n{said[0] or ''}{said[1] or ''}") from e


def offlow_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`offlow ARGS...` run in this process (offlow.cli.main, its stdout and stderr
    captured): what a test of a command that does not start a run (offlow ctl, say)
    needs, without a Python start of its own per call."""
    import contextlib
    import io

    from offlow.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:  # (argparse's own refusals)
            rc = e.code if isinstance(e.code, int) else 2
    return subprocess.CompletedProcess(["offlow", *args], rc, out.getvalue(), err.getvalue())
