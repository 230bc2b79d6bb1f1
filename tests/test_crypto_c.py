"""runtime/lib/crypto's C tests, plain and under ASan+UBSan: MD5 against RFC 1321 and the
K-chain digest against the scheme spelled out (test_md5x.c); CBC known answers, round
trips, refusals, the key-table parser and one flow used by more threads than it has
contexts (test_cbc.c)."""

from __future__ import annotations

import pytest

from tests.ctools import assert_passed, build_c, lib_test, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
@pytest.mark.parametrize("name", ["test_md5x", "test_cbc"])
def test_crypto_c(name: str, sanitize: bool) -> None:
    exe = build_c([lib_test("crypto", name)], name, ["crypto"], sanitize)
    res = run_c(exe, timeout=300)
    assert_passed(res)
