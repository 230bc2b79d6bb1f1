"""tests/ctools.assert_passed: what counts as a C test program's pass (exit status 0 and
check.h's CHECK_DONE line saying 0 failures), and a failure names the program."""

from __future__ import annotations

import subprocess

import pytest

from tests.ctools import assert_passed


def _res(code: int, out: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["/cache/ctest-test_x-plain"], code, out, "the stderr")


def test_exit_0_and_0_failures_pass() -> None:
    assert_passed(_res(0, "ok  : a check  [test_x.c:1]\n0 failure(s)\n"))


@pytest.mark.parametrize(("code", "out"), [
    (1, "FAIL: a check  [test_x.c:1]\n1 failure(s)\n"),
    (134, "0 failure(s)\n"),               # the summary, then a sanitizer's abort
    (0, "ok  : a check\n10 failure(s)\n"),  # "0 failure(s)" only inside a larger count
    (0, "ok  : a check\n"),                 # ended before CHECK_DONE
], ids=["failures", "crashed", "ten", "no-summary"])
def test_anything_else_fails_naming_the_program(code: int, out: str) -> None:
    with pytest.raises(AssertionError, match=rf"ctest-test_x-plain exited {code}\n"
                                             r"--- stdout ---\n(.|\n)*the stderr"):
        assert_passed(_res(code, out))
