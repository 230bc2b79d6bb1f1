"""runtime/lib/tsp's C tests, plain and under ASan+UBSan: the TSPLIB parser on a file
written the way people write them and on malformed ones, nint distances and nearest
neighbours, and climbs on cities around a circle (one 2-opt local optimum, the circle)."""

from __future__ import annotations

import pytest

from tests.ctools import build_c, lib_test, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_tsp_c(sanitize: bool) -> None:
    exe = build_c([lib_test("tsp", "test_tsp")], "test_tsp", ["tsp"], sanitize)
    res = run_c(exe, timeout=300)
    assert res.returncode == 0 and "0 failure(s)" in res.stdout, (
        f"test_tsp exited {res.returncode}\n{res.stdout}\n{res.stderr}")
