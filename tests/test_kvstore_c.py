"""The key-value store and request execution (tests/c/test_kvstore.c): configuration
errors, get/set/add/replace/delete, CAS rules, expiry, hash collisions, CLOCK
eviction by items and by bytes, text requests run against the store, and four
threads hammering one store (own keys checked against per-thread models, shared
values never torn), with and without evictions. Built plain and with ASan+UBSan."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ctools import RUNTIME, build_c, run_c

C_TESTS = Path(__file__).resolve().parent / "c"
SOURCES = [RUNTIME / "src" / f"{m}.c" for m in ("err", "mcproto", "kvstore", "kvexec")]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kvstorec")


@pytest.mark.parametrize(("sanitize", "ops"), [(False, "500000"), (True, "50000")],
                         ids=["plain", "asan"])
def test_kvstore_matches_its_models(sanitize: bool, ops: str, build_dir: Path) -> None:
    exe = build_c([C_TESTS / "test_kvstore.c", *SOURCES], build_dir, "test_kvstore",
                  sanitize=sanitize, libs=())
    res = run_c(exe, ops, timeout=60)
    assert res.returncode == 0, (f"test_kvstore exited {res.returncode}\n--- stdout ---\n"
                                 f"{res.stdout[-20000:]}\n--- stderr ---\n{res.stderr}")
    assert "0 failure(s)" in res.stdout
