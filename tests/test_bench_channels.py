"""`offlow bench channels` runs with tiny counts: its result is well formed, every
measured figure is positive, the ratios follow from the numbers, and UCX is either
measured or reported unavailable with a reason. No timing is asserted."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import channels

TINY = channels.Sweep(lat_batches=5, lat_per=10, bulk_lat_sizes=(64, 4096),
                      sizes=(4096, 1 << 20), reps=4, conc=8, pingpong_batches=20,
                      pipe_batches=4, copy_reps=3, ucx_lat_iters=2000, ucx_bw_bytes=1 << 22,
                      ucx_reps=1, tput_procs=2)
STATS_KEYS = {"n", "min", "max", "mean", "std", "median"}


def _stats_dicts(x: object) -> Iterator[dict]:
    """Every statistics object (min/max/mean/std/median/n) inside x."""
    if isinstance(x, dict):
        if STATS_KEYS <= x.keys():
            yield x
        for v in x.values():
            yield from _stats_dicts(v)
    elif isinstance(x, list):
        for v in x:
            yield from _stats_dicts(v)


def _check_stats(s: dict, n: int | None = None) -> None:
    assert s["min"] > 0 and s["std"] >= 0
    assert s["min"] <= s["median"] <= s["max"]
    assert s["min"] * (1 - 1e-9) <= s["mean"] <= s["max"] * (1 + 1e-9)
    if n is not None:
        assert s["n"] == n


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path, str]:
    folder = tmp_path_factory.mktemp("bench_channels")
    out, png = folder / "channels.json", folder / "channels.png"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        res = channels.run(False, out, png, sweep=TINY, install=False)
    return res, out, png, buf.getvalue()


def test_result_is_well_formed_and_positive(result: tuple[dict, Path, Path, str]) -> None:
    res, out, png, _ = result
    assert json.loads(out.read_text()) == json.loads(json.dumps(res))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for s in _stats_dicts(res):
        _check_stats(s)
    # Ceilings.
    assert [r["size"] for r in res["copy"]["rows"]] == list(TINY.sizes)
    for r in res["copy"]["rows"]:
        for k in ("memcpy_gbps", "pvr_gbps", "crc32c_gbps", "crc32c_copy_gbps",
                  "xcore_memcpy_gbps", "xcore_crc32c_copy_gbps"):
            _check_stats(r[k], TINY.copy_reps)
    _check_stats(res["pingpong"]["rtt_ns"], TINY.pingpong_batches)
    _check_stats(res["pipe"]["rtt_ns"], TINY.pipe_batches)
    # Latency: direct both ways, the round trip, bulk both ways at each size.
    lat = res["lat"]
    assert (lat["batches"], lat["per"]) == (TINY.lat_batches, TINY.lat_per)
    keys = {(r["kind"], r["dir"], r["size"], r["timed_on"]) for r in lat["rows"]}
    want = {("direct", "h2d", 56, "host"), ("direct", "d2h", 56, "device"),
            ("direct_rtt", "rtt", 56, "host")}
    want |= {("bulk", "h2d", s, "host") for s in TINY.bulk_lat_sizes}
    want |= {("bulk", "d2h", s, "device") for s in TINY.bulk_lat_sizes}
    assert keys == want and len(lat["rows"]) == len(want)
    for r in lat["rows"]:
        _check_stats(r["per_msg_ns"], TINY.lat_batches)
    rtt = channels.lat_row(res, "direct_rtt", "rtt", 56)
    assert rtt is not None
    for k in ("pingpong_paired_ns", "ratio_to_pingpong", "pingpong_harness_paired_ns",
              "ratio_to_pingpong_harness"):
        _check_stats(rtt[k], TINY.lat_batches)
    assert rtt["pingpong_paired_on"] == "the channel's message lines"
    # Throughput: every configuration at every size.
    got = {(t["dir"], t["k"], t["serve"], t["copy"]) for t in res["tput"]}
    assert got == {(d, TINY.conc if many else 1, s, c) for d, many, s, c in channels.CONFIGS}
    for t in res["tput"]:
        assert [r["size"] for r in t["rows"]] == list(TINY.sizes)
        assert (t["reps"], t["processes"]) == (TINY.reps, TINY.tput_procs)
        for r in t["rows"]:
            for k in ("gbps", "memcpy_paired_gbps", "ratio_to_memcpy"):
                _check_stats(r[k], TINY.reps)
            assert len(r["samples"]["gbps"]) == len(r["samples"]["memcpy_paired_gbps"]) == TINY.reps
        # Every byte the device moved went by some copy path: K transfers per
        # repetition and per process's warm-up, at each size.
        moved = sum(t["device_copy_bytes"].values())
        assert moved == t["k"] * (TINY.reps + TINY.tput_procs) * sum(TINY.sizes)
        # Registered buffers: the one-copy path only; plain ones: never it.
        assert t["device_copy_bytes"]["mem"] == (moved if t["copy"] == "mem" else 0)
    assert res["machine"]["cpus"] >= 1


def test_ucx_is_measured_or_unavailable_with_a_reason(
        result: tuple[dict, Path, Path, str]) -> None:
    res, _, _, text = result
    ucx = res["ucx"]
    if ucx["available"]:
        assert ucx["tls"] == channels.UCX_TLS
        _check_stats(ucx["lat"]["rtt_ns"], TINY.ucx_reps)
        _check_stats(ucx["lat"]["rtt_p50_ns"], TINY.ucx_reps)
        _check_stats(ucx["lat"]["ratio_to_pingpong"], TINY.ucx_reps)
        assert [r["size"] for r in ucx["bw"]] == list(TINY.sizes)
        for r in ucx["bw"]:
            _check_stats(r["gbps"], TINY.ucx_reps)
            _check_stats(r["ratio_to_memcpy"], TINY.ucx_reps)
        assert "UCX tag_bw" in text
    else:
        assert isinstance(ucx["reason"], str) and ucx["reason"]
        assert f"UCX not available: {ucx['reason']}" in text
    missing = channels.measure_ucx("/nonexistent/ucx_perftest", None, TINY)
    assert missing["available"] is False and "could not run" in missing["reason"]
    absent = channels.measure_ucx(None, "not installed here", TINY)
    assert absent == {"available": False, "reason": "not installed here"}


def test_ratios_follow_from_the_numbers(result: tuple[dict, Path, Path, str]) -> None:
    res, _, _, text = result
    rat = res["ratios"]
    assert rat == json.loads(json.dumps(channels.ratios(res)))
    rtt = channels.lat_row(res, "direct_rtt", "rtt", 56)
    assert rtt is not None
    r = rat["rtt_vs_pingpong"]
    assert r["paired_median"] == rtt["ratio_to_pingpong"]["median"]
    assert r["means"] == pytest.approx(
        rtt["per_msg_ns"]["mean"] / rtt["pingpong_paired_ns"]["mean"])
    assert r["harness_paired_median"] == rtt["ratio_to_pingpong_harness"]["median"]
    assert r["standalone_medians"] == pytest.approx(
        rtt["per_msg_ns"]["median"] / res["pingpong"]["rtt_ns"]["median"])
    for t, r in zip(res["tput"], rat["bulk_vs_memcpy"], strict=True):
        for row, x in zip(t["rows"], r["rows"], strict=True):
            assert x["paired_median"] == row["ratio_to_memcpy"]["median"]
            assert x["means"] == pytest.approx(
                row["gbps"]["mean"] / row["memcpy_paired_gbps"]["mean"])
    names = [v["name"] for v in rat["verdicts"]]
    assert any("ping-pong" in n for n in names)
    assert sum("/ memcpy" in n for n in names) == len(res["tput"])
    xceil = {c["size"]: c["xcore_crc32c_copy_gbps"]["mean"] / c["memcpy_gbps"]["mean"]
             for c in res["copy"]["rows"]}
    for v in rat["verdicts"]:
        if "/ memcpy" in v["name"]:  # each bulk target beside the ceiling at its size
            assert v["ceiling"] == pytest.approx(xceil[v["size"]])
            below = "itself below the target" in channels.verdict_line(v)
            assert below == (v["ceiling"] < v["target"])
        if v["met"] is not None:
            ok = v["value"] <= v["target"] if v["at_most"] else v["value"] >= v["target"]
            assert v["met"] == ok
        line = channels.verdict_line(v)
        assert line in text
        assert line.endswith(("MET", "MISSED")) or "NOT JUDGED" in line
    if res["ucx"]["available"]:
        u = res["ucx"]["lat"]
        assert rat["rtt_vs_ucx"]["medians"] == pytest.approx(
            rtt["per_msg_ns"]["median"] / u["rtt_p50_ns"]["median"])
        assert rat["rtt_vs_ucx"]["normalised"] == pytest.approx(
            rtt["ratio_to_pingpong_harness"]["median"] / u["ratio_to_pingpong"]["median"])
        bw = {b["size"]: b for b in res["ucx"]["bw"]}
        for t, r in zip(res["tput"], rat["bulk_vs_ucx"], strict=True):
            for row, x in zip(t["rows"], r["rows"], strict=True):
                u = bw[row["size"]]
                assert x["medians"] == pytest.approx(
                    row["gbps"]["median"] / u["gbps"]["median"])
                assert x["value"] == x["normalised"] == pytest.approx(
                    row["ratio_to_memcpy"]["median"] / u["ratio_to_memcpy"]["median"])
    else:
        assert any(v["met"] is None for v in rat["verdicts"])
    # The receiver's bound: copy+CRC32C over memcpy at each size, from the same run.
    bound = ", ".join(
        f"{channels._label(c['size'])} "
        f"{c['crc32c_copy_gbps']['mean'] / c['memcpy_gbps']['mean']:.2f}x"
        for c in res["copy"]["rows"])
    assert f"copy+CRC32C / memcpy (means): {bound}\n" in text
    # The receiving core's ceiling, and one transfer's rate over it (>= 1M only).
    xbound = ", ".join(
        f"{channels._label(c['size'])} "
        f"{c['xcore_crc32c_copy_gbps']['mean'] / c['memcpy_gbps']['mean']:.2f}x"
        for c in res["copy"]["rows"])
    assert f"copy+CRC32C x-core / memcpy (means): {xbound}\n" in text
    xc = {c["size"]: c["xcore_crc32c_copy_gbps"]["mean"] for c in res["copy"]["rows"]}
    x1 = [t for t in res["tput"] if t["k"] == 1]
    assert [x["config"] for x in rat["bulk_vs_receiver"]] == [channels._tput_name(t) for t in x1]
    for t, x in zip(x1, rat["bulk_vs_receiver"], strict=True):
        big = [r for r in t["rows"] if r["size"] >= channels.TARGET_MIN_SIZE]
        assert [r["size"] for r in x["rows"]] == [r["size"] for r in big]
        for r, v in zip(big, x["rows"], strict=True):
            assert v["means"] == pytest.approx(r["gbps"]["mean"] / xc[r["size"]])
    # The Table-2 shape: the paper's figures printed beside ours.
    assert "NFComms Table 2" in text
    for fig in ("17.99", "30.04", "39.42", "51.96"):
        assert fig in text


def test_throughput_runs_of_several_processes_are_merged() -> None:
    def run(g: list[float], m: list[float], vm: int) -> dict:
        return {"mode": "tput", "k": 1, "reps": len(g), "pinned": True,
                "device_copy_bytes": {"bounce": 10, "vm": vm},
                "rows": [{"size": 4096, "samples": {"gbps": g, "memcpy_paired_gbps": m},
                          "gbps": {}, "memcpy_paired_gbps": {}, "ratio_to_memcpy": {}}]}
    # The second process ran slow all along: the medians are the first's.
    t = channels.merge_tput([run([10.0, 12.0], [20.0, 20.0], 1), run([2.0], [40.0], 2),
                             run([11.0, 9.0], [10.0, 30.0], 0)])
    assert (t["reps"], t["processes"], t["pinned"]) == (5, 3, True)
    assert t["device_copy_bytes"] == {"bounce": 30, "vm": 3}
    (r,) = t["rows"]
    assert r["samples"]["gbps"] == [10.0, 12.0, 2.0, 11.0, 9.0]
    assert r["gbps"]["n"] == 5 and r["gbps"]["median"] == 10.0
    assert r["memcpy_paired_gbps"]["median"] == 20.0
    # Each transfer over the memcpy timed just before it, not medians over medians.
    assert r["ratio_to_memcpy"]["median"] == 0.5
    assert r["ratio_to_memcpy"]["max"] == 1.1 and r["ratio_to_memcpy"]["min"] == 0.05


def test_verdicts_say_met_or_missed() -> None:
    v = {"name": "x", "value": 1.2, "target": 1.5, "at_most": True, "met": True}
    assert channels.verdict_line(v).endswith("1.20x: MET")
    v = {"name": "y", "value": 0.5, "size": 1 << 20, "target": 0.8, "at_most": False,
         "met": False}
    assert channels.verdict_line(v).endswith("0.50x at 1M: MISSED")
    v["ceiling"] = 0.63   # below the target: the line says so
    assert channels.verdict_line(v).endswith(
        "0.50x at 1M (one receiving thread's ceiling there, copy+CRC32C x-core / memcpy, "
        "means: 0.63x, itself below the target): MISSED")
    v["ceiling"] = 0.9
    assert channels.verdict_line(v).endswith("means: 0.90x): MISSED")
    v = {"name": "z", "value": None, "target": 1.0, "at_most": True, "met": None,
         "why": "no UCX"}
    assert "NOT JUDGED (no UCX)" in channels.verdict_line(v)


@pytest.mark.parametrize("args", [
    [], ["nope"], ["copy", "4097", "3"], ["copy", "4096", "0"], ["lat", "5", "10", ""],
    ["tput", "h2d", "0", "thr", "4096", "3"], ["tput", "d2h", "8", "serve", "4096", "3"],
    ["tput", "sideways", "1", "thr", "4096", "3"], ["pingpong", "10", "x"],
    ["tput", "h2d", "17", "thr", "4096", "3"], ["copy", "4096,,8", "3"],
    ["tput", "h2d", "8", "mgr", "4096", "3", "mem"], ["tput", "d2h", "8", "mgr", "4096", "3", "vm"],
])
def test_bad_arguments_are_refused(args: list[str]) -> None:
    exe = channels.build()
    res = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "usage:" in res.stderr and res.stdout == ""


def test_without_ucx_the_ucx_targets_are_not_judged(
        result: tuple[dict, Path, Path, str]) -> None:
    res = {**result[0], "ucx": {"available": False, "reason": "no ucx_perftest here"}}
    rat = channels.ratios(res)
    assert "rtt_vs_ucx" not in rat and all(not c["rows"] for c in rat["bulk_vs_ucx"])
    ucx = [v for v in rat["verdicts"] if "UCX" in v["name"]]
    assert len(ucx) == 2 and all(v["met"] is None for v in ucx)
    assert all("NOT JUDGED (no ucx_perftest here)" in channels.verdict_line(v) for v in ucx)
    text = channels.format_report(res, rat)
    assert "UCX not available: no ucx_perftest here" in text


CRC_PATHS = ("avx512+vpclmulqdq", "avx2+vpclmulqdq", "sse4.2", "table")


def test_report_names_the_crc_path_and_the_cpu(result: tuple[dict, Path, Path, str]) -> None:
    res, _, _, text = result
    path = res["copy"]["crc_path"]
    assert path in CRC_PATHS
    # Every mode's program ran the same path (one process environment).
    assert {r["crc_path"] for r in res["tput"]} | {res["lat"]["crc_path"]} == {path}
    assert f"CPU features: {' '.join(res['features']) or 'none of'}" in text
    assert f"CRC32C path (copy+CRC32C of 256 B and more): {res['copy']['crc_path']}" in text
    assert f": {path}\n" in text
    lacks = "this CPU lacks AVX-512" in text
    assert lacks == ("avx512f" not in res["features"])
    if lacks:
        assert path != "avx512+vpclmulqdq"
    # The same result read as a CPU without AVX-512 says where the bound is.
    other = {**res, "features": [f for f in res["features"] if not f.startswith("avx512")]}
    assert "this CPU lacks AVX-512" in channels.format_report(other, channels.ratios(other))


@pytest.mark.parametrize("level", ["scalar", "avx2"])
def test_the_bench_reports_the_path_a_level_forces(level: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    feats = channels.cpu_features()
    want = {"scalar": "sse4.2" if "sse4_2" in feats else "table",
            "avx2": "avx2+vpclmulqdq" if {"avx2", "vpclmulqdq"} <= set(feats) else None}[level]
    if want is None:
        pytest.skip("CPU lacks avx2 or vpclmulqdq")
    monkeypatch.setenv("OFFLOW_SIMD", level)
    exe = channels.build()
    res = subprocess.run([str(exe), "copy", "4096", "1"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["crc_path"] == want
