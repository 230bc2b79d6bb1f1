"""The xdp target (offlow/targets/xdp.py): listed with the reason it cannot run here;
every construct it cannot run refused at compile time naming the element, the target
and the reason; a segment compiled to one XDP program that the kernel's verifier
accepts, and a verifier refusal reported at the element's body line."""

from __future__ import annotations

import gzip
import ipaddress
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dpkt
import jsonschema
import pytest

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.build import build, plan_program
from offlow.dsl.loader import load_program
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.elements.kvs import kv_store
from offlow.errors import OfflowError
from offlow.paths import DATA
from offlow.report import summarize
from offlow.router.reference import Reference, parse_line
from offlow.runner import Run, RunOptions, build_for, run
from offlow.targets import verifier, xdp
from offlow.testing.malformed import write_malformed_pcap
from tests.e2e import QUIC, ROOT, TLS, read_frames, run_example
from tests.e2e import one_segment as _one_segment
from tests.netns import veth_in_namespace

XDP_TTL = ROOT / "tests" / "programs" / "xdp_ttl.py"
XDP_ROUTER = ROOT / "tests" / "programs" / "xdp_router.py"
BGP = DATA / "bgp-full-table.txt.gz"
WHY_NOT = xdp.TARGET.unusable()
needs_bpf = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")


def test_xdp_says_why_it_cannot_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(xdp.shutil, "which", lambda name: None)
    assert xdp.TARGET.unusable() == (
        "missing package `clang` (the compiler of eBPF programs (clang -target bpf); "
        "apt-get install clang)")
    monkeypatch.undo()
    monkeypatch.setattr(xdp, "BPF_HEADERS", tmp_path / "bpf_helpers.h")
    assert xdp.TARGET.unusable() == (
        "missing package `libbpf-dev` (libbpf: the headers of eBPF programs and the library "
        "that loads them; apt-get install libbpf-dev)")
    monkeypatch.undo()
    monkeypatch.setattr(xdp, "kernel_refuses_bpf", lambda: "Operation not permitted (errno 1)")
    assert xdp.TARGET.unusable() == ("no device (the kernel refuses BPF programs: Operation "
                                     "not permitted (errno 1))")


@pytest.mark.skipif(xdp.os.geteuid() != 0, reason="loading BPF needs root here")
def test_the_kernel_probe_loads_a_program_as_root() -> None:
    assert xdp.kernel_refuses_bpf() is None


def _refusal(p: Program) -> str:
    with pytest.raises(OfflowError) as err:
        plan_program(p)
    return str(err.value)


class EthToEth(Element):
    """An element from frames to frames (its subclasses give the body)."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)


class Maker(EthToEth):
    body = r"""
    struct ofl_pkt copy = *pkt;   /* the same bytes, made anew */
    MAKE(out, &copy);
    """


class Giver(EthToEth):
    body = r"""
    if (pkt->len > 9000) { FAIL("a %u-byte frame: the link is misconfigured", pkt->len); }
    """


class Copier(Element):
    inputs = (Port("inp", "eth"),)
    outputs = (Port("a", "eth"), Port("b", "eth"))
    body = "SEND(a); SEND(b);"


class Stamp(EthToEth):
    fields = {"us": "uint64_t"}
    body = "state->us = pkt->ts_ns / 1000u;"


class Tallies(EthToEth):
    body = "EMIT(out);"
    at_end = "return;  /* nothing to add */"


class BatchOnly(EthToEth):
    batch_body = r"""
    for (uint32_t i = 0; i < n; i++)
        EMIT_AT(i, out);
    """


class Tally(EthToEth):
    tables = ("seen",)
    body = "seen[0] += 1;"


class SizeClasses(EthToEth):
    """Counts frames per size class and adds up their bytes in a shared array (a
    user's element: its own table name, an index it bounds itself)."""

    tables = ("by_size",)
    body = r"""
    /* classes of 256 bytes; the last takes every longer frame */
    uint32_t k = pkt->len >> 8;
    if (k > 6) k = 6;
    by_size[k] += 1;
    by_size[7] += pkt->len;   // the total
    """


class Flows(EthToEth):
    """Looks the frame up in a key-value store, which XDP has no map for yet."""

    tables = ("known",)
    body = "(void)known; /* a user's lookup would go here */"


class KeyHash(EthToEth):
    includes = ("offlow/kvstore.h",)
    body = "pkt->data[0] ^= 1;"


class Wide(EthToEth):
    fields = {"big": "uint8_t[300]"}
    body = "state->big[0] = pkt->data[0];"


def test_each_construct_xdp_cannot_run_is_a_compile_error_naming_it() -> None:
    def element(name: str, cls: str, why: str) -> str:
        return (f"element `{name}` ({cls}) cannot run on target `xdp`: {why}; place segment "
                "`edge` on another device")

    assert _refusal(_one_segment(Maker("mk"))) == element(
        "mk", "Maker", "it builds packets (MAKE); an XDP program can only send on, drop or "
        "pass the packet it received")
    copier = Copier("cp")
    p = Program("refused")
    src, a, b = Source("rx"), Sink("tx"), Discard("b")
    src >> copier
    copier["a"] >> a
    copier["b"] >> b
    p.segment("edge", [src, copier, a, b], device="xdp")
    assert _refusal(p) == element("cp", "Copier", "it sends copies of a packet (SEND); an XDP "
                                  "program has one packet and one verdict")
    assert _refusal(_one_segment(Giver("give_up"))) == element(
        "give_up", "Giver", "it fails its core (FAIL); an XDP program cannot stop the run: "
        "drop the packet with a reason (DROP_WHY) instead")
    assert _refusal(_one_segment(Stamp("st"))) == element(
        "st", "Stamp", "it reads the packet's capture time (pkt->ts_ns), which XDP does not have")
    assert _refusal(_one_segment(Tallies("ta"))) == element(
        "ta", "Tallies", "it has code to run at the end of its stream (at_end), after its "
        "last packet; XDP runs one packet at a time and keeps nothing between them")
    assert _refusal(_one_segment(BatchOnly("vec"))) == element(
        "vec", "BatchOnly", "it has only a batch body; XDP runs one packet at a time: give the "
        "element a per-packet body")
    assert _refusal(_one_segment(Tally("tally", seen=Shared("seen", "uint64_t", 1 << 19)))) == \
        element("tally", "Tally", "its shared array seen takes more than 2 MiB, the most one "
                "BPF map value here holds: a shorter array")
    still = ("; of the tables, only shared integer arrays, shared maps (SharedMap) and the "
             "LPM tables (lpm4_table, lpm6_table) are BPF maps in XDP yet")
    assert _refusal(_one_segment(Flows("flows", known=kv_store("known")))) == element(
        "flows", "Flows", "it uses shared table known (struct ofl_kvs)" + still)
    assert _refusal(_one_segment(Tally("avg", seen=Shared("means", "double", 4)))) == element(
        "avg", "Tally", "it uses shared table means (double)" + still)
    assert _refusal(_one_segment(KeyHash("kh"))) == element(
        "kh", "KeyHash", "its body uses offlow/kvstore.h, a runtime library with no BPF build "
        "(only offlow/pkt.h's parsers run in XDP)")


def test_segments_xdp_cannot_run_are_compile_errors_naming_them() -> None:
    seg = "segment `edge` cannot run on target `xdp`: "
    cores = ("XDP runs a segment on whichever CPU receives each packet; it takes no cores or "
             "core group: give it one core (cores=[0])")
    assert _refusal(_one_segment(Stamp("t"), cores=(0, 1))) == seg + cores
    assert _refusal(_one_segment(Wide("w"))) == seg + (
        "the per-packet state takes 300 bytes; on the 512-byte BPF stack it may take at most "
        "256: fewer or smaller fields")
    p = Program("refused")
    src, eth, ip4, t1, t2, d = (Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), Sink("t1"),
                                Sink("t2"), Discard("d"))
    src >> eth
    eth["ipv4"] >> ip4 >> t1
    eth["ipv6"] >> t2
    eth["other"] >> d
    p.segment("edge", [src, eth, ip4, t1, t2, d], device="xdp")
    assert _refusal(p) == seg + (
        "it has 2 sinks (t1, t2); XDP sends a packet back out of the interface it came in on "
        "(XDP_TX): give it one sink")


@needs_bpf
def test_a_users_segment_compiles_to_an_xdp_program_the_verifier_accepts() -> None:
    """tests/programs/xdp_ttl.py: the stock parsers (pkt.h, inlined) and a user's
    element with comments, a parameter and an odd-sized field; build() loads each
    program into the kernel, so the verifier has accepted it."""
    b = build(load_program(XDP_TTL, ["edge.device=xdp"]))
    obj = b.binaries["xdp"].with_name("xdp.bpf.o")
    assert obj.read_bytes()[:4] == b"\x7fELF" and b"ofl_xdp_edge" in obj.read_bytes()
    # the object the host side runs: loaded into the kernel again, accepted again
    check = subprocess.run([str(b.binaries["xdp"]), "--check", str(obj)], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr


class FarWrite(EthToEth):
    """Writes at an offset the packet itself gives: 32 bits, never bounded."""

    body = r"""
    /* the offset comes from the packet */
    uint32_t at = ofl_get_be32(pkt->data + 14);
    pkt->data[at] = 0;
    """


@needs_bpf
def test_a_verifier_refusal_names_the_element_and_its_body_line() -> None:
    with pytest.raises(OfflowError) as err:
        build(_one_segment(FarWrite("far")))
    msg = str(err.value)
    src = Path(__file__).read_text().splitlines()
    line = next(k for k, t in enumerate(src, 1) if t.strip() == "pkt->data[at] = 0;")
    assert msg.startswith(f"element `far` (FarWrite), body line 3 ({__file__}:{line}: "
                          "`pkt->data[at] = 0;`): the kernel's verifier refused segment "
                          "`edge`'s XDP program: ")
    assert "unbounded memory access" in msg
    assert "processed" not in msg and "BEGIN PROG LOAD LOG" not in msg  # not the raw log


class Buckets(EthToEth):
    """A user's per-source byte count in buckets: the bucket is a hash of the source
    address modulo the table's size (MASK: masked instead)."""

    tables = ("spent",)
    params = {"mask": "uint32_t"}
    body = r"""
    uint32_t src = ofl_get_be32(pkt->data + 26);   /* IPv4 source, if it is one */
    uint32_t b = src * 2654435761u;
    b = mask ? (b & mask) : b % 509u;              // 509: a prime, the textbook size
    spent[b] += pkt->len;
    """


@needs_bpf
def test_a_table_index_the_verifier_cannot_bound_is_said_with_the_mask_that_can() -> None:
    """`% 509` (clang compiles it to multiplications the verifier cannot bound) is refused
    naming the line and saying to mask the index; the same element masked builds."""
    with pytest.raises(OfflowError) as err:
        build(_one_segment(Buckets("buckets", mask=0, spent=Shared("spent", "uint64_t", 509))))
    msg = str(err.value)
    assert msg.startswith("element `buckets` (Buckets), body line 4 (") and \
        "`spent[b] += pkt->len;`): the kernel's verifier refused" in msg, msg
    assert "every table index (a mask: `i & 511` on a table of 512 entries" in msg, msg
    b = build(_one_segment(Buckets("buckets", mask=511, spent=Shared("spent", "uint64_t", 512))))
    assert "xdp" in b.binaries


def test_a_shared_array_used_on_xdp_and_on_another_device_is_refused() -> None:
    """In XDP the array is a BPF map: the host's copy in the window would count apart."""
    def split(device: str) -> Program:
        hits = Shared("hits", "uint64_t", 4)
        p = Program("split_tally")
        src, edge, core, out = Source("rx"), Tally("edge_tally", seen=hits), \
            Tally("core_tally", seen=hits), Sink("tx")
        src >> edge >> core >> out
        p.segment("edge", [src, edge], device=device, cores=[0])
        p.segment("app", [core, out], device="host", cores=[0])
        return p

    assert _refusal(split("xdp")) == (
        "segment `edge` cannot run on target `xdp`: shared table hits is also used by "
        "element `core_tally` on device `host`: on xdp a table is a BPF map that only the "
        "xdp device's own code sees, so the two would count apart; give each device its "
        "own table, or place the elements on one device")
    plan_program(split("nic"))  # (the window holds it, seen by both)


class Chatty(EthToEth):
    """Prints what it sees: printf has no eBPF form."""

    body = r"""
    // a user's debugging line, left in
    if (pkt->len > 60)
        printf("long frame: %u bytes\n", pkt->len);
    """


@needs_bpf
def test_a_call_with_no_ebpf_form_names_the_element_the_line_and_the_function() -> None:
    with pytest.raises(OfflowError) as err:
        build(_one_segment(Chatty("talker")))
    src = Path(__file__).read_text().splitlines()
    line = next(k for k, t in enumerate(src, 1) if t.strip().startswith('printf("long frame'))
    assert str(err.value) == (
        f"element `talker` (Chatty), body line 3 ({__file__}:{line}): it calls `printf`, "
        "which has no eBPF form: code in XDP can call the kernel's BPF helpers and the "
        "offlow functions that have one (runtime/core/include/offlow/bpf.h); place the "
        "element on a nic or host segment")


def _run(tmp_path: Path, device: str, capture: Path | None, **opts: Any) -> tuple[
        dict[str, Any], bytes]:
    """tests/programs/xdp_ttl.py with its segment on `device`: the run's summary and
    the output capture's bytes."""
    out = tmp_path / f"{device}.pcap"
    s = run_example([f"edge.device={device}"], XDP_TTL, input=capture, output=out, **opts)
    assert s["ok"], s["errors"]
    assert s["accounting"]["unaccounted"] == 0
    return s, out.read_bytes()


@needs_bpf
@pytest.mark.parametrize("capture", ["tls", "quic", "synthetic"])
def test_xdp_writes_what_the_nic_writes_and_counts_the_same(capture: str,
                                                            tmp_path: Path) -> None:
    """The same frames, in the same order with the same timestamps, and the same
    counters per element and drop reason, from the kernel's XDP path as from the
    emulated NIC."""
    path = {"tls": TLS, "quic": QUIC, "synthetic": None}[capture]
    synth = {"count": 3000, "seed": 5, "sizes": "60:3,333:1,1514:1"} if path is None else {}
    nic, nic_out = _run(tmp_path, "nic", path, **synth)
    got, xdp_out = _run(tmp_path, "xdp", path, **synth)
    assert got["segments"][0]["device"] == "xdp" and got["accounting"]["forwarded"] > 100
    assert xdp_out == nic_out
    assert got["elements"] == nic["elements"]
    assert got["accounting"] == nic["accounting"]


@needs_bpf
def test_xdp_forwards_ipv4_with_the_ttl_down_the_dscp_set_and_a_good_checksum(
        tmp_path: Path) -> None:
    """Checked with dpkt against the input, not against offlow."""
    _, out = _run(tmp_path, "xdp", TLS)
    (tmp_path / "in.pcap").write_bytes(out)
    sent = [dpkt.ethernet.Ethernet(f) for f in read_frames(TLS)]
    back = [dpkt.ethernet.Ethernet(f) for f in read_frames(tmp_path / "in.pcap")]
    assert len(back) == len(sent) > 1000
    for a, b in zip(sent, back, strict=True):
        assert isinstance(a.data, dpkt.ip.IP) and isinstance(b.data, dpkt.ip.IP)
        assert b.data.ttl == a.data.ttl - 1 and b.data.tos >> 2 == 10
        raw = bytes(b.data)[: b.data.hl * 4]
        total = sum(int.from_bytes(raw[k:k + 2], "big") for k in range(0, len(raw), 2))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        assert total == 0xFFFF  # the header checksum holds
        assert bytes(b.data.data) == bytes(a.data.data)


@needs_bpf
def test_malformed_frames_are_dropped_and_counted_as_on_the_nic(tmp_path: Path) -> None:
    """Every malformed frame is dropped where the NIC drops it, for the same reason,
    except the frames shorter than an Ethernet header: the kernel does not send those
    into the veth pair, so they are dropped at the source, counted (`runt`)."""
    capture = tmp_path / "malformed.pcap"
    expected = write_malformed_pcap(capture)
    nic, nic_out = _run(tmp_path, "nic", capture)
    got, xdp_out = _run(tmp_path, "xdp", capture)
    assert xdp_out == nic_out
    runts = sum(1 for f in read_frames(capture) if len(f) < 14)
    assert runts > 0 and got["elements"]["wire"]["why"] == {"runt": runts}
    assert got["elements"]["wire"]["drop"] == runts
    frames_nic, frames_xdp = nic["elements"]["frames"], got["elements"]["frames"]
    assert frames_xdp["why"]["malformed"] == frames_nic["why"]["malformed"] - runts
    for name in ("v4", "v6", "hop4", "hop6", "mark", "back", "rest"):
        assert got["elements"][name] == nic["elements"][name], name
    dropped = sum(d["packets"] for d in got["accounting"]["dropped"])
    assert dropped == sum(d["packets"] for d in nic["accounting"]["dropped"])
    assert got["accounting"]["read"] == expected["total"]
    # the record cut by the snap length: counted at the source on both (never run)
    assert got["sources"]["wire"]["cut_short"] == nic["sources"]["wire"]["cut_short"] == 1


class NaiveUntag(Element):
    """A user's first try at stripping a service tag: the 4 bytes after the MACs go,
    whatever follows (an S-tag frame of 18 bytes leaves `02..02 81 00`)."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    body = r"""
    if (pkt->len >= 18u && pkt->data[12] == 0x88 && pkt->data[13] == 0xa8) {
        for (uint32_t i = 12; i + 4u < pkt->len && i < 2048u; i++)
            pkt->data[i] = pkt->data[i + 4u];
        pkt->len -= 4u;
    }
    EMIT(out);
    """


def _veth_drops(frame: bytes) -> bool:
    """What Linux's receive does with a frame on a veth (skb_vlan_untag): an 802.1Q or
    802.1ad TPID needs 6 bytes after the Ethernet header, or the frame is dropped."""
    return len(frame) < 20 and frame[12:14] in (b"\x81\x00", b"\x88\xa8")


@needs_bpf
def test_a_frame_sent_back_that_the_veth_drops_is_counted_and_the_run_goes_on(
        tmp_path: Path) -> None:
    """Frames the program sends back (XDP_TX) ending in a VLAN TPID with its tag cut
    short: the kernel drops them on the veth's receive, so they are counted at the
    sink (`veth_dropped`), not waited for; the frames after them come out as on the
    NIC. Before, the run ended at the first with "never arrived"."""
    s_tag = b"\x02" * 12 + b"\x88\xa8\x00\x07"
    frames = [s_tag + b"\x81\x00",                              # -> 14 B, ends in 0x8100
              b"\x02" * 12 + b"\x08\x06" + b"\x00" * 46,        # untouched
              s_tag + b"\x81\x00\x00\x05\x08",                  # -> 17 B: tag cut short
              b"\x02" * 12 + b"\x81\x00\x00\x05\x88\xb5",       # 18 B sent back as is
              s_tag + b"\x81\x00\x00\x05\x88\xb5",              # -> 18 B, whole tag
              s_tag + b"\x81\x00\x00\x05\x88\xb5\x00\x00",      # -> 20 B: arrives
              b"\x02" * 12 + b"\x91\x00",                         # 0x9100: arrives
              b"\x02" * 12 + b"\x88\xb5" + b"\x01" * 50]
    capture = tmp_path / "tags.pcap"
    with open(capture, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for k, fr in enumerate(frames):
            w.writepkt(fr, ts=k * 1e-6)
    got = {}
    for device in ("nic", "xdp"):
        prog = _one_segment(NaiveUntag("untag"), device=device)
        out = tmp_path / f"{device}.pcap"
        o = RunOptions(input=capture, output=out, timeout=60)
        b = build_for(prog, o, werror=True)
        res = run(b, o)
        assert res.ok, res.errors
        got[device] = (summarize(b.plan, res.stats), read_frames(out))
    nic, nic_out = got["nic"]
    xdp_s, xdp_out = got["xdp"]
    dropped = [fr for fr in nic_out if _veth_drops(fr)]
    assert len(nic_out) == len(frames) and len(dropped) == 4
    assert xdp_out == [fr for fr in nic_out if not _veth_drops(fr)]
    assert xdp_s["elements"]["tx"]["why"] == {"veth_dropped": len(dropped)}
    assert xdp_s["elements"]["untag"] == nic["elements"]["untag"]
    a = xdp_s["accounting"]
    assert (a["read"], a["forwarded"], a["unaccounted"]) == (
        len(frames), len(frames) - len(dropped), 0)
    assert [(d["at"], d["reason"], d["packets"]) for d in a["dropped"]] == [
        ("tx", "veth_dropped", len(dropped))]


def _started_in_its_own_namespace(r: Run) -> int:
    """The pid of the run's xdp process, once its veth pair is up in its own network
    namespace (its /proc/PID/net/dev lists both ends; ours never does)."""
    pid = r.procs["xdp"].pid
    for _ in range(400):
        try:
            dev = Path(f"/proc/{pid}/net/dev").read_text()
        except FileNotFoundError:
            break
        if "ofl-xdp:" in dev and "ofl-peer:" in dev:
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
            return pid
        time.sleep(0.025)
    raise AssertionError(f"the xdp process never set up its veth pair: {r.procs['xdp'].poll()}")


@needs_bpf
def test_stopping_an_xdp_run_ends_it_cleanly_with_its_counts(tmp_path: Path) -> None:
    b = build(load_program(XDP_TTL, ["edge.device=xdp"]))
    out = tmp_path / "out.pcap"
    r = Run(b, RunOptions(duration=30, timeout=60, output=out))
    r.start()
    try:
        _started_in_its_own_namespace(r)
        for _ in range(400):  # frames come back (the capture grows past its first block)
            if out.exists() and out.stat().st_size > 8192:
                break
            time.sleep(0.025)
        r.stop(signal.SIGTERM)
    finally:
        res = r.wait()
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    assert s["accounting"]["read"] > 0 and s["accounting"]["unaccounted"] == 0
    assert len(read_frames(out)) == s["accounting"]["forwarded"] > 0
    assert not Path("/sys/class/net/ofl-xdp").exists()


@needs_bpf
def test_a_killed_xdp_process_is_reported_and_takes_its_veth_pair_with_it() -> None:
    b = build(load_program(XDP_TTL, ["edge.device=xdp"]))
    r = Run(b, RunOptions(duration=30, timeout=60))
    r.start()
    try:
        pid = _started_in_its_own_namespace(r)
        os.kill(pid, signal.SIGKILL)
    finally:
        res = r.wait()
    assert not res.ok and any("xdp process" in e for e in res.errors), res.errors
    assert not Path(f"/proc/{pid}").exists() and not Path("/sys/class/net/ofl-xdp").exists()


class FarHelper(EthToEth):
    """The same write, in a helper function of the element's."""

    helpers = r"""
static inline void poke(uint8_t *frame) {
    uint32_t at = ofl_get_be32(frame + 14);  /* from the packet */
    frame[at] = 0;
}
"""
    body = "poke(pkt->data);"


@needs_bpf
def test_a_verifier_refusal_in_a_helper_names_the_helpers_line() -> None:
    with pytest.raises(OfflowError) as err:
        build(_one_segment(FarHelper("helped")))
    src = Path(__file__).read_text().splitlines()
    line = next(k for k, t in enumerate(src, 1) if t.strip() == "frame[at] = 0;")
    assert str(err.value).startswith(
        f"element `helped` (FarHelper), helpers line 3 ({__file__}:{line}: `frame[at] = 0;`): "
        "the kernel's verifier refused segment `edge`'s XDP program: ")


def test_any_loader_output_gives_one_error_line_naming_the_segment() -> None:
    """Whatever the loader printed (a truncated log, garbage, source lines of files
    that are not the program's), the error is one message, never an exception."""
    g = plan_program(load_program(XDP_TTL, ["edge.device=xdp"])).graph
    rng = random.Random(26)
    pieces = ["; x @ xdp_ttl.py:12", "; @ xdp.bpf.c:3", "processed 9 insns", "R1 invalid mem",
              "; y @ :", "libbpf: failed", "", "; z @ xdp_ttl.py:999999", "\x00\xff", "@ @ :1"]
    for _ in range(500):
        log = "\n".join(rng.choice(pieces) + rng.choice(["", " ", "\t", "q"])
                        for _ in range(rng.randrange(0, 12)))
        msg = verifier.explain_rejection(g, "edge", log)
        assert "\n" not in msg and "segment `edge`" in msg


def test_a_refusal_the_log_places_outside_the_bodies_says_where_and_what_to_do() -> None:
    g = plan_program(load_program(XDP_TTL, ["edge.device=xdp"])).graph
    log = ("libbpf: prog 'ofl_xdp_edge': BPF program load failed: Permission denied\n"
           "; if (v) *v += 1; @ xdp.bpf.c:32\n12: (07) r1 += 4\n"
           "R1 invalid mem access 'scalar'\nprocessed 13 insns (limit 1000000)\n")
    assert verifier.explain_rejection(g, "edge", log) == (
        "segment `edge`: the kernel's verifier refused its XDP program: R1 invalid mem access "
        "'scalar' (at xdp.bpf.c:32: `if (v) *v += 1;`); no line of an element's body or "
        "helpers: if the program's file changed since it was loaded, run again, else please "
        "report it")


class BitCounts(EthToEth):
    """Writes the counts of leading and trailing zeros of the frame's bytes 14..21 (as
    32- and 64-bit words) over bytes 14..17: a user's element calling the builtins."""

    body = r"""
    if (pkt->len < 22)
        DROP();
    uint32_t w = ofl_get_be32(pkt->data + 14);
    uint64_t v = (uint64_t)w << 32 | ofl_get_be32(pkt->data + 18);
    pkt->data[14] = w ? (uint8_t)__builtin_ctz(w) : 99;
    pkt->data[15] = w ? (uint8_t)__builtin_clz(w) : 99;
    pkt->data[16] = v ? (uint8_t)__builtin_ctzll(v) : 99;
    pkt->data[17] = v ? (uint8_t)__builtin_clzll(v) : 99;
    """


@needs_bpf
def test_the_bit_counting_builtins_give_in_xdp_what_they_give_on_the_nic(
        tmp_path: Path) -> None:
    """BPF has no count-zeros instruction (clang stops at __builtin_ctz): offlow/bpf.h
    gives the four builtins as popcounts; the frames (words of every single bit, of
    random widths, 0 and all ones) equal the NIC's and what Python counts."""
    rng = random.Random(14)
    words = [1 << k for k in range(64)] + [(1 << 64) - 1, 0, 1 << 32 | 1]
    words += [rng.getrandbits(rng.randrange(1, 65)) for _ in range(200)]
    capture = tmp_path / "words.pcap"
    with open(capture, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for k, x in enumerate(words):
            w.writepkt(b"\x02" * 12 + b"\x88\xb5" + x.to_bytes(8, "big") + bytes(k % 40),
                       ts=1700000000 + k)
    got = {}
    for device in ("nic", "xdp"):
        p = _one_segment(BitCounts("bits"))
        p.place("edge", device=device)
        res = run(build(p), RunOptions(input=capture, output=tmp_path / f"{device}.pcap",
                                       timeout=60))
        assert res.ok, res.errors
        got[device] = read_frames(tmp_path / f"{device}.pcap")
    assert got["xdp"] == got["nic"]
    sent = read_frames(capture)
    assert len(got["xdp"]) == len(sent)

    def zeros(x: int, bits: int) -> tuple[int, int]:
        return ((x & -x).bit_length() - 1, bits - x.bit_length()) if x else (99, 99)

    for a, b in zip(sent, got["xdp"], strict=True):
        w, v = int.from_bytes(a[14:18], "big"), int.from_bytes(a[14:22], "big")
        (t32, l32), (t64, l64) = zeros(w, 32), zeros(v, 64)
        assert b[14:18] == bytes([t32, l32, t64, l64]) and b[18:] == a[18:]


# The router's tables for the test: /8s, /16s and /24s, and prefixes longer than /24
# (tbl8 groups) inside some of them; IPv6 prefixes nested down to a /128, a stride's
# bits apart and not; every address outside them is unroutable.
ROUTES = ["10.0.0.0/8", "20.0.0.0/8", "20.5.0.0/16", "20.5.7.0/24", "20.5.7.128/25",
          "20.5.7.200/30", "20.5.7.203/32", "30.1.0.0/16", "30.1.2.0/24", "30.1.2.16/28",
          "40.0.0.0/9", "40.200.3.0/24", "40.200.3.64/26"]
ROUTES6 = ["2001:db8::/32", "2001:db8:1::/48", "2001:db8:1:2::/64", "2001:db8:1:2:3::/80",
           "2001:db8:1:2:3:4:5:6/128", "2001:db8:ff00::/40", "2a00::/12", "2a01:4f8::/29",
           "2a01:4f8:c0c:1::/67", "2c0f:f000::/20", "2c0f:f001:2::/127"]
Nets = list[ipaddress.IPv4Network] | list[ipaddress.IPv6Network]


def _near(net: ipaddress.IPv4Network | ipaddress.IPv6Network, rng: random.Random) -> bytes:
    """An address in `net` or in the network two bits shorter around it (at least a /6),
    so that some are outside it: network order."""
    wider = net.supernet(new_prefix=max(net.prefixlen - 2, 6)) if net.prefixlen > 6 else net
    host = rng.getrandbits(wider.max_prefixlen - wider.prefixlen)
    return (wider.network_address + host).packed


def _router_capture(path: Path, nets4: Nets, nets6: Nets, n: int = 600,
                    seed: int = 2626) -> tuple[list[bytes], list[bytes]]:
    """n frames: most IPv4, a third IPv6, to addresses in or near the given networks
    (so some unroutable), some ARP; written with dpkt. Their IPv4 and IPv6 destinations,
    in order (network byte order)."""
    rng = random.Random(seed)
    dsts4: list[bytes] = []
    dsts6: list[bytes] = []
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for k in range(n):
            eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6)
            size = k % 300
            if k % 17 == 5:
                eth.type, eth.data = dpkt.ethernet.ETH_TYPE_ARP, dpkt.arp.ARP()
            elif k % 3 == 1:
                dst = _near(rng.choice(nets6), rng)
                dsts6.append(dst)
                eth.type = dpkt.ethernet.ETH_TYPE_IP6
                eth.data = dpkt.ip6.IP6(src=b"\x20" * 16, dst=dst, hlim=9, nxt=17,
                                        data=dpkt.udp.UDP(sport=1, dport=2, data=b"x" * size))
                eth.data.plen = len(eth.data.data)
            else:
                dst = _near(rng.choice(nets4), rng)
                dsts4.append(dst)
                eth.type = dpkt.ethernet.ETH_TYPE_IP
                eth.data = dpkt.ip.IP(src=bytes([192, 0, 2, 1]), dst=dst, ttl=64, p=17,
                                      data=dpkt.udp.UDP(sport=7, dport=9, data=b"y" * size))
                eth.data.len = 20 + 8 + size
                eth.data.data.ulen = 8 + size
            w.writepkt(bytes(eth), ts=1700000000 + k / 1000)
    return dsts4, dsts6


def _router_runs(capture: Path, opts: tuple[str, ...] = ()) -> dict[str, tuple[
        dict[str, Any], list[bytes]]]:
    """tests/programs/xdp_router.py on nic and on xdp over `capture`: each run's
    summary and output frames."""
    runs = {}
    for device in ("nic", "xdp"):
        out = capture.with_name(f"{device}.pcap")
        s = run_example([f"edge.device={device}"], XDP_ROUTER, input=capture, output=out,
                        opts=opts, timeout=300)
        assert s["ok"], s["errors"]
        runs[device] = s, read_frames(out)
    return runs


def _hops6(frames: list[bytes]) -> list[tuple[bytes, int]]:
    """Each IPv6 frame's destination and the next hop SetNextHop wrote into it."""
    return [(f[38:54], int.from_bytes(f[4:6], "big")) for f in frames
            if f[12:14] == b"\x86\xdd"]


@needs_bpf
def test_the_router_looks_up_its_ipv4_and_ipv6_tables_in_xdp_as_on_the_nic(
        tmp_path: Path) -> None:
    """tests/programs/xdp_router.py: the DIR-24-8 table and the IPv6 trie built by the
    runtime, looked up from BPF array maps in XDP; the same frames (next hop in the
    Ethernet addresses), and the same counters, as the emulated NIC's; unroutable
    counted, and each IPv6 frame's hop, as Python's own longest-prefix match says."""
    table, capture = tmp_path / "routes.txt", tmp_path / "in.pcap"
    table.write_text("# the test's routes\n" + "\n".join(ROUTES + ROUTES6) + "\n")
    nets = [ipaddress.ip_network(r) for r in ROUTES]
    nets6 = [ipaddress.ip_network(r) for r in ROUTES6]
    dsts4, dsts6 = _router_capture(capture, nets, nets6)
    ref = Reference.from_networks(nets + nets6, nports=8)
    unroutable = [sum(1 for d in ds if not ref.lookup(ipaddress.ip_address(d)))
                  for ds in (dsts4, dsts6)]
    runs = _router_runs(capture, (f"fib.path={table}", f"fib6.path={table}"))
    (nic, nic_out), (got, xdp_out) = runs["nic"], runs["xdp"]
    assert got["segments"][0]["device"] == "xdp"
    assert all(0 < u < len(ds) // 2 for u, ds in zip(unroutable, (dsts4, dsts6), strict=True))
    assert got["elements"]["find"]["why"] == {"unroutable": unroutable[0]}
    assert got["elements"]["find6"]["why"] == {"unroutable": unroutable[1]}
    assert xdp_out == nic_out
    assert got["elements"] == nic["elements"] and got["accounting"] == nic["accounting"]
    hops = _hops6(xdp_out)
    assert len(hops) == len(dsts6) - unroutable[1]
    assert all(h == ref.lookup(ipaddress.IPv6Address(d)) for d, h in hops)
    assert len({f[:6] for f in xdp_out}) > 5  # the frames left by many next hops, not one


def _sample_prefixes(k: int, seed: int) -> tuple[Nets, Nets]:
    """k IPv4 and k IPv6 prefixes of the full BGP table, at random."""
    lines = gzip.decompress(BGP.read_bytes()).decode().split()
    rng = random.Random(seed)
    v4 = [ln for ln in lines if ":" not in ln]
    v6 = [ln for ln in lines if ":" in ln]
    return ([ipaddress.IPv4Network(x) for x in rng.sample(v4, k)],
            [ipaddress.IPv6Network(x) for x in rng.sample(v6, k)])


def _ipv6_networks(path: Path) -> list[ipaddress.IPv6Network]:
    """The IPv6 networks of gzipped prefix file `path` in file order, as read_prefixes
    gives them: each line through its parser (parse_line), only the lines with a ':'
    (every IPv6 prefix has one; parsing the full table's 900,000 IPv4 lines as well,
    only to leave them out, took most of the test's time)."""
    lines = gzip.decompress(path.read_bytes()).decode("latin-1").split("\n")
    nets = (parse_line(line) for line in lines if ":" in line)
    return [n for n in nets if isinstance(n, ipaddress.IPv6Network)]


@needs_bpf
@pytest.mark.skipif(not BGP.exists(), reason=f"BGP table not found at {BGP}")
def test_the_router_on_the_full_bgp_tables_in_xdp_writes_what_the_nic_writes(
        tmp_path: Path) -> None:
    """Both tables from the full BGP table (901,899 IPv4 and 160,147 IPv6 prefixes, the
    IPv6 trie 19 nodes deep), destinations in and around random prefixes of it: the
    same frames and counters from XDP's map lookups as from the NIC's, and the IPv6
    hops those of Python's longest-prefix match over the table's IPv6 prefixes."""
    capture = tmp_path / "in.pcap"
    nets4, nets6 = _sample_prefixes(1500, 26)
    _, dsts6 = _router_capture(capture, nets4, nets6, n=3000, seed=6)
    runs = _router_runs(capture)
    (nic, nic_out), (got, xdp_out) = runs["nic"], runs["xdp"]
    assert got["segments"][0]["device"] == "xdp"
    assert xdp_out == nic_out and len(xdp_out) > 2000
    assert got["elements"] == nic["elements"] and got["accounting"] == nic["accounting"]
    ref = Reference.from_networks(_ipv6_networks(BGP), nports=8)
    hops = _hops6(xdp_out)
    unroutable = got["elements"]["find6"]["drop"]
    assert len(hops) > 700 and 0 < unroutable == len(dsts6) - len(hops)
    assert all(h == ref.lookup(ipaddress.IPv6Address(d)) for d, h in hops)


def test_iface_and_xdp_mode_errors_come_before_any_process_starts(tmp_path: Path) -> None:
    plan = plan_program(load_program(XDP_TTL, ["edge.device=xdp"]))
    with pytest.raises(OfflowError) as err:
        xdp.run_options(plan, "ofl-none-26", "generic", None)
    assert str(err.value) == ("--iface ofl-none-26: no such interface in this network "
                              "namespace (`ip link` lists them)")
    with pytest.raises(OfflowError) as err:
        xdp.run_options(plan, "lo", "generic", tmp_path / "in.pcap")
    assert str(err.value) == (
        f"--iface lo: the packets come from the interface; --input {tmp_path / 'in.pcap'} has "
        "nowhere to go (leave out --iface to replay it through the run's own veth pair)")
    with pytest.raises(OfflowError) as err:
        xdp.run_options(plan, None, "offload", None)
    assert str(err.value).startswith("--xdp-mode offload: not offered (the program and its "
                                     "maps on the NIC itself")
    with pytest.raises(OfflowError) as err:
        xdp.run_options(plan, None, "turbo", None)
    assert str(err.value) == "--xdp-mode turbo: expected one of generic, native"
    nic = plan_program(load_program(XDP_TTL))
    with pytest.raises(OfflowError) as err:
        xdp.run_options(nic, "lo", "generic", None)
    assert str(err.value) == ("--iface lo: no segment of `xdp_ttl` is on xdp "
                              "(--set SEG.device=xdp)")
    assert xdp.run_options(plan, None, "generic", None) == []
    assert xdp.run_options(plan, "lo", "native", None) == ["--opt", "xdp.mode=native",
                                                          "--opt", "xdp.iface=lo"]


@needs_bpf
def test_native_mode_on_the_runs_veth_pair_writes_what_the_nic_writes(tmp_path: Path) -> None:
    synth = {"count": 2000, "seed": 7, "sizes": "60:3,333:1,1514:1"}
    nic, nic_out = _run(tmp_path, "nic", None, **synth)
    got, xdp_out = _run(tmp_path, "xdp", None, xdp_mode="native", **synth)
    assert xdp_out == nic_out and got["elements"] == nic["elements"]


@needs_bpf
def test_native_mode_refused_by_the_driver_says_why_and_what_to_do(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Frames of 4,519 bytes (the TLS capture's mtu): a veth takes one page per frame
    in native mode, so it refuses the program; that is the run's one error (no exit
    status beside it, no raw line of the process's own)."""
    s = run_example(["edge.device=xdp"], XDP_TTL, input=TLS, output=tmp_path / "o.pcap",
                    xdp_mode="native")
    assert not s["ok"] and s["errors"] == [
        "interface ofl-xdp refused the XDP program in native mode: Numerical "
        "result out of range (its MTU is too large for native XDP, which takes one page per "
        "frame on a veth: use --xdp-mode generic, or frames of at most about 3,500 bytes)"]
    assert not [t for t in capfd.readouterr().err.splitlines() if t.startswith("offlow xdp")]


SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
s.settimeout(0.2)
frames = [bytes.fromhex(h) for h in sys.argv[2:]]
got = 0
for f in frames:
    s.send(f)
end = time.time() + 3
while time.time() < end and got < len(frames):
    try:
        data, addr = s.recvfrom(65535)
    except TimeoutError:
        continue
    if addr[2] != socket.PACKET_OUTGOING:
        got += 1
print(got)
"""


@needs_bpf
def test_iface_attaches_to_an_existing_interface_and_counts_its_traffic() -> None:
    """A veth pair in a namespace the test makes (never the machine's interfaces): the
    run attaches to one end (--iface), the test sends frames into the other and gets
    back what XDP_TX sent; the run's counters say what the program did with them.
    (Generic mode: in native mode a veth hands XDP_TX's frames to its peer only when
    the peer runs XDP too, which a run cannot do on an interface it does not own.)"""
    ns = f"ofl-t26-{os.getpid()}"
    with veth_in_namespace(ns) as sh:
        sent = read_frames(TLS)[:40]
        run = subprocess.Popen([*sh, str(ROOT / ".venv" / "bin" / "offlow"), "run",
                                str(XDP_TTL), "--set", "edge.device=xdp", "--iface", "ofl-a",
                                "--duration", "8", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(400):  # until the program is attached to a
                link = subprocess.run(["ip", "-n", ns, "link", "show", "ofl-a"],
                                      capture_output=True, text=True).stdout
                if "xdp" in link or run.poll() is not None:
                    break
                time.sleep(0.05)
            assert run.poll() is None, run.communicate()
            back = subprocess.run([*sh, sys.executable, "-c", SENDER, "ofl-b",
                                   *(f.hex() for f in sent)],
                                  capture_output=True, text=True, timeout=30)
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
        assert run.returncode == 0, err
        s = json.loads(out)
        jsonschema.validate(s, json.loads((ROOT / "docs" / "run-result.schema.json").read_text()))
        assert int(back.stdout) == len(sent), (back.stderr, s["elements"])
        assert s["elements"]["wire"]["in"] == len(sent)
        assert s["elements"]["back"]["in"] == len(sent)
        assert s["elements"]["hop4"]["in"] == len(sent)
    assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                    text=True).stdout


@needs_bpf
def test_a_shared_array_is_a_bpf_map_the_run_reports_as_the_nic_does(tmp_path: Path) -> None:
    """A user's element adding to a shared array (Shared) on xdp: the same table
    contents in the run's report, the same frames and counters, as on the NIC."""
    def prog(device: str) -> Program:
        p = Program("sizes")
        src, sizes, out = Source("rx"), SizeClasses("sizes", by_size=Shared("hist", "int64_t",
                                                                          8)), Sink("tx")
        src >> sizes >> out
        p.segment("edge", [src, sizes, out], device=device)
        return p

    got = {}
    for device in ("nic", "xdp"):
        b = build(prog(device))
        res = run(b, RunOptions(input=TLS, output=tmp_path / f"{device}.pcap", timeout=60))
        s = summarize(b.plan, res.stats)
        assert res.ok, res.errors
        got[device] = s, (tmp_path / f"{device}.pcap").read_bytes()
    (nic, nic_out), (xdp_s, xdp_out) = got["nic"], got["xdp"]
    frames = [f for f in read_frames(TLS) if len(f) <= nic["mtu"]]  # (longer: dropped)
    hist = [0] * 8
    for f in frames:
        hist[min(len(f) >> 8, 6)] += 1
        hist[7] += len(f)
    assert xdp_s["tables"]["hist"] == nic["tables"]["hist"]
    assert xdp_out == nic_out and xdp_s["elements"] == nic["elements"]
    assert xdp_s["tables"]["hist"] == hist  # (counted by Python from the capture)
