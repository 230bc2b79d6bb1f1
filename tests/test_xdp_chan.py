"""Channels of a segment on xdp: the handler runs in the xdp process's host side over
the shared arrays' BPF maps (runtime/tools/xdp_chan.c), so a host program asking over
the channel gets the answers it gets with the segment on the NIC, and what a handler
writes is what XDP and the run's table report see."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import Handler, Program, Sink, Source
from offlow.build import plan_program
from offlow.dsl.loader import load_program
from offlow.elements.kvs import kv_store
from offlow.errors import OfflowError
from offlow.explain import explain
from offlow.report import summarize
from offlow.runner import RunOptions
from offlow.session import session
from offlow.sketch.app import EXAMPLE
from offlow.targets import xdp
from offlow.testing.streams import distinct_sources_pcap
from tests.e2e import ROOT
from tests.test_pcsa import reference_bitmaps, reference_summary

CENSUS = ROOT / "tests" / "programs" / "xdp_census.py"
WHY_NOT = xdp.TARGET.unusable()
needs_bpf = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")


def _ask(program: Path, device_of: str, device: str, capture: Path,
         messages: list[bytes], channel: str) -> tuple[list[bytes], dict[str, Any]]:
    """Run `program` with segment `device_of` on `device` over `capture` as a session:
    once every packet is processed, each message's answer on `channel`; then the
    run's summary (its table report)."""
    with session(load_program(program, [f"{device_of}.device={device}"]),
                 RunOptions(input=capture, timeout=120)) as s:
        s.wait_drained()
        ch = s.channel(channel)
        answers = [ch.request(m) for m in messages]
    assert s.result is not None and s.result.ok, s.result
    summary = summarize(s.build.plan, s.result.stats)
    assert summary["segments"][0]["device"] == device
    return answers, summary


@needs_bpf
def test_pcsa_on_xdp_answers_its_channel_as_on_the_nic(tmp_path: Path) -> None:
    """examples/pcsa.py as written, `rx` on xdp: the summary the host asks for (the
    sketch XDP set, read through the map by the handler) is the NIC's and the
    reference's, and so is the table report."""
    capture = tmp_path / "sources.pcap"
    sources = distinct_sources_pcap(capture, 5000, 8000, seed=126)
    got = {d: _ask(EXAMPLE, "rx", d, capture, [b"summary"], "pcsa") for d in ("nic", "xdp")}
    (nic_answers, nic), (xdp_answers, on_xdp) = got["nic"], got["xdp"]
    assert xdp_answers == nic_answers
    sum_r, m, empty = struct.unpack("<III", xdp_answers[0])
    assert (sum_r, m) == (reference_summary(sources), 2048) and empty < 2048
    assert on_xdp["tables"]["sketch"] == nic["tables"]["sketch"] == reference_bitmaps(sources)
    assert on_xdp["elements"] == nic["elements"]


@needs_bpf
def test_a_reset_from_the_host_clears_the_map_xdp_updates(tmp_path: Path) -> None:
    """PcsaSummary's `reset` writes the sketch: on xdp it writes the BPF map itself,
    so the next answer and the run's table report (read from the map) are empty."""
    capture = tmp_path / "sources.pcap"
    distinct_sources_pcap(capture, 400, 900, seed=7)
    answers, summary = _ask(EXAMPLE, "rx", "xdp", capture,
                            [b"summary", b"reset", b"summary"], "pcsa")
    before, after, again = (struct.unpack("<III", a) for a in answers)
    assert before[0] > 0 and before[2] < 2048
    assert after == again == (0, 2048, 2048)
    assert summary["tables"]["sketch"] == [0] * 2048


def _census_capture(path: Path) -> list[int]:
    """Frames of every kind with random TTLs and odd lengths; returns the counters
    the census program should end with: IPv4 frames per TTL class (TTL / 8), then
    their bytes."""
    rng = random.Random(2626)
    want = [0] * 33
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for k in range(700):
            kind = rng.choice(("v4", "v4", "v4", "v6", "arp"))
            payload = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            if kind == "v4":
                ttl = rng.randrange(1, 256)
                ip: Any = dpkt.ip.IP(src=rng.randbytes(4), dst=rng.randbytes(4), ttl=ttl,
                                     p=17, data=dpkt.udp.UDP(sport=5, dport=7, data=payload))
                ip.data.ulen = len(ip.data)
                eth = dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
                want[ttl >> 3] += 1
                want[32] += len(bytes(eth))
            elif kind == "v6":
                ip = dpkt.ip6.IP6(src=rng.randbytes(16), dst=rng.randbytes(16), nxt=17, hlim=9,
                                  data=dpkt.udp.UDP(sport=5, dport=7, data=payload))
                ip.plen = len(ip.data)
                eth = dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP6, data=ip)
            else:
                eth = dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_ARP, data=payload)
            w.writepkt(bytes(eth), ts=1.0 + k / 1000)
    return want


@needs_bpf
def test_a_users_channel_on_xdp_answers_and_writes_as_on_the_nic(tmp_path: Path) -> None:
    """tests/programs/xdp_census.py (its own names, comments in its C bodies, an array
    of 33 uint64): the busiest class, a class cleared by the handler, the busiest again;
    the same answers with `edge` on xdp and on the NIC, the same table report, and the
    counts a Python count of the capture gives (the cleared class zero)."""
    capture = tmp_path / "census.pcap"
    want = _census_capture(capture)
    busiest = max(range(32), key=lambda c: (want[c], -c))
    questions = [b"top", b"clear" + bytes([busiest]), b"top", b"clear" + bytes([200])]
    got = {d: _ask(CENSUS, "edge", d, capture, questions, "census") for d in ("nic", "xdp")}
    (nic_answers, nic), (xdp_answers, on_xdp) = got["nic"], got["xdp"]
    assert xdp_answers == nic_answers
    top, cleared, top_after, out_of_range = xdp_answers
    assert struct.unpack("<3Q", top) == (busiest, want[busiest], want[32])
    assert struct.unpack("<Q", cleared) == (want[busiest],)
    want[busiest] = 0
    second = max(range(32), key=lambda c: (want[c], -c))
    assert struct.unpack("<3Q", top_after) == (second, want[second], want[32])
    assert struct.unpack("<Q", out_of_range) == (0,)
    assert on_xdp["tables"]["by_ttl"] == nic["tables"]["by_ttl"] == want
    assert on_xdp["elements"] == nic["elements"]


class AsksTheStore(Handler):
    tables = ("known",)
    body = "(void)known; /* a lookup of msg would go here */"


def test_a_handler_over_a_table_xdp_keeps_in_no_array_map_is_refused() -> None:
    p = Program("refused")
    src, out = Source("rx"), Sink("tx")
    src >> out
    p.segment("edge", [src, out], device="xdp")
    p.channel("ask", AsksTheStore("q", known=kv_store("known")), device="xdp")
    with pytest.raises(OfflowError) as err:
        plan_program(p)
    assert str(err.value) == (
        "channel `ask`: handler `q` (AsksTheStore) cannot run on target `xdp`: it uses shared "
        "table known (struct ofl_kvs); a handler of a segment on xdp runs in its host side "
        "over the BPF maps of shared integer arrays only: answer from such an array, or place "
        "the table's segment on another device")


def test_explain_says_where_a_channel_of_a_segment_on_xdp_is_answered() -> None:
    lines = explain(plan_program(load_program(EXAMPLE, ["rx.device=xdp"]))).splitlines()
    assert "  pcsa: served on xdp by summary (PcsaSummary) on the channel manager thread of " \
        "the xdp process, on the host CPU, over its tables' BPF maps" in lines
