"""An option the user gives a source or a sink (`offlow run --opt NAME.KEY=VALUE`) that
it never reads (a misspelt key, one its kind has not) is the run's one error, said
before anything is built or started (offlow.optkeys), naming what it takes. Never
silently unread (it was, until 2026-11-28: `--opt wire.loop=3` ran once); from then
until the up-front check it was refused by the process that opened it, once started
(gen.h's ofl_args_check_unread, now the backstop: tests/test_opt_keys.py). Tested with
a user's program and its own names (tests/programs/archive_tap.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dpkt

from tests.e2e import TLS, read_frames

ROOT = Path(__file__).resolve().parents[1]
TAP = ROOT / "tests" / "programs" / "archive_tap.py"
SOURCE_KEYS = "advance_ts, count, duration_ns, kind, loops, prefixes, rate, seed, sizes"


def offlow_run(*args: str) -> tuple[int, dict, str]:
    """`offlow run TAP ARGS --json`: its status, summary and stderr."""
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(TAP), *args, "--json"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=os.environ)
    return p.returncode, json.loads(p.stdout), p.stderr


def refused(*args: str) -> str:
    """The one error of `offlow run TAP ARGS --json`, said before anything started (no
    summary), without its `offlow: error: `."""
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(TAP), *args, "--json"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=os.environ)
    lines = p.stderr.splitlines()
    assert p.returncode == 2 and p.stdout == "" and len(lines) == 1, (p.returncode, p.stderr)
    return lines[0].removeprefix("offlow: error: ")


def test_a_misspelt_source_key_is_one_error_naming_what_it_takes() -> None:
    assert refused("--count", "100", "--opt", "tap_in.loop=2") == (
        "--opt `tap_in.loop=2`: source `tap_in` (kind=synth) reads no option `loop` (did you "
        f"mean `loops`?); it reads {SOURCE_KEYS}")


def test_a_misspelt_sink_key_is_one_error(tmp_path: Path) -> None:
    out = tmp_path / "a.pcap"
    assert refused("--count", "100", "--opt", f"archive.paht={out}") == (
        f"--opt `archive.paht={out}`: sink `archive` (no kind=) reads no option `paht` (did "
        "you mean `path`?); it reads kind, path")
    assert not out.exists()


def test_a_key_only_another_kind_takes_is_refused() -> None:
    # `path` is a capture's (kind pcap, which --input chooses): a synthetic source
    # (no --input) would run without it, as if it had been read
    assert refused("--count", "100", "--opt", f"tap_in.path={TLS}") == (
        f"--opt `tap_in.path={TLS}`: source `tap_in` (kind=synth) reads no option `path`; it "
        f"reads {SOURCE_KEYS}; `path` is read by a source of kind=pcap")


def test_the_users_keys_that_are_read_run_as_given(tmp_path: Path) -> None:
    # no refusal of what is read: the capture twice over (tap_in.loops), written where
    # archive.path says (given after --output: the later wins), every frame marked
    out = tmp_path / "kept.pcap"
    rc, s, err = offlow_run("--input", str(TLS), "--output", str(tmp_path / "unused.pcap"),
                            "--opt", "tap_in.loops=2", "--opt", f"archive.path={out}")
    assert rc == 0 and not s["errors"], (s["errors"], err)
    frames = [bytes(b) for _, b in dpkt.pcap.Reader(TLS.open("rb"))]
    want = [f[:-1] + bytes([f[-1] | 1]) for f in frames] * 2
    assert read_frames(out) == want
    assert not (tmp_path / "unused.pcap").exists()
