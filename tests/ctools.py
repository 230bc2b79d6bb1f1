"""Build and run C test programs from pytest (plain or with ASan+UBSan), through the one
C build description (runtime/build.toml, offlow/cbuild.py): a test links the runtime
libraries it names, built with the test's own flags."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from offlow import cbuild

# The core's C tests, and check.h, the helpers every C test includes (a library's tests
# live in its own folder: runtime/lib/NAME/tests).
C_TESTS = Path(__file__).resolve().parent / "c"


def lib_test(lib: str, name: str) -> Path:
    """The C test `name`.c of runtime library `lib`."""
    return cbuild.description().library(lib).tests / f"{name}.c"


def flag_sets(sanitize: bool) -> tuple[str, ...]:
    """The build description's flag sets of a C test: plain (a tool's, cbuild.TOOL), or
    under ASan+UBSan: the same, then `sanitize` (whose optimisation level, later, wins),
    spelled as a program built with extra_flags=cbuild.flags("sanitize") has its
    libraries' flags, so that both link one build of each runtime library, not two."""
    return (*cbuild.TOOL, "sanitize") if sanitize else cbuild.TOOL


def build_c(sources: Sequence[Path], name: str, libs: Sequence[str] = ("core",),
            sanitize: bool = False, link: Sequence[str] = (),
            includes: Sequence[Path] = ()) -> Path:
    """Compile `sources` with runtime libraries `libs` (cached by content hash), headers
    also from `includes`; return the executable."""
    return cbuild.build_exe(f"ctest-{name}-{'asan' if sanitize else 'plain'}", sources, libs,
                            flag_sets(sanitize), includes=[C_TESTS, *includes], link=link)


def run_c(exe: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a C test program; sanitizer failures make it exit non-zero."""
    # the caller's ASAN_OPTIONS after ours (the later wins): tools/gpu_check.sh needs
    # protect_shadow_gap=0 for NVIDIA's OpenCL library
    asan = "detect_leaks=1:abort_on_error=0"
    if os.environ.get("ASAN_OPTIONS"):
        asan += ":" + os.environ["ASAN_OPTIONS"]
    env = dict(os.environ, ASAN_OPTIONS=asan,
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    return subprocess.run([str(exe), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def assert_passed(res: subprocess.CompletedProcess[str]) -> None:
    """Assert that a C test program run by run_c passed: exit status 0 and check.h's
    last line (CHECK_DONE) saying 0 failures; else fail with the ends of its output."""
    passed = res.returncode == 0 and re.search(r"^0 failure\(s\)$", res.stdout, re.M)
    assert passed, (f"{Path(res.args[0]).name} exited {res.returncode}\n--- stdout ---\n"
                    f"{res.stdout[-20000:]}\n--- stderr ---\n{res.stderr[-8000:]}")
