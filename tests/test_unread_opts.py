"""An option the user gives a source or a sink (`offlow run --opt NAME.KEY=VALUE`) that
it never reads (a misspelt key, one its kind has not) is the run's one error, said by
the process that opened it before its first packet, naming what it takes; the other
processes stop without errors of their own. Never silently unread (it was, until
2026-11-28: `--opt wire.loop=3` ran once). Tested with a user's program and its own
names (tests/programs/archive_tap.py)."""

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


def test_a_misspelt_source_key_is_the_runs_one_error_naming_what_it_takes() -> None:
    rc, s, err = offlow_run("--count", "100", "--opt", "tap_in.loop=2")
    want = (f"--opt tap_in.loop=2: source tap_in (on nic) takes no option `loop` (it takes "
            f"{SOURCE_KEYS})")
    assert rc == 1 and s["errors"] == [want], (s["errors"], err)
    # said once: no second error from the host, whose producer stopped before any packet
    assert err.count("offlow: error:") == 1 and "Broken pipe" not in err, err
    assert s["accounting"]["read"] == 0 and s["accounting"]["unaccounted"] == 0


def test_a_misspelt_sink_key_is_refused_on_its_own_device(tmp_path: Path) -> None:
    rc, s, err = offlow_run("--count", "100", "--opt", f"archive.paht={tmp_path / 'a.pcap'}")
    assert rc == 1 and s["errors"] == [
        f"--opt archive.paht={tmp_path / 'a.pcap'}: sink archive (on host) takes no option "
        "`paht` (it takes kind, path)"], (s["errors"], err)
    assert not (tmp_path / "a.pcap").exists()


def test_a_key_only_another_kind_takes_is_refused() -> None:
    # `path` is a capture's (kind pcap, which --input chooses): a synthetic source
    # (no --input) would run without it, as if it had been read
    rc, s, _ = offlow_run("--count", "100", "--opt", f"tap_in.path={TLS}")
    assert rc == 1 and s["errors"] == [
        f"--opt tap_in.path={TLS}: source tap_in (on nic) takes no option `path` (it takes "
        f"{SOURCE_KEYS})"], s["errors"]


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
