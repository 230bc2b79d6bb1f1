"""The program descriptor a generated main hands the runtime (gen.h: ofl_prog, and
ofl_prog_init_window, _open, _run, _report, _close), driven by tests/c/test_prog.c with
a descriptor written by hand: built plain and with ASan+UBSan (nothing may leak)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ctools import C_TESTS, assert_passed, build_c, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_the_runtime_sets_up_runs_reports_and_tears_down_a_described_program(
        sanitize: bool, tmp_path: Path) -> None:
    exe = build_c([C_TESTS / "test_prog.c"], "test_prog", sanitize=sanitize)
    res = run_c(exe, str(tmp_path), timeout=120)
    assert_passed(res)
    assert "cannot attach ring a->b core 0 -> instance 0" in res.stderr
