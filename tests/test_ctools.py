"""tests/ctools: what counts as a C test program's pass (assert_passed: exit status 0 and
check.h's CHECK_DONE line saying 0 failures), and a failure names the program; a C
test's flag sets (flag_sets) link the runtime archives a program built so links, and
compile as the sanitize set says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from offlow import buildcache, cbuild
from tests.ctools import assert_passed, flag_sets


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


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_a_c_test_links_the_archives_a_program_built_so_links(
        sanitize: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One build of each runtime library serves the C tests and the programs built the
    same way (offlow.build: the libraries get cbuild.TOOL, then the program's extra
    flags; the sanitized end-to-end runs pass the sanitize set's flags): under the
    sanitizers the core was built twice on an empty cache, and so were crypto and
    streams. (Where it is found, not built: every entry counts as a hit.)"""
    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path))
    monkeypatch.setattr(buildcache, "hit", lambda entry, inputs="": True)
    extra = cbuild.flags("sanitize") if sanitize else ()
    for lib in ("core", "crypto", "streams"):
        assert (cbuild.build_library(lib, flag_sets(sanitize))
                == cbuild.build_library(lib, cbuild.TOOL, extra))


def test_under_the_sanitizers_a_c_test_optimises_as_the_sanitize_set_says() -> None:
    """flag_sets(True) puts `optimize` before `sanitize`: the compiler (its list of the
    optimisations each flag list turns on) says the code is optimised as with the
    sanitize set's flags alone, and no other flag came in."""
    d = cbuild.description()
    alone = ("base", "sanitize", "werror")
    assert set(d.flags(*flag_sets(True))) - set(d.flags(*alone)) <= set(d.flags("optimize"))
    said = [subprocess.run([d.compiler(*sets), *d.flags(*sets), "-Q", "--help=optimizers"],
                           capture_output=True, text=True, check=True).stdout
            for sets in (alone, flag_sets(True))]
    assert "enabled" in said[0] and said[0] == said[1]
