"""What a light command loads: `offlow --help`, a subcommand's --help and naming the
device targets import none of the compiler, the runner, the DSL or the heavy packages;
each command's handler imports what it uses when it runs. Each case runs in a fresh
interpreter and reads its sys.modules (what was imported, not how long it took)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Imported by the commands that compile, run or read a run, never by parsing arguments.
HEAVY = ("numpy", "dpkt", "yaml", "pycparser", "prometheus_client", "graphviz",
         "offlow.dsl.program", "offlow.plan", "offlow.passes", "offlow.runner",
         "offlow.codegen.c", "offlow.codegen.opencl", "offlow.targets.gpu",
         "offlow.targets.xdp", "offlow.channels", "offlow.live")


def _imported(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` in the checkout."""
    probe = (f"{code}\nimport json as _j, sys as _s\n"
             "print(_j.dumps(sorted(_s.modules)), file=_s.stderr)")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    return set(json.loads(res.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in HEAVY if m in modules)


def _command(argv: list[str], status: int = 0) -> set[str]:
    """The modules `offlow ARGV` loads (its output dropped; it must exit `status`)."""
    return _imported("import contextlib, io\nimport offlow.cli\n"
                     "with contextlib.redirect_stdout(io.StringIO()), "
                     "contextlib.redirect_stderr(io.StringIO()):\n"
                     f"    try:\n        rc = offlow.cli.main({argv!r})\n"
                     "    except SystemExit as e:\n        rc = e.code\n"
                     f"assert rc == {status}, rc\n")


@pytest.mark.parametrize("argv", [
    ["--help"], ["run", "--help"], ["plan", "--help"], ["router", "check", "--help"],
    ["kvs", "quick", "--help"], ["lso", "run", "--help"], ["tsp", "--help"],
    ["bench", "--help"], ["stats", "--help"], ["ctl", "--help"], ["cache", "info", "--help"]])
def test_help_imports_nothing_heavy(argv: list[str]) -> None:
    loaded = _command(argv)
    assert "offlow.cli" in loaded
    assert _heavy(loaded) == []


# What only some commands' handlers use: the key-value store's tools (and the C builder
# they start), the build cache, the planner's profile model. Parsing arguments builds
# every subcommand's parser, so any --help loaded them all until 2026-11-28 (the options
# of `kvs quick` and `bench`, the presets `plan --help` lists: now in offlow.kvs.args
# and offlow.planner.presets).
HANDLERS_ONLY = ("offlow.kvs.quick", "offlow.kvs.tools", "offlow.cbuild", "offlow.buildcache",
                 "offlow.planner.profile")


@pytest.mark.parametrize("argv", [["--help"], ["kvs", "quick", "--help"], ["plan", "--help"]])
def test_help_imports_no_commands_handler(argv: list[str]) -> None:
    loaded = _command(argv)
    assert "offlow.cli" in loaded
    assert sorted(m for m in HANDLERS_ONLY if m in loaded) == []


def test_offlow_targets_imports_the_targets_but_no_code_generator() -> None:
    """Each target says whether it is usable here without its generator (the C
    parser, the plan, OpenCL's and BPF's code)."""
    loaded = _command(["targets", "--json"])
    targets = ("offlow.targets.gpu", "offlow.targets.xdp")
    assert all(t in loaded for t in targets)
    assert _heavy(loaded - set(targets)) == []
    assert "offlow.codegen.bpf" not in loaded


@pytest.mark.parametrize(("argv", "uses"), [
    (["stats", "WINDOW"], {"offlow.channels", "offlow.live", "prometheus_client"}),
    (["ctl", "WINDOW", "tables"], {"offlow.channels"})])
def test_stats_and_ctl_load_what_reading_a_window_needs_only(
        argv: list[str], uses: set[str], tmp_path: Path) -> None:
    """`offlow stats` and `offlow ctl` read a running program's window: neither the
    runner nor the compiler nor NumPy (their handlers run up to the window, which is
    not there: exit 2)."""
    window = str(tmp_path / "offlow-none")
    loaded = _command([window if a == "WINDOW" else a for a in argv], status=2)
    assert uses <= loaded
    assert _heavy(loaded - uses) == []


def test_naming_and_checking_devices_imports_no_target() -> None:
    """names() and known() (every placement asks) import no target's module."""
    loaded = _imported("from offlow import targets\n"
                       "assert targets.names() == "
                       "('host', 'nic', 'xdp', 'gpu', 'remote:NAME')\n"
                       "assert targets.known('gpu') and targets.known('xdp')\n"
                       "assert not targets.known('tpu') and not targets.known('remote')\n")
    assert sorted(m for m in loaded if m.startswith("offlow.targets.")) == [
        "offlow.targets.base"]
    assert _heavy(loaded) == []


def test_the_dsl_loads_when_a_program_asks_for_it() -> None:
    """`from offlow import Program` still gives the DSL's names, imported then."""
    loaded = _imported("import offlow\nassert 'offlow.dsl' not in __import__('sys').modules\n"
                       "from offlow import Program, Sink\n"
                       "from offlow.dsl import Program as P, Sink as S\n"
                       "assert (Program, Sink) == (P, S)\n")
    assert "offlow.dsl.program" in loaded
