"""The key-value store and request execution (runtime/lib/kvs/tests/test_kvstore.c): configuration
errors, get/set/add/replace/delete, CAS rules, expiry, hash collisions, CLOCK
eviction by items and by bytes, text requests run against the store, and four
threads hammering one store (own keys checked against per-thread models, shared
values never torn), with and without evictions. Built plain and with ASan+UBSan."""

from __future__ import annotations

import pytest

from tests.ctools import assert_passed, build_c, lib_test, run_c


@pytest.mark.parametrize(("sanitize", "ops"), [(False, "500000"), (True, "50000")],
                         ids=["plain", "asan"])
def test_kvstore_matches_its_models(sanitize: bool, ops: str) -> None:
    exe = build_c([lib_test("kvs", "test_kvstore")], "test_kvstore", ["kvs"], sanitize)
    res = run_c(exe, ops, timeout=60)
    assert_passed(res)
