"""`offlow bench xdp --quick` runs its three XDP lookups and the harness in the kernel
(BPF_PROG_TEST_RUN), for IPv4 and IPv6, per packet and in batches, and every answer of
every lookup is checked against offlow's scalar lookup; a program that answers wrong,
or skips an address, fails the run. Skips with the kernel's reason where BPF or a
network namespace is refused."""

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


def _run(sweep: xdp.Sweep, out: Path, png: Path) -> dict:
    try:
        return xdp.run(quick=True, out_json=out, sweep=sweep, out_png=png)
    except xdp.Refused as e:
        pytest.skip(str(e))


def test_quick_bench_checks_every_answer(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    res = _run(xdp.QUICK, tmp_path / "xdp.json", tmp_path / "xdp.png")
    assert json.loads((tmp_path / "xdp.json").read_text()) == res
    assert (tmp_path / "xdp.png").stat().st_size > 0
    q = xdp.QUICK
    assert res["batch"] > 1 and q.addresses % res["batch"] == 0
    assert res["routes"] == q.routes and res["sweep"]["passes"] == q.passes
    assert res["build_s"] > 0 and res["groups"] >= 0 and res["blocks"] > 0
    assert {(p["family"], p["name"]) for p in res["programs"]} == {
        (f, n) for f, names in PROGRAMS.items() for n in names}
    assert all(p["load_s"] > 0 for p in res["programs"] if p["name"] != xdp.HARNESS)
    assert 0 < res["routes6"] < res["input"]["v6_in_file"] and res["nodes6"] > 0
    runs = {(r["addresses"], r["mode"], r["program"]): r for r in res["runs"]}
    # every program of each family per packet and in batches, on every address set
    assert set(runs) == {(s + suffix, m, p) for f, suffix in ((4, ""), (6, "6"))
                         for s in ("hits", "random") for m in xdp.MODES for p in PROGRAMS[f]}
    for r in runs.values():
        assert r["n"] == q.addresses
        assert 0 < r["ns_min"] <= r["ns"] <= r["ns_max"]
        # every lookup's answer was compared with ofl_lpm4_lookup's (ofl_lpm6_lookup's;
        # the harness's with 0), and all agreed
        assert r["checked"] == q.addresses
        assert r["wrong"] == 0
    for m in xdp.MODES:
        for s, ratio in res["ratios"][m].items():
            mine = xdp.OFFLOW6 if s.endswith("6") else xdp.OFFLOW
            for peer in xdp.TARGETS:
                assert ratio[peer] == pytest.approx(runs[(s, m, peer)]["ns"]
                                                    / runs[(s, m, mine)]["ns"])
    text = capsys.readouterr().out
    assert "CPU features:" in text and "kernel fib" in text and "lpm trie" in text
    assert f"lookups per second ({res['batch']} per run" in text and "per packet (" in text
    verdicts = [line for line in text.splitlines() if line.startswith("verdict")]
    assert len(verdicts) == 2
    assert all(" meets " in v or " misses " in v for v in verdicts)
    assert all("a slice of the table" in v for v in verdicts)
    assert all("in lookups per second" in v and "(per packet: " in v for v in verdicts)


LPM_BPF = xdp.BPF_INPUTS[2]


def _mutated_run(tmp_path: Path, family: int, src: str, lpm_bpf: str | None = None,
                 long_only: bool = False) -> tuple[subprocess.CompletedProcess[str], str]:
    """The driver over TINY's routes and hits with the programs compiled from `src` (a
    mutation of bench_xdp.bpf.c; `lpm_bpf`: of lpm_bpf.h, which the copy includes from
    its own folder first); `long_only`: IPv4 hits inside prefixes longer than /24 only
    (all through tbl8). The driver's result and offlow's row of the family."""
    assert src != xdp.BPF_SRC.read_text() or lpm_bpf is not None
    if lpm_bpf is not None:
        (tmp_path / "offlow").mkdir()
        (tmp_path / "offlow" / "lpm_bpf.h").write_text(lpm_bpf)
    (tmp_path / xdp.BPF_HEADER.name).write_text(xdp.BPF_HEADER.read_text())
    (tmp_path / "wrong.bpf.c").write_text(src)
    obj = tmp_path / "wrong.bpf.o"
    compile_bpf(tmp_path / "wrong.bpf.c", obj, "the mutated program",
                [tmp_path / xdp.BPF_HEADER.name])
    _, exe = xdp.build()
    _, v4, v6 = load_routes(build_offlow(), DEFAULT_PREFIXES, tmp_path)
    v4, v6 = take(v4, TINY.routes), take(v6, TINY.routes)
    v4.tofile(tmp_path / "routes.bin")
    v6.tofile(tmp_path / "routes6.bin")
    rng = np.random.default_rng(SEED)
    if family == 4:
        if long_only:
            v4 = v4[v4["len"] > 24]
            assert len(v4) > 0
        addresses4(v4, TINY.addresses, rng)["hits"].astype("<u4").tofile(tmp_path / "hits")
        arg, mine = f"hits={tmp_path / 'hits'}", xdp.OFFLOW
    else:
        addresses6(v6, TINY.addresses, rng)["hits"].tofile(tmp_path / "hits")
        arg, mine = f"6:hits6={tmp_path / 'hits'}", xdp.OFFLOW6
    res = subprocess.run([str(exe), str(obj), str(tmp_path / "routes.bin"),
                          str(tmp_path / "routes6.bin"), "1", "1", arg],
                         capture_output=True, text=True)
    if res.returncode == xdp.EXIT_REFUSED:
        pytest.skip(res.stderr.strip())
    return res, mine


@pytest.mark.parametrize("family", [4, 6])
def test_a_wrong_answer_fails_the_run(family: int, tmp_path: Path) -> None:
    """The same driver with offlow's lookup reading a wrong entry (a mutation of
    lpm_bpf.h): the IPv4 lookup's tbl8 entry, the IPv6 lookup's leaf; the run ends with
    the first wrong answer named, offlow's rows (per packet and batch) the wrong ones."""
    src = LPM_BPF.read_text()
    wrong = src.replace("grp->e[addr & 0xFF]", "grp->e[(addr + 1) & 0xFF]") if family == 4 \
        else src.replace("(nd->leafvec & upto) - 1", "(nd->leafvec & upto)")
    assert wrong != src
    res, mine = _mutated_run(tmp_path, family, xdp.BPF_SRC.read_text(), lpm_bpf=wrong,
                             long_only=True)
    assert res.returncode == 1, res.stderr
    assert f"{mine}:" in res.stderr and "offlow's lookup says" in res.stderr
    doc = json.loads(res.stdout)
    bad = [(r["mode"], r["program"]) for r in doc["runs"] if r["wrong"]]
    assert bad == [(xdp.PACKET, mine), (xdp.BATCH, mine)]
    # (TINY's 1,000 addresses: 1,024 positions in batches of 32, the first 24 again)
    assert [r["checked"] for r in doc["runs"] if r["wrong"]] == [TINY.addresses, 1_024]
    assert doc["batch"] == 32


BATCH_RECORD = "        if (h) *h = hop;\n"   # (the batch loop's line, indented twice)
BATCH_STEP = "    c->i = batch_next(i, c->n);\n"


@pytest.mark.parametrize("family", [4, 6])
def test_a_batch_recording_a_wrong_hop_fails_the_run(family: int, tmp_path: Path) -> None:
    """The batch programs recording a wrong hop for one lookup in each batch: every batch
    row of the family (the harness's too) fails its check, no per-packet row does."""
    src = xdp.BPF_SRC.read_text()
    assert src.count(BATCH_RECORD) == 1
    res, _ = _mutated_run(tmp_path, family,
                          src.replace(BATCH_RECORD, "        if (h) *h = hop ^ (j == 7);\n"))
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert {r["program"] for r in doc["runs"] if r["wrong"]} == PROGRAMS[family]
    assert all(r["mode"] == xdp.BATCH for r in doc["runs"] if r["wrong"])
    # one lookup in 32 wrong: 32 of the 1,024 positions
    assert {r["wrong"] for r in doc["runs"] if r["wrong"]} == {32}


@pytest.mark.parametrize("family", [4, 6])
def test_a_cursor_not_moving_by_the_batch_fails_the_run(family: int, tmp_path: Path) -> None:
    """Batch programs moving the cursor on by one address, not B: the addresses past
    what the overlapping batches reach get no answer, and the run fails naming one."""
    src = xdp.BPF_SRC.read_text()
    assert src.count(BATCH_STEP) == 1
    res, mine = _mutated_run(tmp_path, family, src.replace(
        BATCH_STEP, "    c->i = i + 1 < c->n ? i + 1 : 0;\n"))
    assert res.returncode == 1, res.stderr
    assert "no hop recorded" in res.stderr
    doc = json.loads(res.stdout)
    bad = {r["program"]: r for r in doc["runs"] if r["wrong"]}
    assert set(bad) == PROGRAMS[family]
    assert all(r["mode"] == xdp.BATCH for r in bad.values())
    # 1,024 / 32 = 32 runs reach positions 0..62 only
    assert {r["wrong"] for r in bad.values()} == {1_024 - 63}


def _res(ns: dict[tuple[str, str, str], float], routes: int | None) -> dict:
    runs = [{"addresses": s, "mode": m, "program": p, "ns": v} for (s, m, p), v in ns.items()]
    return {"sweep": {"routes": routes}, "runs": runs,
            "ratios": {m: xdp.ratios(runs, m) for m in xdp.MODES}}


def test_verdicts_take_the_worst_address_set_in_lookups_per_second() -> None:
    b, p = xdp.BATCH, xdp.PACKET
    res = _res({("hits", b, xdp.OFFLOW): 10, ("hits", b, xdp.TRIE): 200,
                ("hits", b, xdp.FIB): 30, ("random", b, xdp.OFFLOW): 20,
                ("random", b, xdp.TRIE): 180, ("random", b, xdp.FIB): 40,
                # per packet (a harness of 30 ns in every row): not what the verdict takes
                ("hits", p, xdp.OFFLOW): 40, ("hits", p, xdp.TRIE): 230,
                ("hits", p, xdp.FIB): 60, ("random", p, xdp.OFFLOW): 50,
                ("random", p, xdp.TRIE): 210, ("random", p, xdp.FIB): 70}, None)
    assert res["ratios"][b]["hits"] == {xdp.TRIE: 20.0, xdp.FIB: 3.0}
    assert res["ratios"][p]["random"] == {xdp.TRIE: 4.2, xdp.FIB: 1.4}
    trie, fib = xdp.verdicts(res)
    assert trie.startswith("verdict offlow/lpm trie in lookups per second: 9.00x on random")
    assert trie.endswith("misses (per packet: 4.20x on random)")
    assert fib.startswith("verdict offlow/kernel fib in lookups per second: 2.00x on random")
    assert fib.endswith("meets (per packet: 1.40x on random)")


def test_keyed_bpf_objects_of_different_sources_do_not_replace_each_other(tmp_path: Path
                                                                           ) -> None:
    """Two checkouts sharing one cache folder (as `bench xdp`'s object does) build their
    own objects: a keyed object is named by its inputs, so one checkout's build of a changed
    source leaves the other's object in place (a fixed name made the later build replace
    the object the earlier one was about to load)."""
    body = "#include <linux/bpf.h>\nint f(struct xdp_md *c) {{ (void)c; return {}; }}\n"
    objs = []
    (tmp_path / "cache").mkdir()
    for n, verdict in enumerate(("XDP_PASS", "XDP_DROP")):
        src = tmp_path / f"co{n}" / "prog.bpf.c"
        src.parent.mkdir()
        src.write_text(body.format(verdict))
        objs.append(compile_bpf(src, tmp_path / "cache" / "prog.bpf.o", f"checkout {n}",
                                keyed=True))
    assert objs[0] != objs[1]
    assert objs[0].parent == objs[1].parent == tmp_path / "cache"
    assert objs[0].read_bytes() != objs[1].read_bytes()
    again = compile_bpf(tmp_path / "co0" / "prog.bpf.c", tmp_path / "cache" / "prog.bpf.o",
                        "checkout 0", keyed=True)
    assert again == objs[0]
