"""The NIC cache of the key-value store (runtime/lib/kvs/tests/test_kvcache.c): configuration and
options, hits / misses / fills in both protocols, write-through and write-back, LRU and
CLOCK eviction with write-backs reaching a real store, stale fills, DELETE of dirty
entries, requests the cache does not serve, quiet requests and header-only replies,
malformed packets, flush, a randomized model check of every GET answer against the
history of writes (FIFO to the store, random delays, several requests in flight), and
the lookup and update sides on two threads. Built plain and with ASan+UBSan."""

from __future__ import annotations

import pytest

from tests.ctools import assert_passed, build_c, lib_test, run_c


@pytest.mark.parametrize(("sanitize", "ops"), [(False, "20000"), (True, "4000")],
                         ids=["plain", "asan"])
def test_kvcache_matches_its_model(sanitize: bool, ops: str) -> None:
    exe = build_c([lib_test("kvs", "test_kvcache")], "test_kvcache", ["kvs"], sanitize)
    res = run_c(exe, ops, timeout=120)
    assert_passed(res)
