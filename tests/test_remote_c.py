"""runtime/lib/remote's C tests over UCX on 127.0.0.1, plain and under ASan+UBSan
(tests/../runtime/lib/remote/tests/test_remote.c): the handshake proof, a wrong secret
refused with nothing delivered, rings carried both ways in order under backpressure,
a bad message refused, a peer gone noticed."""

from __future__ import annotations

import pytest

from tests.ctools import build_c, lib_test, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_remote_c(sanitize: bool) -> None:
    exe = build_c([lib_test("remote", "test_remote")], "test_remote", ["remote"], sanitize)
    res = run_c(exe, timeout=300)
    assert res.returncode == 0 and "0 failure(s)" in res.stdout, (
        f"test_remote exited {res.returncode}\n{res.stdout}\n{res.stderr}")
