"""The verifier's log as the xdp target says it, in C (runtime/tools/tests/test_xdp_vlog.c):
the reason is the error line(s) before the log's summary with the last source line
before them, the log is kept beside the object, written whole. Built plain and with
ASan+UBSan; no kernel needed (the logs are the kernel's, kept as text)."""

from __future__ import annotations

import pytest

from offlow.targets import xdp
from tests.ctools import assert_passed, build_c, run_c

TEST = xdp.TOOLS / "tests" / "test_xdp_vlog.c"


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_xdp_verifier_log_reason_path_and_file(sanitize: bool) -> None:
    exe = build_c([TEST, xdp.TOOLS / "xdp_vlog.c"], "test_xdp_vlog", (), sanitize,
                  includes=[xdp.TOOLS])
    res = run_c(exe)
    assert_passed(res)
