"""The NIC cache of the key-value store (tests/c/test_kvcache.c): configuration and
options, hits / misses / fills in both protocols, write-through and write-back, LRU and
CLOCK eviction with write-backs reaching a real store, stale fills, DELETE of dirty
entries, requests the cache does not serve, quiet requests and header-only replies,
malformed packets, flush, a randomized model check of every GET answer against the
history of writes (FIFO to the store, random delays, several requests in flight), and
the lookup and update sides on two threads. Built plain and with ASan+UBSan."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ctools import build_c, run_c, runtime_sources

C_TESTS = Path(__file__).resolve().parent / "c"


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kvcachec")


@pytest.mark.parametrize(("sanitize", "ops"), [(False, "20000"), (True, "4000")],
                         ids=["plain", "asan"])
def test_kvcache_matches_its_model(sanitize: bool, ops: str, build_dir: Path) -> None:
    exe = build_c([C_TESTS / "test_kvcache.c", *runtime_sources()], build_dir, "test_kvcache",
                  sanitize=sanitize)
    res = run_c(exe, ops, timeout=120)
    assert res.returncode == 0, (f"test_kvcache exited {res.returncode}\n--- stdout ---\n"
                                 f"{res.stdout[-20000:]}\n--- stderr ---\n{res.stderr}")
    assert "0 failure(s)" in res.stdout
