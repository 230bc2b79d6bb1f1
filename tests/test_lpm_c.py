"""The longest-prefix-match tables of the runtime's lpm library
(runtime/lib/lpm/tests/test_lpm.c): the IPv6 prefix parser, route lists and the
next-hop rule, DIR-24-8, and the IPv6 trie (every batch path the CPU has; the others
said skipped) and hash levels, against a brute-force scan on random prefix sets, batch
== scalar, rebuilds, and the full BGP table (route counts, build, spot checks, a 20k
slice). Built plain and with ASan+UBSan (smaller sets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow.paths import DATA
from tests.ctools import assert_passed, build_c, lib_test, run_c

BGP = DATA / "bgp-full-table.txt.gz"


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_lpm_tables_match_brute_force(sanitize: bool, tmp_path: Path) -> None:
    exe = build_c([lib_test("lpm", "test_lpm")], "test_lpm", ["lpm"], sanitize)
    args = ["--tmp", str(tmp_path)] + (["--quick"] if sanitize else [])
    res = run_c(exe, *args, timeout=120)
    assert_passed(res)
    # Which IPv6 batch paths ran and which this CPU lacks (shown with pytest -rP)
    print("\n".join(ln for ln in res.stdout.splitlines()
                    if "trie batch checks per path" in ln or "skipped: CPU lacks" in ln))
    assert "lpm6 trie batch checks per path: scalar " in res.stdout


@pytest.mark.skipif(not BGP.exists(), reason=f"BGP table not found at {BGP}")
@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_lpm_tables_on_the_bgp_table(sanitize: bool, tmp_path: Path) -> None:
    exe = build_c([lib_test("lpm", "test_lpm")], "test_lpm", ["lpm"], sanitize)
    args = ["--tmp", str(tmp_path), "--bgp", str(BGP)] + (["--quick"] if sanitize else [])
    res = run_c(exe, *args, timeout=120)
    assert_passed(res)
    assert "901899 IPv4 and 160147 IPv6 routes" in res.stdout


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_lpm4_incremental_updates(sanitize: bool) -> None:
    """ofl_lpm4_add/_del against a reference list (cases, group exhaustion, random
    sequences) and a lookup thread racing the updates (runtime/lib/lpm/tests/
    test_lpm_update.c)."""
    exe = build_c([lib_test("lpm", "test_lpm_update")], "test_lpm_update", ["lpm"], sanitize)
    assert_passed(run_c(exe, *(["--quick"] if sanitize else []), timeout=180))


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_lpm6_updates(sanitize: bool) -> None:
    """IPv6 tables opened for updates (rebuild and swap) against a reference list
    (cases, refused batches, random batches) and a lookup thread racing the updates that
    never waits for one (runtime/lib/lpm/tests/test_lpm6_update.c)."""
    exe = build_c([lib_test("lpm", "test_lpm6_update")], "test_lpm6_update", ["lpm"],
                  sanitize)
    assert_passed(run_c(exe, *(["--quick"] if sanitize else []), timeout=180))


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
@pytest.mark.parametrize("level", ["scalar", "avx2", "avx512"])
def test_lpm4_vector_paths_match_scalar(level: str, sanitize: bool,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each path of the batched IPv4 lookup, forced with OFFLOW_SIMD, answers as the
    scalar lookup on random and hit-heavy addresses of a random table and of a /25-/32
    one, in odd batch lengths and unaligned arrays (runtime/lib/lpm/tests/
    test_lpm4_simd.c); a path this CPU lacks is skipped, saying so."""
    monkeypatch.setenv("OFFLOW_SIMD", level)
    exe = build_c([lib_test("lpm", "test_lpm4_simd")], "test_lpm4_simd", ["lpm"], sanitize)
    res = run_c(exe, *(["--quick"] if sanitize else []))
    skipped = next((line for line in res.stdout.splitlines() if line.startswith("skipped:")),
                   None)
    if skipped is not None and res.returncode == 0:
        pytest.skip(f"test_lpm4_simd: {skipped}")
    assert_passed(res)
    assert f"path {level} " in res.stdout
