"""The memcached protocol parser and writers (tests/c/test_mcproto.c): every binary
opcode, every parse error with its span, fatality and reply, text commands, requests
cut at every byte offset as a TCP stream delivers them, the UDP frame header, and
the response writers. Built plain and with ASan+UBSan (exact-size input buffers, so
a read past a request's end is caught)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ctools import RUNTIME, build_c, run_c

C_TESTS = Path(__file__).resolve().parent / "c"
SOURCES = [RUNTIME / "src" / f"{m}.c" for m in ("err", "mcproto")]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcprotoc")


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_mcproto_parses_and_answers_like_memcached(sanitize: bool, build_dir: Path) -> None:
    exe = build_c([C_TESTS / "test_mcproto.c", *SOURCES], build_dir, "test_mcproto",
                  sanitize=sanitize, libs=())
    res = run_c(exe, timeout=60)
    assert res.returncode == 0, (f"test_mcproto exited {res.returncode}\n--- stdout ---\n"
                                 f"{res.stdout[-20000:]}\n--- stderr ---\n{res.stderr}")
    assert "0 failure(s)" in res.stdout
