"""`offlow bench xdp --quick` runs its three XDP lookups and the harness in the kernel
(BPF_PROG_TEST_RUN), for IPv4 and IPv6, and every answer of every lookup is checked
against offlow's scalar lookup; a program that answers wrong fails the run. Skips with
the kernel's reason where BPF or a network namespace is refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchmarks import xdp
from benchmarks.common.routes import (
    SEED,
    addresses4,
    addresses6,
    build_offlow,
    load_routes,
    take,
)
from offlow.router.check import DEFAULT_PREFIXES
from offlow.targets.xdp import compile_bpf

PEERS = {xdp.HARNESS, xdp.TRIE, xdp.FIB}
PROGRAMS = {4: PEERS | {xdp.OFFLOW}, 6: PEERS | {xdp.OFFLOW6}}
TINY = xdp.Sweep(routes=3_000, addresses=1_000, passes=1, reps=1)


@pytest.fixture(autouse=True)
def _bpf() -> None:
    why = xdp.unusable()
    if why:
        pytest.skip(f"the kernel refuses BPF here: {why}")
    if not DEFAULT_PREFIXES.exists():
        pytest.skip(f"no BGP table at {DEFAULT_PREFIXES} ($OFFLOW_DATA)")


def _run(sweep: xdp.Sweep, out: Path) -> dict:
    try:
        return xdp.run(quick=True, out_json=out, sweep=sweep)
    except xdp.Refused as e:
        pytest.skip(str(e))


def test_quick_bench_checks_every_answer(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    res = _run(xdp.QUICK, tmp_path / "xdp.json")
    assert json.loads((tmp_path / "xdp.json").read_text()) == res
    q = xdp.QUICK
    assert res["routes"] == q.routes and res["sweep"]["passes"] == q.passes
    assert res["build_s"] > 0 and res["groups"] >= 0 and res["blocks"] > 0
    assert {(p["family"], p["name"]) for p in res["programs"]} == {
        (f, n) for f, names in PROGRAMS.items() for n in names}
    assert all(p["load_s"] > 0 for p in res["programs"] if p["name"] != xdp.HARNESS)
    assert 0 < res["routes6"] < res["input"]["v6_in_file"] and res["nodes6"] > 0
    runs = {(r["addresses"], r["program"]): r for r in res["runs"]}
    assert set(runs) == {(s + suffix, p) for f, suffix in ((4, ""), (6, "6"))
                         for s in ("hits", "random") for p in PROGRAMS[f]}
    for (_, prog), r in runs.items():
        assert r["n"] == q.addresses
        assert 0 < r["ns_min"] <= r["ns"] <= r["ns_max"]
        # every lookup's answer was compared with ofl_lpm4_lookup's (ofl_lpm6_lookup's),
        # and all agreed
        assert r["checked"] == (0 if prog == xdp.HARNESS else q.addresses)
        assert r["wrong"] == 0
    for s, ratio in res["ratios"].items():
        mine = xdp.OFFLOW6 if s.endswith("6") else xdp.OFFLOW
        for peer in xdp.TARGETS:
            assert ratio[peer] == pytest.approx(runs[(s, peer)]["ns"] / runs[(s, mine)]["ns"])
    text = capsys.readouterr().out
    assert "CPU features:" in text and "kernel fib" in text and "lpm trie" in text
    verdicts = [line for line in text.splitlines() if line.startswith("verdict")]
    assert len(verdicts) == 2
    assert all(" meets " in v or " misses " in v for v in verdicts)
    assert all("a slice of the table" in v for v in verdicts)


LPM_BPF = xdp.BPF_INPUTS[1]


@pytest.mark.parametrize("family", [4, 6])
def test_a_wrong_answer_fails_the_run(family: int, tmp_path: Path) -> None:
    """The same driver with offlow's lookup reading a wrong entry (a mutation of
    lpm_bpf.h beside a copy of bench_xdp.bpf.c, which includes it from its own folder
    first): the IPv4 lookup's tbl8 entry, the IPv6 lookup's leaf; the run ends with the
    first wrong answer named."""
    src = LPM_BPF.read_text()
    wrong = src.replace("grp->e[addr & 0xFF]", "grp->e[(addr + 1) & 0xFF]") if family == 4 \
        else src.replace("(nd->leafvec & upto) - 1", "(nd->leafvec & upto)")
    assert wrong != src
    (tmp_path / "offlow").mkdir()
    (tmp_path / "offlow" / "lpm_bpf.h").write_text(wrong)
    (tmp_path / "wrong.bpf.c").write_text(xdp.BPF_SRC.read_text())
    obj = tmp_path / "wrong.bpf.o"
    compile_bpf(tmp_path / "wrong.bpf.c", obj, "the mutated program")
    _, exe = xdp.build()
    _, v4, v6 = load_routes(build_offlow(), DEFAULT_PREFIXES, tmp_path)
    v4, v6 = take(v4, TINY.routes), take(v6, TINY.routes)
    v4.tofile(tmp_path / "routes.bin")
    v6.tofile(tmp_path / "routes6.bin")
    rng = np.random.default_rng(SEED)
    if family == 4:
        # only addresses inside prefixes longer than /24: all of them go through tbl8
        long = v4[v4["len"] > 24]
        assert len(long) > 0
        addresses4(long, TINY.addresses, rng)["hits"].astype("<u4").tofile(tmp_path / "hits")
        arg, mine = f"hits={tmp_path / 'hits'}", xdp.OFFLOW
    else:
        addresses6(v6, TINY.addresses, rng)["hits"].tofile(tmp_path / "hits")
        arg, mine = f"6:hits6={tmp_path / 'hits'}", xdp.OFFLOW6
    res = subprocess.run([str(exe), str(obj), str(tmp_path / "routes.bin"),
                          str(tmp_path / "routes6.bin"), "1", "1", arg],
                         capture_output=True, text=True)
    if res.returncode == xdp.EXIT_REFUSED:
        pytest.skip(res.stderr.strip())
    assert res.returncode == 1, res.stderr
    assert f"{mine}:" in res.stderr and "offlow's lookup says" in res.stderr
    doc = json.loads(res.stdout)
    bad = [r for r in doc["runs"] if r["wrong"]]
    assert [r["program"] for r in bad] == [mine]
    assert bad[0]["checked"] == TINY.addresses


def _res(ns: dict[tuple[str, str], float], routes: int | None) -> dict:
    runs = [{"addresses": s, "program": p, "ns": v} for (s, p), v in ns.items()]
    return {"sweep": {"routes": routes}, "ratios": xdp.ratios(runs)}


def test_verdicts_take_the_worst_address_set() -> None:
    res = _res({("hits", xdp.OFFLOW): 10, ("hits", xdp.TRIE): 200, ("hits", xdp.FIB): 30,
                ("random", xdp.OFFLOW): 20, ("random", xdp.TRIE): 180,
                ("random", xdp.FIB): 40}, None)
    assert res["ratios"]["hits"] == {xdp.TRIE: 20.0, xdp.FIB: 3.0}
    trie, fib = xdp.verdicts(res)
    assert trie.startswith("verdict offlow/lpm trie: 9.00x on random") and trie.endswith("misses")
    assert fib.startswith("verdict offlow/kernel fib: 2.00x on random") and fib.endswith("meets")
