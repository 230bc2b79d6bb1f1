"""`offlow bench kvs --quick` (runs of 0.3 s: --duration): under every workload (64 B
and 1 KB values over UDP, 64 KB over TCP) every available design serves the loadgen
(ops > 0, no errors), the tables have a row per design, the JSON holds the settings,
machine, raw runs, the ratios to memcached and to the echo ceiling, and the verdicts;
the PNG is written; designs whose program file is missing, or that do not serve a
transport, are listed as not available. No timing is asserted. Skipped, with the
reason, only where memcached cannot be had (as tests/test_kvs_interop.py)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import kvs
from offlow.kvs.tools import setup_memcached

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    path, why = setup_memcached()
    if path is None:
        pytest.skip(f"memcached unavailable: {why}")
    tmp = tmp_path_factory.mktemp("bench_kvs")
    out, png = tmp / "kvs.json", tmp / "kvs.png"
    # --duration (a user's option too): 0.3 s measured per run instead of --quick's 1 s;
    # every workload, design, warm-up and column is still there (no timing is asserted)
    proc = subprocess.run([sys.executable, "-m", "offlow.cli", "bench", "kvs", "--quick",
                           "--duration", "0.3", "--json-out", str(out), "--png", str(png)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout, png


def test_every_available_design_is_served(result: tuple[dict, str, Path]) -> None:
    res, text, _ = result
    assert [t["name"] for t in res["workloads"]] == ["64 B", "1 KB", "64 KB"]
    assert [(t["proto"], t["value_size"]) for t in res["workloads"]] == [
        ("udp", 64), ("udp", 1024), ("tcp", 65536)]
    for t in res["workloads"]:
        names = [e["name"] for e in t["designs"]]
        assert names == [d.name for d in kvs.DESIGNS]
        for e in t["designs"]:
            if not e["available"]:
                assert e["why"] and e["runs"] == []
                assert f"not available: {e['why']}" in text
                continue
            assert len(e["runs"]) == res["settings"]["repeat"] == 1
            for r in e["runs"]:
                assert r["failed"] is None, (t["name"], e["name"], r["failed"])
                assert r["ops"] > 0 and r["ops_per_s"] > 0 and r["errors"] == 0
                assert 0 < r["latency_ns"]["p50"] <= r["latency_ns"]["p99"]
                assert r["warmup"]["sets"] == t["keys"]
                if e["kind"] != "echo":   # the echo answers every GET as a miss
                    assert 0 < r["hit_rate"] <= 1
            s = e["summary"]
            assert s["ok_runs"] == 1 and s["ops_per_s"]["min"] <= s["ops_per_s"]["median"]
            p = e["placement"]
            assert p["busy_threads"] == p["server"]["threads"] + p["client"]["threads"]
    by = {e["name"]: e for e in res["workloads"][0]["designs"]}
    for name in ("cpu", "split"):
        assert by[name]["available"] and by[name]["kind"] == "offlow"
        assert by[name]["placement"]["server"]["loops"]
        if by[name]["placement"]["busy_threads"] > by[name]["placement"]["cpus"]:
            assert f"warning: {name}: oversubscribed" in text
    assert by["cpu"]["lines"]["total"] == 0
    assert by["split"]["lines"] == {"vs": "cpu", "code": 0, "settings": 1, "total": 1,
                                    "step": {"from": "cpu", "floem_lines": 15, "code": 0,
                                             "settings": 1, "total": 1}}
    assert by["udp_echo"]["available"] and by["udp_echo"]["kind"] == "echo"
    tcp = {e["name"]: e for e in res["workloads"][2]["designs"]}
    assert not tcp["udp_echo"]["available"] and not tcp["cache_wb"]["available"]
    assert "cache in front of the store" in tcp["cache_wb"]["why"]
    assert tcp["cpu"]["available"] and tcp["memcached"]["available"]


def test_tables_ratios_and_verdicts(result: tuple[dict, str, Path]) -> None:
    res, text, png = result
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("design ")]
    assert len(heads) == len(res["workloads"])
    for head, t in zip(heads, res["workloads"], strict=True):
        assert lines[head - 1].startswith(f"{t['name']} values over {t['proto'].upper()}")
        for col in ("ops/s", "p50 us", "p99 us", "hit", "err", "vs memcached", "vs ceiling",
                    "server threads", "lines vs cpu"):
            assert col in lines[head]
        rows = [line.split()[0] for line in lines[head + 2:head + 2 + len(t["designs"])]]
        assert rows == [e["name"] for e in t["designs"]]
        rat = t["ratios"]
        runs = {e["name"]: e["runs"] for e in t["designs"]}
        for e in t["designs"]:
            if not e["available"]:
                continue
            if e["name"] != "memcached":
                want = e["runs"][0]["ops_per_s"] / runs["memcached"][0]["ops_per_s"]
                assert rat["per_design"][e["name"]]["values"] == pytest.approx([want])
            if e["name"] != "udp_echo" and t["proto"] == "udp":
                want = e["runs"][0]["ops_per_s"] / runs["udp_echo"][0]["ops_per_s"]
                assert rat["vs_ceiling"][e["name"]]["values"] == pytest.approx([want])
        assert (t["proto"] == "tcp") == (rat["vs_ceiling"] == {})
    vm, vc = res["verdicts"]
    assert (vm["against"], vm["target"], vc["against"], vc["target"]) == (
        "memcached", 1.0, "udp_echo", 0.8)
    for v in (vm, vc):
        assert v["workload"] == "64 B" and v["met"] == (v["value"] >= v["target"])
        assert v["design"] in ("cpu", "split", "cache_wt", "cache_wb")
    verdict = [line for line in lines if line.startswith("verdict: ")]
    assert verdict == [kvs.verdict_line(vm), kvs.verdict_line(vc)]
    assert "vs udp_echo (the ceiling): " in verdict[1]
    m = res["machine"]
    assert m["cpus"] >= 1 and len(m["loadavg_before"]) == 3 and "busy_before" in m
    assert {"duration", "repeat", "cores", "client_cpu", "conns", "depth", "keys",
            "workloads"} <= set(res["settings"])
    assert res["settings"]["duration"] == 0.3  # the option given
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_program_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    ghost = kvs.Design("ghost", "offlow", "a program not written yet",
                       "examples/no_such_program.py", ("cache.policy=write_back",))
    monkeypatch.setattr(kvs, "DESIGNS", (*kvs.DESIGNS, ghost))
    res = kvs.measure(kvs.QUICK, ["ghost"], progress=False)
    for t in res["workloads"]:
        (e,) = t["designs"]
        assert not e["available"] and e["why"] == "examples/no_such_program.py missing"
        assert e["runs"] == [] and e["summary"]["ops_per_s"] is None
    assert [v["met"] for v in res["verdicts"]] == [None, None]
    text = kvs.format_report(res)
    assert "ghost      not available: examples/no_such_program.py missing" in text
    assert "not judged" in text


def test_an_unknown_workload_is_a_clear_error() -> None:
    from offlow.errors import OfflowError

    with pytest.raises(OfflowError, match="no kvs workload '2 KB'; workloads: 64 B, 1 KB"):
        kvs.workloads_of(dataclasses.replace(kvs.QUICK, workloads=("2 KB",)))


def test_lines_count_code_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text('"""doc"""\n\nx = 1\n# note\ny = 2\n')
    b.write_text('"""other doc\nmore"""\nx = 1\ny = 3\nz = 4\n')
    monkeypatch.setattr(kvs, "ROOT", tmp_path)
    da = kvs.Design("a", "offlow", "", "a.py", ("s.device=nic",))
    db = kvs.Design("b", "offlow", "", "b.py", ("s.device=host", "t.x=1"))
    assert kvs.lines_changed(da, db) == {"code": 2, "settings": 2, "total": 4}
