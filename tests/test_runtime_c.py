"""The C runtime's own tests (rings, queues, window, misc: errors, JSON, pinning,
waiting, whole files, the runner's lifeline; the run-time balancer), each built plain
and with ASan+UBSan and run as a program that prints its checks and exits non-zero on
failure."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from offlow import cbuild
from tests.ctools import C_TESTS, assert_passed, build_c, run_c

# (program, arguments plain, arguments under the sanitizers: fewer entries there)
# test_queue's argument: entries per transfer configuration (a quarter of it with
# reservations, a 4th to a 32nd of it on the large entries and small rings). At 100,000
# every ring still wraps at least 97 times (390 to 1,562 times without reservations),
# crossing every batch and flush boundary as often; 300,000 made the thread engine's
# transfers (four threads spinning on a 2-core machine) 30 s of the test's 45 s.
PROGRAMS: list[tuple[str, list[str], list[str]]] = [
    ("test_ring", ["1000000"], ["200000"]),
    ("test_queue", ["100000"], ["30000"]),
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
    assert_passed(res)


def _reload_object(folder: Path, name: str, layout: int, turns: int) -> Path:
    """tests/c/reload_obj.c as a shared object of this layout and number of turns."""
    src = folder / f"{name}.c"
    src.write_text(f"#define OBJ_LAYOUT {layout:#x}ull\n#define OBJ_TURNS {turns}u\n"
                   '#include "reload_obj.c"\n')
    return cbuild.build_exe(f"ctest-reload-{name}", [src], ["core"], (*cbuild.TOOL, "shared"),
                            archives=False, includes=[C_TESTS])


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_reload_swaps_turns_between_turns_and_refusals_change_nothing(
        sanitize: bool) -> None:
    short = Path(tempfile.mkdtemp(prefix="ofl-rl-", dir="/tmp"))  # a message holds 55 bytes
    built = [_reload_object(short, "good", 0x1234ABCD, 2),
             _reload_object(short, "layout", 0x99, 2),
             _reload_object(short, "turns", 0x1234ABCD, 3)]
    try:
        objects = [shutil.copyfile(b, short / f"{i}.so") for i, b in enumerate(built)]
        (short / "not.so").write_text("not an object\n")
        exe = build_c([C_TESTS / "test_reload.c"], "test_reload", sanitize=sanitize)
        res = run_c(exe, *map(str, objects), str(short / "not.so"), timeout=300)
    finally:
        shutil.rmtree(short)
    assert_passed(res)
