"""runtime/lib/tsp's C tests, plain and under ASan+UBSan: the TSPLIB parser on a file
written the way people write them and on malformed ones, nint distances and nearest
neighbours, and climbs on cities around a circle (one 2-opt local optimum, the circle);
the climber threads and the channel messages of the circular result queue
(test_tsp_climbers.c)."""

from __future__ import annotations

import pytest

from tests.ctools import assert_passed, build_c, lib_test, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
@pytest.mark.parametrize("name", ["test_tsp", "test_tsp_climbers"])
def test_tsp_c(name: str, sanitize: bool) -> None:
    exe = build_c([lib_test("tsp", name)], name, ["tsp"], sanitize)
    res = run_c(exe, timeout=300)
    assert_passed(res)
