"""The lowering plan (offlow/plan.py) is made once: code generation, the targets,
explain, the run report and the runner read it and run no compiler pass."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from offlow.build import build, generate
from offlow.dsl.loader import load_program
from offlow.explain import explain
from offlow.report import summarize
from offlow.runner import RunOptions, run
from tests.e2e import EXAMPLE, ROOT, TLS

PASSES = ROOT / "offlow" / "passes"
READERS = ["offlow/codegen", "offlow/targets", "offlow/explain.py", "offlow/report.py",
           "offlow/runner.py"]


@contextmanager
def calls_into(folder: Path) -> Iterator[list[str]]:
    """The functions of `folder` called (on this thread) inside the block."""
    seen: list[str] = []

    def prof(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(str(folder)):
            seen.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")

    old: Callable[..., Any] | None = sys.getprofile()
    sys.setprofile(prof)
    try:
        yield seen
    finally:
        sys.setprofile(old)


def test_generating_explaining_running_and_reporting_run_no_pass(tmp_path: Path) -> None:
    for settings in ([], ["rx.device=host", "app.cores=0,1"]):
        b = build(load_program(EXAMPLE, settings))
        with calls_into(PASSES) as seen:
            generate(b.plan)
            explain(b.plan)
            res = run(b, RunOptions(input=TLS, output=tmp_path / "out.pcap", timeout=60))
            summarize(b.plan, res.stats)
        assert res.ok, res.errors
        assert seen == [], f"a consumer of the plan ran a pass: {sorted(set(seen))}"


def test_building_runs_the_passes_once() -> None:
    """(What the check above would see if a consumer ran them: the passes are traced.)"""
    with calls_into(PASSES) as seen:
        build(load_program(EXAMPLE, ["rx.cores=0,1"]))
    assert seen.count("__init__.py:compile_graph") == 1
    assert seen.count("fuse.py:fuse") == 1 and seen.count("fuse.py:threads") == 1


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_plan_s_readers_import_no_pass() -> None:
    files = [f for r in READERS for f in ([ROOT / r] if r.endswith(".py")
                                          else sorted((ROOT / r).glob("*.py")))]
    assert len(files) >= 10
    bad = {str(f.relative_to(ROOT)): sorted(m for m in _imports(f) if m.startswith("offlow.passes"))
           for f in files}
    assert {f: m for f, m in bad.items() if m} == {}
