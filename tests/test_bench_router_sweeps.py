"""The sweeps of `offlow bench router` beyond the lookups, on tiny settings: the offload
batch size sweep (bench_offload.c, plain and under ASan+UBSan), the packet size sweep,
and l3fwd beside the router (measured, or unavailable with a reason). The results are
well formed and every answer checked is right; no timing is asserted."""

from __future__ import annotations

import ipaddress
import json
import signal
import struct
import subprocess
from pathlib import Path

import dpkt
import numpy as np
import pytest

from benchmarks import router, router_fwd, router_l3fwd, router_offload, router_sweeps
from benchmarks.common import routes as common_routes
from offlow.errors import OfflowError
from tests.ctools import build_c, run_c
from tests.router_slice import write_slice

OFFLOAD = router_offload.OffloadSweep(batches=(32, 256, 4096), addresses=2048,
                                      lat_lookups=4096, stream_lookups=8192, depth=2, reps=2)
SIZES = router_fwd.SizeSweep(sizes=(64, 1500), duration=0.05, reps=1, count=1000)
VECTOR = router_fwd.VectorSweep(duration=0.05, reps=2, count=1000)
L3FWD = router_l3fwd.L3fwdSweep(cases=((4, 64), (6, 128)), duration=0.2, warmup=0.1, reps=1,
                                packets=256)


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 1,000 IPv4 and 200 IPv6 prefixes."""
    return write_slice(tmp_path_factory, 1002, 200)


@pytest.fixture(scope="module")
def routes(slice_file: Path, tmp_path_factory: pytest.TempPathFactory,
           ) -> tuple[np.ndarray, np.ndarray]:
    work = tmp_path_factory.mktemp("dump")
    _, r4, r6 = common_routes.load_routes(common_routes.build_offlow(), slice_file, work)
    return r4, r6


# ---- offload batch size sweep ----------------------------------------------------------


def test_offload_sweep(slice_file: Path, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    res = router.run(quick=True, out_json=out_json, out_png=out_png, prefixes=slice_file,
                     sweeps="offload", offload=OFFLOAD)
    text = capsys.readouterr().out
    assert res["sweeps"] == ["offload"] and "lookups" not in res
    assert json.loads(out_json.read_text()) == json.loads(json.dumps(res))
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    off = res["offload"]
    assert [f["family"] for f in off["families"]] == [4, 6]
    for f in off["families"]:
        assert f["request_entry_bytes"] == (16 if f["family"] == 4 else 32)
        assert f["response_entry_bytes"] == 16 and f["roi_bytes"] in (4, 16)
        assert f["routes"] == res["input"][f"v{f['family']}"]
        assert f["oversubscribed"] == (f["cpus"] < 2)
        assert [b["batch"] for b in f["batches"]] == list(OFFLOAD.batches)
        sent = 0
        for b in f["batches"]:
            lat = b["latency_ns"]
            assert 0 < lat["min"] <= lat["p50"] <= lat["p99"]
            assert b["latency_batches"] >= 50 and b["sync_mlps"] > 0
            assert len(b["stream_mlps"]) == OFFLOAD.reps and min(b["stream_mlps"]) > 0
            assert b["stream"]["min"] <= b["stream"]["median"] <= b["stream"]["max"]
            assert b["checked"] == OFFLOAD.addresses and b["mismatches"] == 0
            sent += (b["latency_batches"] + b["latency_batches"] // 10 + 2
                     + b["stream_batches"] * OFFLOAD.reps) * b["batch"]
        # The NIC answered exactly what the host sent.
        assert f["nic_lookups"] == sent
    assert "offload batch size sweep, IPv4" in text and "offload batch size sweep, IPv6" in text
    assert ": 0 wrong" in text


@pytest.fixture(scope="module")
def offload_exe() -> dict[str, Path]:
    srcs = [router_offload.SRC]
    return {"plain": build_c(srcs, "bench_offload", ["lpm"]),
            "asan": build_c(srcs, "bench_offload", ["lpm"], sanitize=True)}


def _addr_file(tmp_path: Path, routes: tuple[np.ndarray, np.ndarray], family: int) -> Path:
    rng = np.random.default_rng(3)
    gen = common_routes.addresses4 if family == 4 else common_routes.addresses6
    a = gen(routes[0] if family == 4 else routes[1], 1000, rng)["hits"]
    p = tmp_path / f"a{family}.bin"
    np.ascontiguousarray(a).tofile(p)
    return p


@pytest.mark.parametrize("kind", ["plain", "asan"])
@pytest.mark.parametrize("family", [4, 6])
def test_offload_program_checks_its_answers(kind: str, family: int, slice_file: Path,
                                            tmp_path: Path, offload_exe: dict[str, Path],
                                            routes: tuple[np.ndarray, np.ndarray]) -> None:
    """Batch sizes that do not divide the address count, a batch of 1 and batches
    larger than it; every first answer checked; clean under the sanitizers."""
    win = Path("/dev/shm") / f"offlow-test-offload-{kind}-{family}-{tmp_path.name}"
    r = run_c(offload_exe[kind], str(family), str(slice_file), "16",
              str(_addr_file(tmp_path, routes, family)), "1,3,64,2048", "3000", "3000", "3",
              "2", "0", "1", str(win))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [b["batch"] for b in out["batches"]] == [1, 3, 64, 2048]
    assert all(b["checked"] == 1000 and b["mismatches"] == 0 for b in out["batches"])
    assert not win.exists()


def test_offload_program_bad_input(tmp_path: Path, slice_file: Path,
                                   offload_exe: dict[str, Path]) -> None:
    exe = offload_exe["plain"]
    win = tmp_path / "win"  # never created: the arguments are refused first
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x02\x03\x04\x05")
    for args, msg in (([], "usage"),
                      (["5", str(slice_file), "16", str(odd), "32"], "bad arguments"),
                      (["4", str(slice_file), "16", str(empty), "32"], "non-empty list"),
                      (["4", str(slice_file), "16", str(odd), "32"], "non-empty list"),
                      (["4", str(slice_file), "16", str(odd), "0"], "bad arguments"),
                      (["4", str(slice_file), "16", str(odd), "70000"], "bad arguments")):
        full = args + ["1000", "1000", "2", "1", "0", "1", str(win)] if len(args) == 5 else args
        r = subprocess.run([str(exe), *full], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    # A prefix file that does not exist: the NIC says so, the host stops, no window left.
    a4 = tmp_path / "a4.bin"
    np.arange(16, dtype=np.uint32).tofile(a4)
    shm = Path("/dev/shm") / f"offlow-test-offload-missing-{tmp_path.name}"
    r = subprocess.run([str(exe), "4", str(tmp_path / "nope.txt"), "16", str(a4), "32",
                        "1000", "1000", "2", "1", "0", "1", str(shm)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "cannot build the table" in r.stderr, r.stderr
    assert not shm.exists()


# ---- packet size sweep -------------------------------------------------------------------


def test_size_sweep(slice_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = router.run(quick=True, prefixes=slice_file, sweeps=["sizes"], sizes=SIZES)
    text = capsys.readouterr().out
    sz = res["sizes"]
    assert {(r["size"], r["placement"]) for r in sz["rows"]} == {
        (s, p) for s in SIZES.sizes for p in router_fwd.PLACEMENTS}
    for r in sz["rows"]:
        assert r["why"] is None, r["why"]
        (run,) = r["runs"]
        assert run["out"] == run["in"] > 0 and not run["drops"] and not run["errors"]
        # Every synthetic frame has the size asked for: Gb/s follows from Mpps.
        assert r["gbps"]["median"] == pytest.approx(r["mpps"]["median"] * r["size"] * 8e-3)
        cpus = sz["placements"][r["placement"]]["cpus"]
        assert r["mpps_per_cpu"]["median"] == pytest.approx(r["mpps"]["median"] / len(cpus))
    assert sz["placements"]["one core"]["threads"] == 1
    assert sz["placements"]["as placed"]["threads"] == 3
    assert "packet size sweep" in text and "1500 | one core" in text


def test_vector_sweep_runs_both_lookups_in_turns(slice_file: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    res = router.run(quick=True, prefixes=slice_file, sweeps=["vector"], vector=VECTOR)
    text = capsys.readouterr().out
    vr = res["vector"]
    assert [r["placement"] for r in vr["rows"]] == list(router_fwd.PLACEMENTS)
    for r in vr["rows"]:
        assert r["why"] is None, r["why"]
        for m in router_fwd.MODES:
            assert len(r["runs"][m]) == VECTOR.reps
            assert all(x["out"] == x["in"] > 0 and not x["drops"] and not x["errors"]
                       for x in r["runs"][m])
        assert r["ratio"]["min"] <= r["ratio"]["median"] <= r["ratio"]["max"]
    assert vr["placements"]["one core"]["vector"] == ["lpm4", "lpm6"]
    assert vr["placements"]["as placed"]["vector"] == ["lpm4", "lpm6"]
    assert "vector vs per-packet lookups" in text and "ratio vector/per-packet" in text
    off = router_fwd.lookups("as placed", "per packet")
    assert not off.segments["route"].vector and router_fwd.lookups("one core", "vector")


def test_one_core_program_has_every_element() -> None:
    one, placed = router_fwd.program("one core"), router_fwd.program("as placed")
    assert list(one.segments) == ["all"]
    names = sorted(e.name for s in placed.segments.values() for e in s.elements)
    assert sorted(e.name for e in one.segments["all"].elements) == names
    with pytest.raises(OfflowError, match="unknown placement"):
        router_fwd.program("two cores")


# ---- l3fwd beside the router ---------------------------------------------------------------


def _check_l3fwd(res: dict, text: str) -> None:
    l3 = res["l3fwd"]
    assert l3["routes"]["v4"] > 0 and l3["routes"]["v6"] > 0
    assert [(c["family"], c["size"]) for c in l3["cases"]] == list(L3FWD.cases)
    for c in l3["cases"]:
        # offlow always forwards the pcap, in both placements, every packet.
        for p in router_fwd.PLACEMENTS:
            assert c[p]["mpps"] and c[p]["mpps"]["median"] > 0, c[p]
            assert all(r["out"] == r["in"] and not r["drops"] for r in c["runs"][p])
    info = l3["l3fwd"]
    assert len(l3["verdicts"]) == len(L3FWD.cases)
    if info["available"]:
        assert info["dpdk"] and info["reason"] is None and info["capacity"]
        assert [ch["family"] for ch in l3["checks"]] == [4, 6]
        assert all(ch["ok"] and ch["forwarded"] == ch["sent"] == L3FWD.packets
                   for ch in l3["checks"])
        for c in l3["cases"]:
            assert c["l3fwd"]["mpps"]["median"] > 0
            assert c["runs"]["l3fwd"][0]["errors"]["oerrors"] == 0
            assert c["ratios"]["one core"]["cpus"] == 1
        assert all(v["ratio"] is not None for v in l3["verdicts"])
        assert "l3fwd changed in one place" in text
    else:
        assert info["reason"]
        assert f"l3fwd not measured: {info['reason']}" in text
        assert all(v["ratio"] is None and v["why"] for v in l3["verdicts"])
    assert "verdict: router IPv4 64 B" in text


def test_l3fwd_beside_the_router(slice_file: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    out_png = tmp_path / "r.png"
    res = router.run(quick=True, prefixes=slice_file, sweeps="l3fwd", l3fwd=L3FWD,
                     out_png=out_png)
    _check_l3fwd(res, capsys.readouterr().out)
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_l3fwd_unavailable_is_reported(slice_file: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(router_l3fwd, "setup_dpdk", lambda: (None, "no apt-get here (test)"))
    one = router_l3fwd.L3fwdSweep(cases=((4, 64),), duration=0.05, reps=1, packets=64)
    res = router.run(quick=True, prefixes=slice_file, sweeps="l3fwd", l3fwd=one)
    text = capsys.readouterr().out
    l3 = res["l3fwd"]
    assert l3["l3fwd"]["available"] is False
    assert l3["l3fwd"]["reason"] == "no apt-get here (test)"
    assert "l3fwd not measured: no apt-get here (test)" in text
    assert l3["cases"][0]["one core"]["mpps"]["median"] > 0
    assert l3["cases"][0]["runs"]["l3fwd"] == [] and l3["cases"][0]["ratios"] == {}
    assert "not judged (l3fwd not measured: no apt-get here (test))" in text


def _with_dpkts_checksums(frame: bytes) -> bytes:
    """`frame` (Ethernet, IPv4 or IPv6, UDP) with its IPv4 header and UDP checksums
    zeroed and computed again by dpkt as it writes the frame out: an oracle
    independent of offlow.netsum, which built them."""
    eth = dpkt.ethernet.Ethernet(frame)
    ip = eth.data
    assert isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)) and isinstance(ip.data, dpkt.udp.UDP)
    if isinstance(ip, dpkt.ip.IP):
        ip.sum = 0
    ip.data.sum = 0
    return bytes(eth)


def test_frames_and_pcap(tmp_path: Path, routes: tuple[np.ndarray, np.ndarray]) -> None:
    r4, r6 = (router_l3fwd.slice_routes(r, 50) for r in routes)
    assert len(r4) == 50 and (r4["len"] > 0).all()
    nets4 = [ipaddress.ip_network((int(a), int(n))) for a, n in zip(r4["addr"], r4["len"],
                                                                     strict=True)]
    nets6 = [ipaddress.ip_network((bytes(a), int(n))) for a, n in zip(r6["addr"], r6["len"],
                                                                      strict=True)]
    for family, size in ((4, 64), (4, 1500), (6, 64), (6, 333)):
        pk = router_l3fwd.frames(family, size, r4 if family == 4 else r6, 40, seed=1)
        p = tmp_path / f"x{family}-{size}.pcap"
        router_l3fwd.write_pcap(p, pk)
        assert router_l3fwd.read_pcap(p) == pk
        for f in pk:
            assert len(f) == size
            if family == 4:
                ip = f[14:34]
                assert ip[8] == 64
                dst = ipaddress.IPv4Address(ip[16:20])
                assert any(dst in n for n in nets4)
            else:
                ip = f[14:54]
                assert ip[7] == 64 and struct.unpack("!H", ip[4:6])[0] == size - 54
                dst = ipaddress.IPv6Address(ip[24:40])
                assert any(dst in n for n in nets6)
            assert _with_dpkts_checksums(f) == f
    with pytest.raises(OfflowError, match="does not fit"):
        router_l3fwd.frames(6, 61, r6, 1, seed=1)


def test_rules_and_capacity(tmp_path: Path, routes: tuple[np.ndarray, np.ndarray]) -> None:
    r4, r6 = (router_l3fwd.slice_routes(r, 20) for r in routes)
    files = router_l3fwd.write_rules(r4, r6, tmp_path)
    v4 = files["rule_ipv4"].read_text().splitlines()
    assert len(v4) == 20 and all(s.startswith("R") and s.endswith(" 0") for s in v4)
    assert len(files["rule_ipv6"].read_text().splitlines()) == 20
    prefixes = files["prefixes"].read_text().splitlines()
    assert prefixes == [s[1:-2] for s in v4] + [
        s[1:-2] for s in files["rule_ipv6"].read_text().splitlines()]
    assert all(ipaddress.ip_network(s).prefixlen > 0 for s in prefixes)
    src = tmp_path / "l3fwd"
    src.mkdir()
    (src / "l3fwd_lpm.c").write_text("#define IPV4_L3FWD_LPM_MAX_RULES         1024\n"
                                     "#define IPV4_L3FWD_LPM_NUMBER_TBL8S (1 << 8)\n"
                                     "#define IPV6_L3FWD_LPM_MAX_RULES         512\n")
    assert router_l3fwd.lpm_capacity(src) == {"IPV4_L3FWD_LPM_MAX_RULES": 1024,
                                              "IPV4_L3FWD_LPM_NUMBER_TBL8S": 256,
                                              "IPV6_L3FWD_LPM_MAX_RULES": 512}
    (src / "l3fwd_lpm.c").write_text("nothing here\n")
    with pytest.raises(OfflowError, match="cannot read"):
        router_l3fwd.lpm_capacity(src)


def test_choose_sweeps() -> None:
    assert router_sweeps.choose(None, False) == router_sweeps.SWEEPS
    assert router_sweeps.choose(None, True) == ("lookups",)
    assert router_sweeps.choose("l3fwd,offload", False) == ("offload", "l3fwd")
    assert router_sweeps.choose(["sizes"], True) == ("sizes",)
    assert router_sweeps.choose("all", True) == router_sweeps.SWEEPS
    with pytest.raises(OfflowError, match="unknown sweep"):
        router_sweeps.choose("offload,bogus", False)
    with pytest.raises(OfflowError, match="unknown sweep"):
        router_sweeps.choose([], False)


# ---- the router on a DPDK port beside l3fwd and I/O forwarding ------------------------------


def test_router_on_a_dpdk_port_beside_l3fwd_and_io_forwarding(
        slice_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import router_ports

    tiny = router_ports.PortSweep(duration=0.2, warmup=0.1, reps=1, packets=256,
                                  instructions=1.0)
    res = router.run(quick=True, prefixes=slice_file, sweeps="ports", ports=tiny)
    text = capsys.readouterr().out
    p = res["ports"]
    if "error" in p and "DPDK is not available" in p["error"]:
        pytest.skip(p["error"])
    assert p["errors"] == [], p["errors"]
    # every side forwarded (offlow: every packet it read came out, router_fwd.forward)
    assert all(p["mpps"][k] > 0 for k in ("offlow", "l3fwd", "basicfwd"))
    assert "offlow / io forwarding" in text and "(goal 0.8x: " in text
    # and per CPU-second of each forwarding thread (what holds on a busy machine)
    assert "per CPU-second: offlow / io forwarding" in text
    assert set(p["mpps_per_cpu_s"]) == {"offlow", "l3fwd", "basicfwd"}
    # offlow's: its core thread's CPU time, never more than the run's time (but for the
    # two clocks' skew: a thread alone on its CPU gets about all of it)
    assert p["mpps_per_cpu_s"]["offlow"] >= 0.9 * p["mpps"]["offlow"]
    # l3fwd beside the ceiling too, so that the report quotes all three ratios
    assert "l3fwd / io forwarding" in text and p["ratio"]["l3fwd_io"] > 0
    # instructions per packet of each forwarding loop (callgrind), counted over full
    # bursts: offlow's packets are its run's own count, the peers' 32 per receive call
    ins = p["instructions"]
    if "error" in ins and "not installed" in ins["error"]:
        return
    assert not any("error" in ins[k] for k in ("offlow", "l3fwd", "basicfwd")), ins
    assert all(ins[k]["full_bursts"] for k in ("offlow", "l3fwd")), ins
    assert all(ins[k]["packets"] > 0 for k in ("offlow", "l3fwd", "basicfwd")), ins
    # a router does more per packet than forwarding alone (parse, TTL, lookup, rewrite)
    assert ins["basicfwd"]["per_packet"] < ins["l3fwd"]["per_packet"], ins
    assert ins["basicfwd"]["per_packet"] < ins["offlow"]["per_packet"], ins
    assert "instructions per packet of the forwarding loop" in text


def test_a_peer_started_with_sigint_ignored_stops_on_its_signal(tmp_path: Path) -> None:
    """A bench run from a shell's background job starts its peers with SIGINT ignored;
    the peer's stop ends DPDK's skeleton (no handler of its own) by its signal, not by
    the SIGKILL 10 s later (it was stopped with SIGINT: killed after 10 s each run)."""
    from benchmarks import router_ports

    _, info = router_l3fwd.setup()
    if info.get("reason"):
        pytest.skip(f"DPDK is not available: {info['reason']}")
    exe = router_ports.build_skeleton()
    pcap = tmp_path / "in.pcap"
    routes = np.array([(0x0A000000, 8, 1)], dtype=[("addr", "<u4"), ("len", "u1"),
                                                   ("hop", "<u2")])
    router_l3fwd.write_pcap(pcap, router_l3fwd.frames(4, 64, routes, 8, 1))
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job has it
    try:
        with router_ports.Basicfwd(exe, 0, pcap, tmp_path / "fwd.log") as fwd:
            fwd.wait_loop()
    finally:
        signal.signal(signal.SIGINT, old)
    assert fwd.proc is not None and fwd.proc.returncode == -signal.SIGTERM, fwd.tail()
