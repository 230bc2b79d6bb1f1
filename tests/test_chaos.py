"""Chaos and soak: runs of each example, each ended by a random fault at a random time:
a process of the run killed (SIGKILL) or crashed (SIGSEGV), or the runner itself
sent SIGTERM, SIGINT or SIGKILL (SIGTERM and SIGINT also while it still starts).
After each run: no process of it survives, no window or run folder of it is left, the
exit status and error say what happened, and the output capture written so far reads
as a capture.

Bounded: a first round gives every kind of fault once and every example at least once
(in a random pairing), then runs of a random example and fault go on until
OFFLOW_CHAOS_SECONDS (default 0: the first round only; a soak: 600) have passed; the
seed is printed with the counts (OFFLOW_CHAOS_SEED replays a sequence). Each run is
found by what is its own only: the process group its runner leads, the window named
with the runner's pid, a private TMPDIR."""

from __future__ import annotations

import io
import os
import random
import signal
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import dpkt
import pytest

from offlow import windowfile
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from tests.e2e import EXAMPLE, ROOT, TLS
from tests.procs import start_cli
from tests.router_slice import slice_lines

KINDS = ["kill process", "segv process", "sigterm runner", "sigint runner", "sigkill runner",
         "early sigterm", "early sigint"]


@dataclass
class Example:
    name: str
    program: Path
    args: list[str]
    output: bool = False  # writes --output OUT (checked after the run)


def examples(folder: Path) -> list[Example]:
    routes = folder / "routes.txt"
    routes.write_text("\n".join(slice_lines(2000, 500)) + "\n")
    ex = ROOT / "examples"
    slow = ["--duration", "30", "--rate", "20000"]  # outputs of a few MB, not GB
    return [
        Example("ttl synthetic", EXAMPLE, slow, output=True),
        Example("ttl capture", EXAMPLE, ["--input", str(TLS), *slow, "--set", "app.cores=0,1"],
                output=True),
        Example("router", ex / "router.py", [*slow, "--opt", f"routes4.path={routes}",
                                             "--opt", f"routes6.path={routes}"], output=True),
        Example("kvs tcp", ex / "kvs.py", ["--tcp", "0", "--duration", "30"]),
        Example("kvs_cache udp", ex / "kvs_cache.py", ["--udp", "0", "--duration", "30"]),
        Example("pcsa serve", ex / "pcsa.py", ["--serve", "--count", "5000"]),
    ]


def device_name(pid: int) -> str:
    """host or nic, from the executable's name."""
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name
    except OSError:
        return "?"


def capture_problem(path: Path, partial_ok: bool) -> str | None:
    """Why `path` does not read as a capture (None when it does): its header, then
    whole records to the end, each read by dpkt; a last record cut short is allowed
    when its writer was killed (`partial_ok`), as tcpdump reads such a file."""
    data = path.read_bytes()
    if len(data) < 24 or struct.unpack_from("<I", data)[0] != 0xA1B23C4D:  # nanoseconds
        return f"{len(data)} bytes, no capture header"
    off, whole = 24, 0
    while off + 16 <= len(data) and off + 16 + struct.unpack_from("<I", data, off + 8)[0] \
            <= len(data):
        off += 16 + struct.unpack_from("<I", data, off + 8)[0]
        whole += 1
    if off != len(data) and not partial_ok:
        return f"{len(data) - off} bytes after the last whole record ({whole} records)"
    got = sum(1 for _ in dpkt.pcap.Reader(io.BytesIO(data[:off])))
    return None if got == whole else f"dpkt read {got} of {whole} records"


@dataclass
class Tally:
    runs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    examples: Counter[str] = field(default_factory=Counter)  # ended by a fault
    leftovers: int = 0
    captures: int = 0  # output captures read after a run
    failures: list[str] = field(default_factory=list)


def one_run(ex: Example, kind: str, rng: random.Random, folder: Path, tally: Tally) -> None:
    out, window = folder / "out.pcap", folder / "window.json"  # (beside its TMPDIR)
    args = [ex.program, *ex.args, "--window-file", window] + \
        (["--output", out] if ex.output else [])
    run = start_cli(args, folder, shell_prefix="ulimit -c 0")
    what = f"{ex.name}, {kind}"
    expect_status: tuple[int, ...]
    expect_text: tuple[str, ...]
    victim = ""
    try:
        if kind.startswith("early"):
            time.sleep(rng.uniform(0.05, 2.5))  # importing, compiling or starting
            sig = signal.SIGTERM if kind == "early sigterm" else signal.SIGINT
            run.proc.send_signal(sig)
            # Before Python's handlers: the default action; after: a clean end.
            expect_status = (-sig, 0, 130 if sig == signal.SIGINT else 143)
            expect_text = ("", "stopped by", "offlow: interrupted")
        else:
            try:  # its processes started (a cold cache compiles the runtime first)
                windowfile.wait_for(window, run.proc, 240)
            except OfflowError as e:
                tally.failures.append(f"{what}: did not start: {e}: {run.stderr()[-2000:]}")
                return
            time.sleep(rng.uniform(0.05, 1.5))
            kids = {device_name(p): p for p in run.children()}
            if kind.endswith("runner"):
                sig = {"sigterm runner": signal.SIGTERM, "sigint runner": signal.SIGINT,
                       "sigkill runner": signal.SIGKILL}[kind]
                run.proc.send_signal(sig)
                expect_status = {signal.SIGTERM: (0,), signal.SIGINT: (0,),
                                 signal.SIGKILL: (-9,)}[sig]
                expect_text = {signal.SIGTERM: ("stopped by SIGTERM",),
                               signal.SIGINT: ("stopped by Ctrl-C",),
                               signal.SIGKILL: ("",)}[sig]
            else:
                sig = signal.SIGSEGV if kind == "segv process" else signal.SIGKILL
                victim = rng.choice(sorted(kids))
                os.kill(kids[victim], sig)
                expect_status = (1,)
                expect_text = (f"the {victim} process died ({signal.Signals(sig).name})",)
        tally.faults[kind] += 1
        tally.examples[ex.name] += 1
        left = run.wait_gone(60)
        left_files = run.leftovers()
        tally.leftovers += len(left) + len(left_files)
        err = run.stderr()
        if left or left_files:
            tally.failures.append(f"{what}: left {left} {left_files}")
        if run.proc.returncode not in expect_status:
            tally.failures.append(f"{what}: exit status {run.proc.returncode}, expected "
                                  f"{expect_status}: {err[-1500:]}")
        elif not any(t in err for t in expect_text):
            tally.failures.append(f"{what}: none of {expect_text} in: {err[-1500:]}")
        if "Traceback" in err and run.proc.returncode >= 0:
            tally.failures.append(f"{what}: a traceback: {err[-1500:]}")
        if ex.output and out.exists():
            tally.captures += 1
            problem = capture_problem(out, partial_ok=victim == "host")
            if problem:
                tally.failures.append(f"{what}: output capture: {problem}")
    finally:
        run.kill_all()
        tally.runs += 1


def test_chaos_runs_leave_nothing_behind_and_say_what_happened(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = int(os.environ.get("OFFLOW_CHAOS_SEED") or random.randrange(1 << 30))
    budget = float(os.environ.get("OFFLOW_CHAOS_SECONDS") or 0)
    rng = random.Random(seed)
    exs = examples(tmp_path)
    for ex in exs:  # compiled once beforehand: the runs measure faults, not the compiler
        build(load_program(ex.program))
    tally = Tally()
    t0 = time.monotonic()
    for i, (ex, kind) in enumerate(first_round(exs, rng)):
        one_run(ex, kind, rng, tmp_path / f"run{i}", tally)
    while time.monotonic() - t0 < budget:
        i += 1
        one_run(rng.choice(exs), rng.choice(KINDS), rng, tmp_path / f"run{i}", tally)
    with capsys.disabled():
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(tally.faults.items()))
        print(f"\nchaos (seed {seed}): {tally.runs} runs in {time.monotonic() - t0:.0f} s; "
              f"faults: {kinds}; examples: {len(tally.examples)}; "
              f"output captures read: {tally.captures}; "
              f"leftovers found: {tally.leftovers}")
    assert tally.failures == [], "\n".join(tally.failures)
    assert set(tally.faults) == set(KINDS)
    assert set(tally.examples) == {e.name for e in exs}


def first_round(exs: list[Example], rng: random.Random) -> list[tuple[Example, str]]:
    """Every kind of fault once and every example at least once, paired at random (the
    examples repeated in a random order as far as the kinds need)."""
    kinds = rng.sample(KINDS, len(KINDS))
    many = max(len(exs), len(kinds))
    picked = [*rng.sample(exs, len(exs)), *(rng.choice(exs) for _ in range(many - len(exs)))]
    return [(picked[i], kinds[i % len(kinds)]) for i in range(many)]
