"""The stream operators' C side at its edges (runtime/lib/streams/tests/test_streams.c:
options refused, full buffers and sides, group limits, late tuples, negative windows,
pairs too wide, tuple frames with VLAN tags and IPv4 options, fragments and sizes
refused), built plain and with ASan+UBSan."""

from __future__ import annotations

import pytest

from tests.ctools import assert_passed, build_c, lib_test, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_stream_operators_at_their_edges(sanitize: bool) -> None:
    exe = build_c([lib_test("streams", "test_streams")], "test_streams", ["streams"], sanitize)
    res = run_c(exe)
    assert_passed(res)
