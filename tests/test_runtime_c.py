"""The C runtime's own tests (rings, queues, window, misc: errors, JSON, pinning,
waiting, whole files, the runner's lifeline; the run-time balancer), each built plain
and with ASan+UBSan and run as a program that prints its checks and exits non-zero on
failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ctools import C_TESTS, build_c, run_c

# (program, arguments plain, arguments under the sanitizers: fewer entries there)
PROGRAMS: list[tuple[str, list[str], list[str]]] = [
    ("test_ring", ["1000000"], ["200000"]),
    ("test_queue", ["300000"], ["30000"]),
    ("test_window", ["{tmp}"], ["{tmp}"]),
    ("test_misc", ["{tmp}"], ["{tmp}"]),
    ("test_balance", [], []),
]


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
@pytest.mark.parametrize(("name", "args", "asan_args"), PROGRAMS,
                         ids=[p[0] for p in PROGRAMS])
def test_c_program(name: str, args: list[str], asan_args: list[str], sanitize: bool,
                   tmp_path: Path) -> None:
    exe = build_c([C_TESTS / f"{name}.c"], name, sanitize=sanitize)
    argv = [a.format(tmp=tmp_path) for a in (asan_args if sanitize else args)]
    res = run_c(exe, *argv, timeout=300)  # a hang guard, not a time limit: loaded machines are slow
    assert res.returncode == 0, (f"{name} exited {res.returncode}\n--- stdout ---\n"
                                 f"{res.stdout}\n--- stderr ---\n{res.stderr}")
    assert "0 failure(s)" in res.stdout
