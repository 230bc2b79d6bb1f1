"""`offlow bench kvs --quick`: every available design serves the loadgen (ops > 0, no
errors), the table has a row per design, the JSON holds the settings, machine, raw runs
and ratios, the PNG is written; designs whose program file is missing are listed as not
available. No timing is asserted. Skipped, with the reason, only where memcached cannot
be had (as tests/test_kvs_interop.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from offlow.bench import kvs
from offlow.kvs.tools import setup_memcached

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    path, why = setup_memcached()
    if path is None:
        pytest.skip(f"memcached unavailable: {why}")
    tmp = tmp_path_factory.mktemp("bench_kvs")
    out, png = tmp / "kvs.json", tmp / "kvs.png"
    proc = subprocess.run([sys.executable, "-m", "offlow.cli", "bench", "kvs", "--quick",
                           "--json-out", str(out), "--png", str(png)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout, png


def test_every_available_design_is_served(result: tuple[dict, str, Path]) -> None:
    res, text, _ = result
    names = [e["name"] for e in res["designs"]]
    assert names == [d.name for d in kvs.DESIGNS]
    for e in res["designs"]:
        if not e["available"]:
            assert e["why"] and e["runs"] == []
            assert f"{e['name']}" in text and f"not available: {e['why']}" in text
            continue
        assert len(e["runs"]) == res["settings"]["repeat"] == 1
        for r in e["runs"]:
            assert r["failed"] is None, (e["name"], r["failed"])
            assert r["ops"] > 0 and r["ops_per_s"] > 0 and r["errors"] == 0
            assert 0 < r["hit_rate"] <= 1
            assert 0 < r["latency_ns"]["p50"] <= r["latency_ns"]["p99"]
            assert r["warmup"]["sets"] == res["settings"]["keys"]
        s = e["summary"]
        assert s["ok_runs"] == 1 and s["ops_per_s"]["min"] <= s["ops_per_s"]["median"]
        p = e["placement"]
        assert p["busy_threads"] == p["server"]["threads"] + p["client"]["threads"]
        if p["busy_threads"] > p["cpus"]:
            assert p["oversubscribed"] and f"warning: {e['name']}: oversubscribed" in text
    # the two offlow designs that exist today
    by = {e["name"]: e for e in res["designs"]}
    for name in ("cpu", "split"):
        assert by[name]["available"] and by[name]["kind"] == "offlow"
        assert by[name]["placement"]["server"]["loops"]
    assert by["cpu"]["lines"]["total"] == 0
    assert by["split"]["lines"] == {"vs": "cpu", "code": 0, "settings": 1, "total": 1,
                                    "step": {"from": "cpu", "floem_lines": 15, "code": 0,
                                             "settings": 1, "total": 1}}


def test_table_ratios_and_verdict(result: tuple[dict, str, Path]) -> None:
    res, text, png = result
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("design "))
    for col in ("ops/s", "p50 us", "p99 us", "hit", "err", "vs memcached", "server threads",
                "lines vs cpu"):
        assert col in lines[head]
    rows = [line.split()[0] for line in lines[head + 2:head + 2 + len(res["designs"])]]
    assert rows == [e["name"] for e in res["designs"]]
    rat = res["ratios"]
    peer = next(e for e in res["designs"] if e["name"] == "memcached")
    for e in res["designs"]:
        if e["name"] == "memcached" or not e["available"]:
            continue
        r = rat["per_design"][e["name"]]
        want = e["runs"][0]["ops_per_s"] / peer["runs"][0]["ops_per_s"]
        assert r["values"] == pytest.approx([want])
        assert r["min"] <= r["median"] <= r["max"]
    v = rat["verdict"]
    assert v["design"] in rat["per_design"] and v["met"] == (v["value"] >= 1.0)
    verdict = [line for line in lines if line.startswith("verdict: ")]
    assert verdict == [kvs.verdict_line(v)]
    assert f"({v['design']}) vs memcached: " in verdict[0]
    assert verdict[0].endswith("meets" if v["met"] else "misses")
    m = res["machine"]
    assert m["cpus"] >= 1 and len(m["loadavg_before"]) == 3 and "busy_before" in m
    assert {"duration", "repeat", "cores", "client_cpu", "conns", "depth", "keys"} <= set(
        res["settings"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_program_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    ghost = kvs.Design("ghost", "offlow", "a program not written yet",
                       "examples/no_such_program.py", ("cache.policy=write_back",))
    monkeypatch.setattr(kvs, "DESIGNS", (*kvs.DESIGNS, ghost))
    res = kvs.measure(kvs.QUICK, ["ghost"], progress=False)
    (e,) = res["designs"]
    assert not e["available"] and e["why"] == "examples/no_such_program.py missing"
    assert e["runs"] == [] and e["summary"]["ops_per_s"] is None
    assert res["ratios"]["verdict"]["met"] is None
    text = kvs.format_report(res)
    assert "ghost      not available: examples/no_such_program.py missing" in text
    assert "not judged" in text


def test_lines_count_code_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text('"""doc"""\n\nx = 1\n# note\ny = 2\n')
    b.write_text('"""other doc\nmore"""\nx = 1\ny = 3\nz = 4\n')
    monkeypatch.setattr(kvs, "ROOT", tmp_path)
    da = kvs.Design("a", "offlow", "", "a.py", ("s.device=nic",))
    db = kvs.Design("b", "offlow", "", "b.py", ("s.device=host", "t.x=1"))
    assert kvs.lines_changed(da, db) == {"code": 2, "settings": 2, "total": 4}
