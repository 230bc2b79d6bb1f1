"""`offlow bench router` on a small slice of the BGP table: the result is well formed,
offlow's lookups agree with each other, and DPDK either agrees with offlow (0
disagreements) or is reported unavailable with a reason. No timing is asserted."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import router
from benchmarks.common import peers
from benchmarks.common import routes as common_routes
from offlow.errors import OfflowError
from tests.router_slice import write_slice

TINY = router.Sweep(build_sizes=(250, None), lookup_size=None, addresses=4096,
                    lookup_reps=2, min_time=0.001, build_reps=2, build_budget=0.05,
                    lpm_budget=5.0)


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 1,600 IPv4 and 400 IPv6 prefixes, a /65 and a duplicate route."""
    return write_slice(tmp_path_factory, 1610, 400,
                       ("2001:db8::8000:0:0:0/65", "10.0.0.0/8", "10.0.0.0/8"))


def _offlow_rows(res: dict) -> list[dict]:
    return [r for r in res["lookups"] if r["side"] == "offlow"]


def _check_common(res: dict, text: str) -> None:
    """What holds with or without DPDK."""
    assert {"machine", "dpdk", "input", "sweep", "builds", "lookups", "ratios",
            "verdicts"} <= res.keys()
    m = res["machine"]
    assert m["cpus"] >= 1 and m["kernel"] and "quiet" in m
    inp = res["input"]
    assert inp["v4"] > 1500 and inp["v6"] > 300 and inp["garbage_lines"] == 0
    # Builds: both sizes of both families for offlow, with times and memory.
    ours = {(b["family"], b["size"]) for b in res["builds"] if b["table"].startswith("offlow")}
    assert ours == {(f, s) for f in (4, 6) for s in ("250", "full")}
    for b in res["builds"]:
        if b["table"].startswith("offlow"):
            assert b["build_s"]["min"] <= b["build_s"]["median"] <= b["build_s"]["max"]
            assert b["memory"] > 0
    full4 = [b for b in res["builds"] if b["table"] == "offlow lpm4" and b["size"] == "full"]
    assert full4[0]["routes"] == inp["v4"]
    # Lookups: offlow scalar and batched, both families and distributions, and IPv4's
    # vector path (the one the CPU and OFFLOW_SIMD chose, named), agreeing.
    rows = _offlow_rows(res)
    assert {(r["family"], r["dist"], r["lookup"]) for r in rows} == {
        (f, d, k) for f in (4, 6) for d in router.DISTS
        for k in ("offlow scalar", "offlow batched", "offlow vector")
        if f == 4 or k != "offlow vector"}
    assert res["simd"] in ("scalar", "avx2", "avx512")
    assert f"elements): the {res['simd']} path" in text
    assert "CPU features: " in text
    for r in rows:
        assert r["disagreements"] == 0, r
        assert r["compared"] == r["addresses"] == TINY.addresses
        s = r["mlps"]
        assert s["n"] == TINY.lookup_reps and 0 < s["min"] <= s["median"] <= s["max"]
    # Verdicts: one per target and distribution, each judged or saying why not.
    assert len(res["verdicts"]) == 2 * len(router.DISTS)
    lines = [ln for ln in text.splitlines() if ln.startswith("verdict:")]
    assert len(lines) == len(res["verdicts"])
    for ln in lines:
        assert ln.endswith(("meets", "misses")) or "not judged (" in ln


def test_quick_bench_on_a_slice(slice_file: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out_json, out_png = tmp_path / "router.json", tmp_path / "router.png"
    res = router.run(quick=True, out_json=out_json, out_png=out_png, prefixes=slice_file,
                     sweep=TINY)
    text = capsys.readouterr().out
    _check_common(res, text)
    assert json.loads(out_json.read_text()) == json.loads(json.dumps(res))
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Per IPv6 build: the trie's share and the batch's path.
    six = [b for b in res["builds"] if b["table"] == "offlow lpm6" and b["build_s"]]
    assert six and all(0 < b["trie_memory"] < b["memory"] and b["simd"] in
                       ("scalar", "avx2", "avx512") for b in six)
    for b in six:
        assert f"IPv6 offlow lpm6 {b['size']}: trie " in text and f"batch path {b['simd']}" in text
    dp = res["dpdk"]
    if dp["available"]:
        # Every DPDK table built, every lookup agreeing with offlow.
        assert dp["version"] and dp["reason"] is None
        tables = {(b["family"], b["table"]) for b in res["builds"] if not b.get("skipped")}
        assert {(4, "rte_lpm"), (4, "rte_fib"), (6, "rte_lpm6"), (6, "rte_fib6")} <= tables
        peers = [r for r in res["lookups"] if r["side"] == "dpdk"]
        names = {(r["family"], r["lookup"]) for r in peers}
        assert {(4, "rte_lpm"), (4, "rte_fib"), (6, "rte_lpm6"), (6, "rte_fib6")} <= names
        for r in peers:
            assert r["mlps"] is not None and r["disagreements"] == 0, r
        # offlow's lookups were timed in both programs, agreeing in both.
        assert {r["process"] for r in _offlow_rows(res)} == {"offlow", "dpdk"}
        # Ratios pair the repetitions of the DPDK program.
        for r in res["ratios"]:
            assert len(r["per_rep"]) == TINY.lookup_reps
            assert r["min"] <= r["ratio"] <= r["max"]
        assert res["ratios"] and all(v["ratio"] is not None for v in res["verdicts"])
        assert f"DPDK {dp['version']}" in text
    else:
        assert dp["reason"], "no DPDK numbers and no reason"
        assert f"DPDK not available: {dp['reason']}" in text
        assert all(v["ratio"] is not None or v["why"] for v in res["verdicts"])


def test_without_dpdk_offlow_is_measured_alone(slice_file: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(router, "setup_dpdk", lambda: (None, "no apt-get here (test)"))
    out_json = tmp_path / "router.json"
    res = router.run(quick=True, out_json=out_json, out_png=None, prefixes=slice_file,
                     sweep=TINY)
    text = capsys.readouterr().out
    _check_common(res, text)
    assert res["dpdk"] == {"available": False, "version": None,
                           "reason": "no apt-get here (test)"}
    assert "DPDK not available: no apt-get here (test)" in text
    assert not [b for b in res["builds"] if not b["table"].startswith("offlow")]
    skipped = [r for r in res["lookups"] if r["side"] == "dpdk"]
    assert skipped and all(r["mlps"] is None and "no apt-get here" in r["skipped"]
                           for r in skipped)
    assert res["ratios"] == [] and all(v["ratio"] is None for v in res["verdicts"])
    assert json.loads(out_json.read_text())["dpdk"]["reason"] == "no apt-get here (test)"


def test_slices_and_addresses() -> None:
    routes = np.zeros(10, dtype=common_routes.V4)
    routes["addr"] = np.arange(10)
    assert list(common_routes.take(routes, 5)["addr"]) == [0, 2, 4, 6, 8]
    assert len(common_routes.take(routes, None)) == 10 and len(common_routes.take(routes, 99)) == 10
    # Hits lie inside the prefix they were drawn from.
    r4 = np.zeros(3, dtype=common_routes.V4)
    r4["addr"] = [0x0A000000, 0xC0000200, 0]
    r4["len"] = [8, 24, 0]
    a = common_routes.addresses4(r4, 1000, np.random.default_rng(1))
    nets = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("192.0.2.0/24"),
            ipaddress.ip_network("0.0.0.0/0")]
    assert all(any(ipaddress.IPv4Address(int(x)) in n for n in nets) for x in a["hits"])
    assert len(set(a["random"].tolist())) > 990
    r6 = np.zeros(1, dtype=common_routes.V6)
    r6["addr"][0] = list(ipaddress.IPv6Address("2001:db8::").packed)
    r6["len"] = 33
    a6 = common_routes.addresses6(r6, 500, np.random.default_rng(2))
    net = ipaddress.ip_network("2001:db8::/33")
    assert all(ipaddress.IPv6Address(bytes(x)) in net for x in a6["hits"])
    assert a6["random"].shape == (500, 16)


@pytest.mark.parametrize("level", ["scalar", ""])
def test_the_bench_names_the_path_offlow_simd_forces(level: str, slice_file: Path,
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The path the report names comes from the runtime (ofl_simd_level), so forcing
    OFFLOW_SIMD=scalar shows; unset, it is the CPU's widest, never below AVX2 on a CPU
    whose flags list avx2."""
    monkeypatch.setenv("OFFLOW_SIMD", level)
    summary, _, _ = common_routes.load_routes(common_routes.build_offlow(), slice_file,
                                              tmp_path)
    avx2 = "avx2" in (Path("/proc/cpuinfo").read_text().split())
    want = {"scalar"} if level or not avx2 else {"avx2", "avx512"}
    assert summary["simd"] in want


def test_quick_lookups_use_the_full_table() -> None:
    """--quick takes fewer addresses, not a slice of the table (issue 29, item 4)."""
    assert router.QUICK.lookup_size is None and router.FULL.lookup_size is None
    assert router.QUICK.addresses < router.FULL.addresses


def test_a_missing_prefix_file_is_one_error_that_names_offlow_data(tmp_path: Path) -> None:
    """Both ways in (the lookups bench and the sweeps' base) refuse a missing table with
    the message of the other route benches (common.routes.prefix_file)."""
    missing = tmp_path / "no-table.txt"
    with pytest.raises(OfflowError, match=r"prefix file not found: .*no-table\.txt "
                                          r"\(\$OFFLOW_DATA names the shared data\)"):
        router.measure(missing, TINY)
    with pytest.raises(OfflowError, match=r"\$OFFLOW_DATA"):
        router._base(missing, quick=True)


def test_rte_lpm_full_build_is_estimated_before_it_is_tried() -> None:
    # Quadratic from two points: 10k in 0.01 s, 100k in 1 s -> ~81 s for 900k.
    why = router._lpm_skip({10_000: 0.01, 100_000: 1.0}, 900_000, 30.0)
    assert why and "estimated 81 s" in why and "quadratic" in why and "30 s budget" in why
    assert router._lpm_skip({10_000: 0.01, 100_000: 1.0}, 900_000, 100.0) is None
    assert router._lpm_skip({}, 900_000, 1.0) is None


def test_verdict_lines() -> None:
    v = {"family": 4, "dist": "hits", "ours": "offlow batched", "peer": "rte_fib",
         "target": 1.25, "ratio": 1.5, "best_peer": "rte_fib", "meets": True}
    assert router.verdict_line(v).endswith("1.50x (fastest peer lookup: rte_fib) vs target "
                                           "1.25x: meets")
    v.update(ratio=1.1, meets=False)
    assert router.verdict_line(v).endswith("misses")
    v.update(ratio=None, meets=None, why="DPDK not available: x")
    assert router.verdict_line(v).endswith("not judged (DPDK not available: x)")


def test_dpdk_setup_says_why_it_cannot_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "pkg_config", lambda *a: None)
    real_which = peers.shutil.which
    monkeypatch.setattr(peers.shutil, "which",
                        lambda name: None if name == "apt-get" else real_which(name))
    assert peers.setup_dpdk() == (None, "libdpdk-dev is not installed and there is no "
                                         "apt-get to install it")
    monkeypatch.setattr(peers.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(peers.os, "geteuid", lambda: 1000)
    assert peers.setup_dpdk() == (None, "libdpdk-dev is not installed and installing it "
                                         "needs root")
    monkeypatch.setattr(peers, "pkg_config", lambda *a: "22.11.11")
    assert peers.setup_dpdk() == ("22.11.11", None)


def test_dpdk_setup_installs_with_apt_get(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # Stand-ins on PATH: pkg-config finds libdpdk once "installed"; apt-get install
    # fails until apt-get update ran (a fresh machine without package lists).
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "log"
    (bin_ / "pkg-config").write_text(
        f"#!/bin/sh\n[ -e {tmp_path}/installed ] || exit 1\n"
        "[ \"$1\" = --modversion ] && echo 22.11.99\nexit 0\n")
    (bin_ / "apt-get").write_text(
        f"#!/bin/sh\necho \"$@\" >> {log}\n"
        f"if [ \"$1\" = update ]; then touch {tmp_path}/lists; exit 0; fi\n"
        f"[ -e {tmp_path}/lists ] || {{ echo 'E: Unable to locate package' >&2; exit 100; }}\n"
        f"touch {tmp_path}/installed\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{peers.os.environ['PATH']}")
    monkeypatch.setattr(peers.os, "geteuid", lambda: 0)
    assert peers.setup_dpdk() == ("22.11.99", None)
    assert log.read_text().splitlines() == ["install -y -qq libdpdk-dev", "update -qq",
                                            "install -y -qq libdpdk-dev"]
    out = capsys.readouterr().out
    assert "apt-get install -y -qq libdpdk-dev" in out and "installed DPDK 22.11.99" in out
    # Still failing after the update: the reason carries apt-get's last words.
    (tmp_path / "installed").unlink()
    (tmp_path / "lists").unlink()
    (bin_ / "apt-get").write_text("#!/bin/sh\n[ \"$1\" = update ] && exit 0\n"
                                  "echo 'E: Unable to locate package libdpdk-dev' >&2\n"
                                  "exit 100\n")
    version, why = peers.setup_dpdk()
    assert version is None
    assert why == ("apt-get install libdpdk-dev failed (exit 100): E: Unable to locate "
                   "package libdpdk-dev")


def _lpm_programs() -> list[Path]:
    """bench_lpm, and bench_dpdk_lpm where libdpdk is installed."""
    exes = [common_routes.build_offlow()]
    if peers.pkg_config("--modversion") is not None:
        exes.append(router.build_dpdk())
    return exes


def test_lpm_programs_refuse_bad_route_and_address_files(tmp_path: Path) -> None:
    """Both LPM programs read their inputs with lpm_bench.c: a routes file that is not
    whole records, an address argument without NAME=, and an address count that is
    not a positive multiple of the burst each end the program with a message."""
    import struct
    import subprocess

    routes = tmp_path / "r4.bin"
    routes.write_bytes(b"".join(struct.pack("<IHBx", a, h, n) for a, h, n in
                                ((0, 1, 0), (0x0A000000, 2, 8), (0xC0A80000, 3, 16))))
    ragged = tmp_path / "ragged.bin"
    ragged.write_bytes(bytes(8 * 3 + 5))
    few = tmp_path / "few.u32"
    few.write_bytes(bytes(4 * 63))             # one short of a burst
    none = tmp_path / "none.u32"
    none.write_bytes(b"")
    ok = tmp_path / "ok.u32"
    ok.write_bytes(bytes(4 * 64))
    def run(exe: Path, rfile: Path, *addrs: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(exe), "4", str(rfile), "1", "0", "1", "0.0001", "0",
                               str(tmp_path), *addrs], capture_output=True, text=True,
                              timeout=120)

    for exe in _lpm_programs():
        res = run(exe, ragged, f"a={ok}")
        assert res.returncode == 1 and "not a whole number of 8-byte records" in res.stderr
        res = run(exe, routes, str(ok))
        assert res.returncode == 2 and "expected NAME=ADDRS" in res.stderr
        for bad in (few, none):
            res = run(exe, routes, f"a={bad}")
            assert res.returncode == 2 and "not a positive multiple of 64" in res.stderr
        res = run(exe, routes, f"a={ok}")
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["addresses"] == [64] and out["routes"] == 3
