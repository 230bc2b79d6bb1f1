"""Programs written as a user writes them, run on every target they fit, each output
checked against what dpkt makes of the input (not offlow's helpers). A VLAN/QinQ tag
stripper (tests/programs/tag_strip.py) on frames of odd sizes, with cut tags and runts;
a SYN-flood detector (tests/programs/syn_watch.py) counting SYNs per source /24;
a flow sampler (tests/programs/flow_sample.py) mirroring 1 flow hash in N, its own
FNV-1a recomputed here, and counting each flow's bytes."""

from __future__ import annotations

import os
import random
import runpy
import socket
import struct
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import Element, Port, Program
from offlow.build import build
from offlow.errors import OfflowError
from offlow.report import summarize
from offlow.runner import RunOptions, build_for, run
from offlow.targets import xdp
from tests.e2e import ROOT, read_frames
from tests.e2e import one_segment as _one_segment

TAG_STRIP = ROOT / "tests" / "programs" / "tag_strip.py"
SYN_WATCH = ROOT / "tests" / "programs" / "syn_watch.py"
FLOW_SAMPLE = ROOT / "tests" / "programs" / "flow_sample.py"
needs_bpf = pytest.mark.skipif(xdp.TARGET.unusable() is not None,
                               reason=f"xdp cannot run here: {xdp.TARGET.unusable()}")
LOCAL = 0x88B5  # IEEE's local experimental ethertype: dpkt keeps its payload as bytes


def _frame(tags: list[tuple[int, int]], size: int, k: int) -> bytes:
    head = bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, k % 256])
    for tpid, tci in tags:
        head += struct.pack(">HH", tpid, tci)
    head += struct.pack(">H", LOCAL)
    return (head + bytes((k + i) % 251 for i in range(max(0, size - len(head)))))[:size]


def _capture(path: Path) -> list[bytes]:
    """Untagged, 802.1Q, QinQ (S-tag with and without a C-tag) and a tag with PCP bits,
    at 60, 61, 64, 333, 1499 and 1517 bytes; then tags cut short and a runt."""
    frames = [_frame(tags, size, k * 5 + j)
              for k, size in enumerate((61, 1499, 1517, 60, 64, 333))
              for j, tags in enumerate(([], [(0x8100, 100)], [(0x88A8, 7), (0x8100, 200)],
                                        [(0x88A8, 4095)], [(0x8100, 0xA000 | 5)]))]
    frames += [b"\x02" * 12 + b"\x81\x00\x00",                     # C-tag cut
               b"\x02" * 12 + b"\x88\xa8\x00\x07\x81\x00",          # C-tag after S-tag cut
               b"\x02" * 12 + b"\x88\xa8\x00\x07\x81\x00\x00\x09",  # no ethertype after
               b"\x02" * 10]                                        # runt
    with open(path, "wb") as f:
        # dpkt's default snaplen is 1500: libpcap would cut the 1517-byte records to it,
        # and the run would count them `cut_short`, never run (tests/test_cut_short.py)
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for k, fr in enumerate(frames):
            w.writepkt(fr, ts=k * 1e-6)
    return frames


def _oracle(frames: list[bytes]) -> tuple[list[bytes], dict[int, int], int, int]:
    """What dpkt says the stripper must do: the frames out (tags removed), the stripped
    frames per innermost VID, how many frames are untagged, how many have a cut tag."""
    out: list[bytes] = []
    vids: dict[int, int] = {}
    untagged = cut = 0
    for fr in frames:
        try:
            eth = dpkt.ethernet.Ethernet(fr)
        except dpkt.NeedData:
            if len(fr) >= 14 and fr[12:14] in (b"\x81\x00", b"\x88\xa8"):
                cut += 1
            else:
                untagged += 1
            continue
        tags = getattr(eth, "vlan_tags", [])
        if not tags:
            untagged += 1
            continue
        n = len(tags)
        assert fr[12 + 4 * n:14 + 4 * n] == struct.pack(">H", LOCAL)
        vids[tags[-1].id] = vids.get(tags[-1].id, 0) + 1
        out.append(fr[:12] + fr[12 + 4 * n:])
    return out, vids, untagged, cut


def _run(tmp_path: Path, device: str, split: bool) -> tuple[dict[str, Any], list[bytes]]:
    made = runpy.run_path(str(TAG_STRIP))["program"](split=split)
    assert isinstance(made, Program)
    made.apply_setting(f"edge.device={device}")
    out = tmp_path / f"{device}{'_split' if split else ''}.pcap"
    o = RunOptions(input=tmp_path / "tags.pcap", output=out, timeout=60)
    b = build_for(made, o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    return s, read_frames(out)


@pytest.mark.parametrize(("device", "split"), [
    ("host", False), ("nic", False), ("nic", True),
    pytest.param("xdp", False, marks=needs_bpf), pytest.param("xdp", True, marks=needs_bpf)])
def test_a_tag_stripper_strips_802_1q_and_qinq_and_counts_per_vid(
        tmp_path: Path, device: str, split: bool) -> None:
    """Every tagged frame comes out with its tags gone, in order; per-VID counts, the
    untagged frames discarded and the cut tags dropped as dpkt counts them."""
    want, vids, untagged, cut = _oracle(_capture(tmp_path / "tags.pcap"))
    s, got = _run(tmp_path, device, split)
    assert got == want and len(want) == 24
    for fr in got:  # dpkt sees no tag left
        assert not getattr(dpkt.ethernet.Ethernet(fr), "vlan_tags", [])
    assert {k: v for k, v in enumerate(s["tables"]["per_vid"]) if v} == vids
    assert s["elements"]["strip"]["why"] == {"cut_tag": cut} and cut == 3
    # the runt (10 bytes) is untagged for the stripper; on xdp the kernel never sends it
    # into the veth pair: counted at the source as `runt` (docs/targets.md)
    runt = 1 if device == "xdp" else 0
    assert s["accounting"]["consumed"]["plain"] == untagged - runt
    assert s["accounting"]["unaccounted"] == 0


class VariableMove(Element):
    """A user's stripper of its first tag with memmove, whose size only the frame gives."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    body = r"""
    if (pkt->len < 18u)
        DROP();
    memmove(pkt->data + 12, pkt->data + 16, pkt->len - 16);  /* a run-time size */
    pkt->len -= 4;
    """


@needs_bpf
def test_a_memmove_of_a_run_time_size_on_xdp_names_the_element_and_what_to_do() -> None:
    """clang's BPF back end refuses it ("A call to built-in function 'memmove' is not
    supported", with a note naming the line); before, that raw text was the error."""
    with pytest.raises(OfflowError) as err:
        build(_one_segment(VariableMove("untag")))
    src = Path(__file__).read_text().splitlines()
    line = next(k for k, t in enumerate(src, 1) if t.strip().startswith("memmove(pkt->data + 12"))
    assert str(err.value) == (
        f"element `untag` (VariableMove), body line 3 ({__file__}:{line}): it calls `memmove` "
        "with a size not known at compile time: BPF has no `memmove`, clang expands it into "
        "loads and stores only for a constant size; give it a constant size (or copy the "
        "bytes in a loop) or place the element on a nic or host segment")


def _syn_capture(path: Path) -> None:
    """400 IPv4 frames from five /24s (one sends half of them): TCP with SYN, SYN+ACK,
    ACK or RST and payloads of 0..699 bytes, and UDP."""
    rng = random.Random(3)
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for i in range(400):
            net = rng.choice(["10.1.2", "10.1.3", "192.0.2", "198.51.100"] + ["203.0.113"] * 4)
            l4: dpkt.Packet
            if rng.random() < 0.15:
                l4, proto = dpkt.udp.UDP(sport=1, dport=53, data=b"q" * rng.randrange(30)), 17
            else:
                flags = rng.choice([dpkt.tcp.TH_SYN] * 3 + [dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK,
                                                            dpkt.tcp.TH_ACK, dpkt.tcp.TH_RST])
                l4, proto = dpkt.tcp.TCP(sport=rng.randrange(1024, 65535), dport=80,
                                         flags=flags, data=b"x" * rng.randrange(700)), 6
            ip = dpkt.ip.IP(src=socket.inet_aton(f"{net}.{rng.randrange(1, 255)}"),
                            dst=socket.inet_aton("10.9.9.9"), p=proto, data=l4, ttl=64)
            ip.len = len(ip)
            w.writepkt(bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                                    type=0x0800, data=ip)), ts=i * 1e-6)


@pytest.mark.parametrize(("device", "split"), [
    ("host", False), ("nic", False), ("nic", True), pytest.param("xdp", False, marks=needs_bpf)])
def test_a_syn_flood_detector_sends_each_nets_syns_past_the_limit_apart(
        tmp_path: Path, device: str, split: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per /24 the SYNs dpkt counts; the frames out are the input less each /24's SYNs
    past LIMIT, in order. Split: counted on the NIC, written by the host."""
    limit = 6
    _syn_capture(tmp_path / "syn.pcap")
    monkeypatch.setitem(os.environ, "LIMIT", str(limit))
    made = runpy.run_path(str(SYN_WATCH))["program"](split=split)
    assert isinstance(made, Program)
    made.apply_setting(f"edge.device={device}")
    o = RunOptions(input=tmp_path / "syn.pcap", output=tmp_path / "out.pcap", timeout=60)
    b = build_for(made, o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    per_net: dict[str, int] = {}
    want: list[bytes] = []
    for fr in read_frames(tmp_path / "syn.pcap"):
        ip = dpkt.ethernet.Ethernet(fr).data
        tcp = ip.data
        if isinstance(tcp, dpkt.tcp.TCP) and tcp.flags & 0x12 == dpkt.tcp.TH_SYN:
            net = socket.inet_ntoa(ip.src[:3] + b"\0")
            per_net[net] = per_net.get(net, 0) + 1
            if per_net[net] > limit:
                continue
        want.append(fr)
    assert read_frames(tmp_path / "out.pcap") == want
    # split: every frame out crossed from the NIC to the host, none lost there
    assert [(q["queue"], q["delivered"]) for q in s["queues"]] == (
        [("edge->app", len(want))] if split else [])
    assert s["accounting"]["consumed"]["suspect"] == 400 - len(want) > 0
    assert s["accounting"]["dropped"] == [] and s["accounting"]["unaccounted"] == 0
    assert {key[0]: n for key, n in s["tables"]["syn_nets"]["pairs"]} == per_net


def _fnv1a(data: bytes) -> int:
    """32-bit FNV-1a, written from its definition (not offlow's)."""
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def _flow_capture(path: Path) -> list[bytes]:
    """300 frames of 61, 333 and 1499 bytes (and a 60-byte ARP): IPv4 TCP, UDP and ICMP,
    IPv6 TCP and UDP over 14 flows, and non-IP frames, in a shuffled order."""
    rng = random.Random(12)
    flows: list[tuple[int, bytes, bytes, int, int, int]] = []
    for i in range(8):
        proto = (6, 17, 1)[i % 3]
        flows.append((4, bytes([10, 0, i, 1]), bytes([192, 0, 2, 9]),
                      0 if proto == 1 else 40000 + i, 0 if proto == 1 else 443, proto))
    for i in range(6):
        flows.append((6, bytes.fromhex("20010db8000000000000000000000a") + bytes([i]),
                      bytes.fromhex("20010db80000000000000000000000ff"),
                      50000 + i, (53, 80)[i % 2], (17, 6)[i % 2]))
    frames: list[bytes] = []
    for k in range(300):
        size = (61, 333, 1499)[k % 3]
        if k % 25 == 0:  # non-IP: ARP, or IEEE's local experimental ethertype
            typ = 0x0806 if k % 50 == 0 else LOCAL
            frames.append(struct.pack(">6s6sH", b"\xff" * 6, b"\x02" * 6, typ)
                          + bytes(rng.randrange(256) for _ in range(size - 14)))
            continue
        fam, src, dst, sport, dport, proto = rng.choice(flows)
        l4: dpkt.Packet
        if proto == 6:
            l4 = dpkt.tcp.TCP(sport=sport, dport=dport, flags=dpkt.tcp.TH_ACK)
        elif proto == 17:
            l4 = dpkt.udp.UDP(sport=sport, dport=dport)
        else:
            l4 = dpkt.icmp.ICMP(type=8, data=dpkt.icmp.ICMP.Echo(id=1, seq=k))
        head = 14 + (20 if fam == 4 else 40) + len(bytes(l4))
        l4.data = bytes(rng.randrange(256) for _ in range(max(0, size - head)))
        if proto == 17:
            l4.ulen = len(bytes(l4))
        ip: dpkt.Packet
        if fam == 4:
            ip = dpkt.ip.IP(src=src, dst=dst, p=proto, data=l4, ttl=64)
            ip.len = len(ip)
        else:
            ip = dpkt.ip6.IP6(src=src, dst=dst, nxt=proto, hlim=64, data=l4)
            ip.plen = len(bytes(l4))
        typ = 0x0800 if fam == 4 else 0x86DD
        fr = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=typ, data=ip))
        frames.append(fr + bytes(max(0, size - len(fr))))  # padded up to the size (IPv6 TCP: 74)
    frames.append(struct.pack(">6s6sH", b"\xff" * 6, b"\x02" * 6, 0x0806) + bytes(46))
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for k, fr in enumerate(frames):
            w.writepkt(fr, ts=k * 1e-6)
    return frames


def _flow_oracle(frames: list[bytes], every: int
                 ) -> tuple[list[bytes], dict[tuple[Any, ...], int]]:
    """What dpkt says the sampler must do: the mirrored frames, each flow's bytes."""
    mirror: list[bytes] = []
    per_flow: dict[tuple[Any, ...], int] = {}
    for fr in frames:
        ip = dpkt.ethernet.Ethernet(fr).data
        if isinstance(ip, dpkt.ip.IP):
            fam, proto = 4, ip.p
        elif isinstance(ip, dpkt.ip6.IP6):
            fam, proto = 6, ip.nxt
        else:
            continue
        l4 = ip.data
        sport, dport = ((l4.sport, l4.dport) if isinstance(l4, (dpkt.tcp.TCP, dpkt.udp.UDP))
                        else (0, 0))
        # the map's `ipv6` fields hold an IPv4 address in their first 4 bytes, zeros after
        src, dst = (socket.inet_ntop(socket.AF_INET6, a.ljust(16, b"\0")) for a in (ip.src, ip.dst))
        key = (fam, src, dst, sport, dport, proto)
        per_flow[key] = per_flow.get(key, 0) + len(fr)
        if _fnv1a(ip.src + ip.dst + struct.pack(">HHB", sport, dport, proto)) % every == 0:
            mirror.append(fr)
    return mirror, per_flow


@pytest.mark.parametrize(("device", "split"), [
    ("host", False), ("nic", False), ("nic", True)])
def test_a_flow_sampler_mirrors_one_flow_hash_in_n_and_counts_each_flows_bytes(
        tmp_path: Path, device: str, split: bool) -> None:
    """Every frame out in order; the mirror holds exactly the frames of the flows whose
    FNV-1a 5-tuple hash is 0 mod EVERY, in order; each flow's bytes as dpkt counts them."""
    every = 3
    frames = _flow_capture(tmp_path / "flows.pcap")
    mirror, per_flow = _flow_oracle(frames, every)
    made = runpy.run_path(str(FLOW_SAMPLE))["program"](every=every, split=split)
    assert isinstance(made, Program)
    made.apply_setting(f"edge.device={device}")
    o = RunOptions(input=tmp_path / "flows.pcap", output=tmp_path / "o.pcap", timeout=60)
    b = build_for(made, o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    assert read_frames(tmp_path / "o.out.pcap") == frames
    assert read_frames(tmp_path / "o.mirror.pcap") == mirror
    # split: each frame and each mirrored copy crossed from the NIC to the host
    assert [(q["queue"], q["delivered"]) for q in s["queues"]] == (
        [("edge->app", len(frames) + len(mirror))] if split else [])
    assert 0 < len(mirror) < len(frames) and len(per_flow) == 14
    assert {tuple(key): n for key, n in s["tables"]["flow_bytes"]["pairs"]} == per_flow
    assert s["accounting"]["dropped"] == [] and s["accounting"]["unaccounted"] == 0


def test_a_flow_sampler_on_xdp_is_one_error_naming_its_send() -> None:
    """XDP has one packet and one verdict: the mirror's copy (SEND) cannot be made there,
    split or not (docs/targets.md); one error says so and what to do."""
    made = runpy.run_path(str(FLOW_SAMPLE))["program"](every=3, split=True)
    assert isinstance(made, Program)
    made.apply_setting("edge.device=xdp")
    with pytest.raises(OfflowError) as err:
        build(made)
    assert str(err.value) == (
        "element `sample` (FlowSample) cannot run on target `xdp`: it sends copies of a packet "
        "(SEND); an XDP program has one packet and one verdict; place segment `edge` on "
        "another device")
