"""The longest-prefix-match tables of the C runtime (tests/c/test_lpm.c): the IPv6
prefix parser, route lists and the next-hop rule, DIR-24-8 and binary search on
prefix lengths against a brute-force scan on random prefix sets, batch == scalar,
rebuilds, and the full BGP table (route counts, build, spot checks, a 20k slice).
Built plain and with ASan+UBSan (smaller sets)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from offlow.build import DATA
from tests.ctools import RUNTIME, build_c, run_c

C_TESTS = Path(__file__).resolve().parent / "c"
BGP = DATA / "bgp-full-table.txt.gz"
SOURCES = [RUNTIME / "src" / f"{m}.c"
           for m in ("err", "pkt", "src", "synth", "routes", "lpm4", "lpm6")]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lpmc")


def _check(res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode == 0, (f"test_lpm exited {res.returncode}\n--- stdout ---\n"
                                 f"{res.stdout[-20000:]}\n--- stderr ---\n{res.stderr}")
    assert "0 failure(s)" in res.stdout, res.stdout[-20000:]


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_lpm_tables_match_brute_force(sanitize: bool, build_dir: Path, tmp_path: Path) -> None:
    exe = build_c([C_TESTS / "test_lpm.c", *SOURCES], build_dir, "test_lpm", sanitize=sanitize)
    args = ["--tmp", str(tmp_path)] + (["--quick"] if sanitize else [])
    _check(run_c(exe, *args, timeout=120))


@pytest.mark.skipif(not BGP.exists(), reason=f"BGP table not found at {BGP}")
@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_lpm_tables_on_the_bgp_table(sanitize: bool, build_dir: Path, tmp_path: Path) -> None:
    exe = build_c([C_TESTS / "test_lpm.c", *SOURCES], build_dir, "test_lpm", sanitize=sanitize)
    args = ["--tmp", str(tmp_path), "--bgp", str(BGP)] + (["--quick"] if sanitize else [])
    res = run_c(exe, *args, timeout=120)
    _check(res)
    assert "901899 IPv4 and 160147 IPv6 routes" in res.stdout
