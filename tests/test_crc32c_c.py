"""CRC32C on every path (tests/c/test_crc32c.c): the 512-bit (AVX-512) and 256-bit
(AVX2) VPCLMULQDQ folds, the SSE4.2 crc32 instruction and the table, each forced with
OFFLOW_SIMD and checked against a bitwise reference, plain and under ASan+UBSan. A path
this CPU lacks is a skip that says so."""

from __future__ import annotations

import pytest

from tests.ctools import C_TESTS, assert_passed, build_c, run_c


@pytest.mark.parametrize("level", ["scalar", "avx2", "avx512"])
@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_crc32c_path(level: str, sanitize: bool) -> None:
    exe = build_c([C_TESTS / "test_crc32c.c"], "test_crc32c", sanitize=sanitize)
    res = run_c(exe, level, timeout=120)
    assert_passed(res)
    assert "fold constants of 2048 bits are x^2111 and x^2047 mod P" in res.stdout
    skipped = [ln for ln in res.stdout.splitlines() if ln.startswith("skipped: ")]
    if skipped:
        pytest.skip(skipped[0])
    assert f"OFFLOW_SIMD={level} runs" in res.stdout
    assert "random lengths 0..70000" in res.stdout
