"""End to end: compile the example, run it split across host and emulated NIC, and
check the output against independent parsers (dpkt and scapy)."""

from __future__ import annotations

import os
import signal
import struct
import threading
import time
from collections import Counter
from pathlib import Path

import dpkt
import pytest
from scapy.layers.inet import IP

from offlow import cbuild
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.lifecycle import stop_signals
from offlow.report import summarize
from offlow.runner import Run, RunOptions, build_for, run
from tests.e2e import EXAMPLE, QUIC, ROOT, TLS, read_frames, run_example


def expected_forwarded(frames: list[bytes], mtu: int = 65535) -> list[bytes]:
    """What the pipeline should forward: IP packets with TTL > 1, TTL decremented;
    frames longer than `mtu` are dropped (and counted) at the source. The checksum is
    left to scapy to recompute (an independent oracle)."""
    out = []
    for f in frames:
        if len(f) > mtu:
            continue
        eth = dpkt.ethernet.Ethernet(f)
        if isinstance(eth.data, dpkt.ip.IP) and eth.data.ttl > 1:
            b = bytearray(f)
            b[14 + 8] -= 1
            ip = IP(bytes(b[14:]))
            del ip.chksum
            b[14:] = bytes(ip)
            out.append(bytes(b))
        elif isinstance(eth.data, dpkt.ip6.IP6) and eth.data.hlim > 1:
            b = bytearray(f)
            b[14 + 7] -= 1
            out.append(bytes(b))
    return out


@pytest.fixture(scope="module")
def tls_forwarded() -> tuple[bytes, ...]:
    """expected_forwarded(TLS's frames), worked out once (scapy recomputes each
    checksum: about half a second) for the tests that run TLS; a tuple: no test can
    change it for the next."""
    return tuple(expected_forwarded(read_frames(TLS)))


def classify(frames: list[bytes]) -> list[int]:
    """Counts per class (tls, quic, dns, other), computed with dpkt."""
    counts = [0, 0, 0, 0]
    for f in frames:
        ip = dpkt.ethernet.Ethernet(f).data
        l4 = ip.data
        ports = (getattr(l4, "sport", -1), getattr(l4, "dport", -1))
        if isinstance(l4, dpkt.tcp.TCP) and 443 in ports:
            counts[0] += 1
        elif isinstance(l4, dpkt.udp.UDP) and 443 in ports:
            counts[1] += 1
        elif isinstance(l4, dpkt.udp.UDP) and 53 in ports:
            counts[2] += 1
        else:
            counts[3] += 1
    return counts


@pytest.mark.parametrize("capture", [TLS, QUIC], ids=["tls", "quic"])
def test_pipeline_output_has_decremented_ttl_and_valid_checksums(
        capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(input=capture, output=out)
    assert s["ok"], s["errors"]
    got = read_frames(out)
    want = expected_forwarded(read_frames(capture))
    assert len(got) == len(want) > 100
    assert got == want
    # the program sets no mtu: the queues fit the capture's longest frame, none is lost
    assert s["mtu"] == max(2048, *(len(f) for f in read_frames(capture)))
    assert s["sources"]["rx"]["dropped"] == 0
    for f in got:
        ip = dpkt.ethernet.Ethernet(f).data
        if isinstance(ip, dpkt.ip.IP):
            hdr = f[14:14 + ip.hl * 4]
            assert sum(struct.unpack(f"!{len(hdr) // 2}H", hdr)) % 0xFFFF == 0


def test_class_counters_match_an_independent_classifier(
        tmp_path: Path, tls_forwarded: tuple[bytes, ...]) -> None:
    s = run_example(input=TLS)
    assert s["ok"], s["errors"]
    assert s["tables"]["class_counts"] == classify(list(tls_forwarded))


def test_moving_rx_to_the_host_changes_nothing_but_placement(tmp_path: Path) -> None:
    a, b = tmp_path / "nic.pcap", tmp_path / "host.pcap"
    s1 = run_example(input=TLS, output=a)
    s2 = run_example(["rx.device=host"], input=TLS, output=b)
    assert s1["ok"] and s2["ok"]
    assert [x["device"] for x in s2["segments"]] == ["host", "host"]
    assert read_frames(a) == read_frames(b)


def test_data_parallel_host_segment_delivers_every_packet_once(
        tmp_path: Path, tls_forwarded: tuple[bytes, ...]) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(["app.cores=0,1"], input=TLS, output=out, loops=3)
    assert s["ok"], s["errors"]
    want = list(tls_forwarded) * 3
    assert sorted(read_frames(out)) == sorted(want)


def test_core_group_delivers_every_packet_once_and_every_member_works(
        tmp_path: Path, tls_forwarded: tuple[bytes, ...]) -> None:
    out = tmp_path / "out.pcap"
    prog = load_program(EXAMPLE, ["app.cores=0,1,2", "app.group=on"])
    o = RunOptions(input=TLS, output=out, loops=3, timeout=60)
    b = build_for(prog, o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    assert sorted(read_frames(out)) == sorted(list(tls_forwarded) * 3)
    members = [c for dev in res.stats.values() for c in dev["cores"] if c["segment"] == "app"]
    assert sorted(c["core"] for c in members) == [0, 1, 2]
    assert all(c["pkts_in"] > 0 for c in members), members
    # only the master takes batches from the rings
    into_app = len([q for q in b.graph.queues if q.dst_segment == "app"])
    assert [len(c["queues"]) for c in sorted(members, key=lambda c: c["core"])] == [
        into_app, 0, 0]


def test_thread_copy_engine_gives_the_same_output(
        tmp_path: Path, tls_forwarded: tuple[bytes, ...]) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(input=TLS, output=out, copy_engine="thread")
    assert s["ok"], s["errors"]
    assert read_frames(out) == list(tls_forwarded)


def test_synthetic_traffic_is_counted_through_both_segments() -> None:
    s = run_example(count=5000, loops=2)
    assert s["ok"], s["errors"]
    rx, app = s["segments"]
    assert rx["packets"] == 10000
    assert app["packets"] == 10000 - rx["drops"]
    assert rx["seconds"] > 0 and app["seconds"] > 0  # each core's clock ran
    assert s["queues"][0]["packets"] == s["queues"][0]["delivered"] == app["packets"]


TEE = Path(__file__).resolve().parent / "programs" / "tee.py"


@pytest.mark.parametrize(("program", "placement"), [
    (EXAMPLE, []), (TEE, ["fwd.cores=0"])], ids=["own-threads", "shared-thread"])
def test_killing_the_nic_process_makes_the_host_exit_with_an_error(
        program: Path, placement: list[str]) -> None:
    """Also when the host's segments share one thread (tee: stats and fwd on core 0):
    what its waiter sees of the dead peer reaches both loops."""
    b = build(load_program(program, placement))
    assert ("ofl_thread_host_0" in b.sources["host.c"]) == bool(placement)
    r = Run(b, RunOptions(duration=30, timeout=20))
    r.start()
    try:
        time.sleep(0.5)
        assert r.procs["host"].poll() is None
        os.kill(r.procs["nic"].pid, signal.SIGKILL)
        r.procs["host"].wait(timeout=5)  # (a host that waited out its 30 s run fails here)
    finally:
        res = r.wait()
    assert r.procs["host"].returncode != 0
    assert not res.ok and any("nic process died" in e for e in res.errors)


@pytest.mark.parametrize(("program", "placement", "sig"), [
    (EXAMPLE, [], signal.SIGTERM), (TEE, ["fwd.cores=0"], signal.SIGINT)],
    ids=["own-threads-sigterm", "shared-thread-sigint"])
def test_stopping_a_synthetic_run_ends_it_cleanly_with_its_counts(
        program: Path, placement: list[str], sig: signal.Signals) -> None:
    """Run.stop() (Ctrl-C) on a run that would last 30 s: the sources end, the queues
    drain, both processes exit 0 and every packet the source made is accounted for."""
    b = build(load_program(program, placement), werror=True)
    r = Run(b, RunOptions(duration=30, timeout=20))
    r.start()
    try:
        time.sleep(0.5)
        assert all(p.poll() is None for p in r.procs.values())
        r.stop(sig)
        for p in r.procs.values():
            p.wait(timeout=5)  # (not the 30 s the run would last)
    finally:
        res = r.wait()
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    made = sum(v["packets"] for v in s["sources"].values())
    assert made > 0
    rx = next(x for x in s["segments"] if x["segment"] == "rx")
    assert rx["packets"] == made
    for q in s["queues"]:  # what entered a queue came out of it: nothing lost at the stop
        assert q["delivered"] == q["packets"] > 0


def test_ctrl_c_in_wait_stops_the_run_cleanly_and_says_so() -> None:
    """A Ctrl-C (SIGINT to this process) while wait() watches a 30 s run: the run
    drains and returns its counts, marked interrupted."""
    b = build(load_program(EXAMPLE), werror=True)
    r = Run(b, RunOptions(duration=30, timeout=20))
    r.start()
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with stop_signals():  # a Ctrl-C even when pytest was started with SIGINT ignored
            res = r.wait()
    finally:
        timer.cancel()
    assert res.ok and res.interrupted, res.errors
    assert sum(v["packets"] for v in summarize(b.plan, res.stats)["sources"].values()) > 0


@pytest.mark.parametrize("cores", [["rx.cores=0"], ["rx.cores=0,1"]], ids=["one", "two-cores"])
def test_a_capture_cut_in_a_record_is_processed_up_to_the_cut_then_reported(
        cores: list[str], tmp_path: Path) -> None:
    """A capture cut in the middle of its ninth record (a copy interrupted, a full
    disk): the eight packets before the cut go through the program, then the run
    reports the cut, as tcpdump and tshark do, instead of refusing the whole file."""
    data = TLS.read_bytes()
    off = 24  # walk the records (pcap file format) to the ninth one
    for _ in range(8):
        off += 16 + struct.unpack_from("<I", data, off + 8)[0]
    caplen = struct.unpack_from("<I", data, off + 8)[0]
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:off + 16 + 20])
    out = tmp_path / "out.pcap"
    s = run_example(cores, input=cut, output=out)
    assert s["sources"]["rx"]["packets"] == 8
    assert sorted(read_frames(out)) == sorted(expected_forwarded(read_frames(TLS)[:8]))
    assert not s["ok"]
    assert s["errors"] == [f"source rx: {cut} is cut short or damaged after 8 packets (truncated "
                           f"dump file; tried to read {caplen} captured bytes, only got 20); "
                           "only those were read"]


def test_malformed_capture_is_dropped_and_counted_where_each_frame_fails(tmp_path: Path) -> None:
    from offlow.testing.malformed import malformed_cases, write_malformed_pcap

    capture, out = tmp_path / "bad.pcap", tmp_path / "out.pcap"
    want = write_malformed_pcap(capture)
    s = run_example(input=capture, output=out)
    assert s["ok"], s["errors"]
    el = s["elements"]
    assert el["eth"]["drop"] == want["bad_eth"]
    assert el["ip4"]["drop"] == want["bad_ipv4"]
    assert el["ip6"]["drop"] == want["bad_ipv6"]
    assert el["l4"]["drop"] == want["bad_l4"]
    assert el["non_ip"]["in"] == el["non_ip"]["consumed"] == want["other"]
    assert len(read_frames(out)) == want["valid_ipv4"] + want["valid_ipv6"]
    # the record cut by the capture's snap length never runs: counted at the source
    assert (s["sources"]["rx"]["packets"], s["sources"]["rx"]["cut_short"]) == (
        want["total"] - want["cut_short"], want["cut_short"])
    # each drop with its element's reason, as the capture's cases say
    at = {"bad_eth": "eth", "bad_ipv4": "ip4", "bad_ipv6": "ip6", "bad_l4": "l4"}
    reasons = Counter((at[c.category], c.reason) for c in malformed_cases()
                      if c.reason and not c.cut)
    assert {(e, r): n for e, v in el.items() for r, n in v["why"].items() if n} == reasons
    # and every frame accounted for in one place
    a = s["accounting"]
    assert (a["read"], a["forwarded"], a["unaccounted"]) == (
        want["total"], len(read_frames(out)), 0)
    assert sum(d["packets"] for d in a["dropped"]) == want["bad"]
    assert a["consumed"] == {"non_ip": want["other"]}


SANITIZE = cbuild.flags("sanitize")


@pytest.mark.parametrize(("engine", "placement"), [
    ("inline", ["app.cores=0,1"]), ("thread", ["app.cores=0,1,2", "app.group=on"]),
    ("inline", ["rx.device=host", "app.cores=0,1"])],
    ids=["inline-data-parallel", "thread-core-group", "inline-shared-core"])
def test_generated_program_is_clean_under_asan_and_ubsan(
        engine: str, placement: list[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The malformed capture through runtime and generated code built with sanitizers:
    any out-of-bounds access, undefined behaviour or leak fails a process."""
    from offlow.testing.malformed import write_malformed_pcap

    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    monkeypatch.setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    capture, out = tmp_path / "bad.pcap", tmp_path / "out.pcap"
    want = write_malformed_pcap(capture)
    b = build(load_program(EXAMPLE, placement), werror=True, extra_flags=SANITIZE)
    res = run(b, RunOptions(input=capture, output=out, loops=20, copy_engine=engine,
                            timeout=120))
    assert res.ok, res.errors
    assert len(read_frames(out)) == 20 * (want["valid_ipv4"] + want["valid_ipv6"])


def test_tiny_rings_apply_backpressure_without_loss(
        tmp_path: Path, tls_forwarded: tuple[bytes, ...]) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(["ring_size=4", "batch=2"], input=TLS, output=out, loops=4)
    assert s["ok"], s["errors"]
    assert read_frames(out) == list(tls_forwarded) * 4
    assert s["queues"][0]["doorbells"] >= s["queues"][0]["packets"] // 4


@pytest.mark.parametrize("device", ["nic", "host"])
def test_a_segment_with_its_source_and_sink_writes_every_packet_it_counts(
        device: str, tmp_path: Path) -> None:
    """tests/programs/xdp_ttl.py forwards every TLS frame from its source to its sink
    in one segment (no queue between): each one is in the capture, as it was read.
    (Regression: a source left `seg` of its packets as it found it, and the sink then
    cut some frames as UDP segments, or wrote nothing of them, while counting them.)"""
    out = tmp_path / "out.pcap"
    s = run_example([f"edge.device={device}"], ROOT / "tests" / "programs" / "xdp_ttl.py",
                    input=TLS, output=out)
    assert s["ok"], s["errors"]
    frames, sent = read_frames(out), read_frames(TLS)
    assert s["sinks"]["back"]["packets"] == len(frames) == len(sent)
    assert [len(f) for f in frames] == [len(f) for f in sent]
