"""What a light command loads: naming the device targets imports none of the
compiler, the runner, the DSL or the heavy packages, and the DSL's names load when a
program asks for them. Each case runs in a fresh interpreter and reads its sys.modules
(what was imported, not how long it took)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
