"""Segmentation offload end to end: sends built from the shared captures' flows and a
stream (TCP and UDP, IPv4 and IPv6, below and above the MSS, empty) go through a send
port from Python to examples/lso.py, whose NIC cuts them; independent readers judge the
output: tshark (no malformed packet, checksum error or TCP analysis flag; every TCP
stream reassembled equals what was sent), scapy's defragment (every datagram rebuilt),
dpkt (a send that fits one packet comes out as the very frame it was sent as)."""

from __future__ import annotations

import struct
import subprocess
from collections import Counter
from pathlib import Path

import dpkt
import pytest

from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.lso import sends as gen
from offlow.lso.app import EXAMPLE, Outcome, kinds_of, run_capture, session
from offlow.lso.port import descriptor
from offlow.paths import DATA
from tests.e2e import read_frames
from tests.lso_oracles import (
    reassembled_datagrams,
    sent_datagrams,
    sent_streams,
    tshark,
    tshark_problems,
    tshark_streams,
)

needs_data = pytest.mark.skipif(not (DATA / "tls_ciphers.pcap").exists(),
                                reason=f"shared captures not found in {DATA}")
needs_tshark = pytest.mark.skipif(tshark() is None,
                                  reason="tshark is not installed (./setup.sh installs it)")


def mixed_sends(path: Path) -> list[bytes]:
    """TCP and UDP, IPv4 and IPv6, from the captures' flows and from 384 KB of the BGP
    table as a stream (64 KB sends)."""
    tls, quic = DATA / "tls_ciphers.pcap", DATA / "quic.pcap"
    stream = (DATA / "bgp-full-table.txt.gz").read_bytes()[:384 * 1024]
    frames = [*gen.tcp_sends(tls, seed=1), *gen.tcp_sends(tls, ipv6=True, seed=2),
              *gen.udp_sends(quic, seed=3), *gen.udp_sends(quic, ipv6=True, seed=4),
              *gen.stream_sends(stream, "tcp", seed=5),
              *gen.stream_sends(stream[:200_000], "tcp", ipv6=True, seed=6, large=False),
              *gen.stream_sends(stream[:150_000], "udp", seed=7, large=False),
              *gen.stream_sends(stream[:150_000], "udp", ipv6=True, seed=8)]
    gen.write_pcap(path, frames)
    return frames


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[bytes], Outcome, Path]:
    if not (DATA / "tls_ciphers.pcap").exists():
        pytest.skip(f"shared captures not found in {DATA}")
    d = tmp_path_factory.mktemp("lso")
    frames = mixed_sends(d / "sends.pcap")
    o = run_capture(load_program(EXAMPLE), d / "sends.pcap", output=d / "out.pcap", mtu=1500)
    assert o.ok, (o.result.errors, o.errors)
    return frames, o, d / "out.pcap"


@needs_data
def test_every_send_is_cut_and_completed_by_every_kind(cut: tuple) -> None:
    frames, o, _ = cut
    assert o.posted == len(frames) and o.skipped == 0
    assert len(o.completions) == len(frames) and not any(c.status for c in o.completions)
    kinds = kinds_of(o.summary)
    assert all(kinds[k] > 0 for k in kinds), kinds   # every protocol and message kind
    a = o.summary["accounting"]
    assert a["read"] == len(frames) and a["consumed"] == {"lso": len(frames)}
    assert a["made"] == a["forwarded"] == sum(c.packets for c in o.completions)
    assert a["unaccounted"] == 0 and not a["dropped"]


@needs_data
@needs_tshark
def test_tshark_finds_no_malformed_packet_bad_checksum_or_tcp_analysis_flag(cut: tuple) -> None:
    _, _, out = cut
    assert tshark_problems(out) == []


@needs_data
@needs_tshark
def test_the_tshark_check_sees_a_bad_checksum_and_a_lost_segment(cut: tuple,
                                                                 tmp_path: Path) -> None:
    """The oracle can fail: one payload byte changed, one segment of a send left out."""
    _, _, out = cut
    frames = read_frames(out)
    big = [i for i, f in enumerate(frames) if len(f) > 1000 and f[23] == 6]
    bad = list(frames)
    bad[big[0]] = bad[big[0]][:-1] + bytes([bad[big[0]][-1] ^ 1])
    gen.write_pcap(tmp_path / "bad.pcap", bad)
    flagged = tshark_problems(tmp_path / "bad.pcap")
    assert any(line.startswith(f"{big[0] + 1}\t") for line in flagged)
    lost = frames[:big[3]] + frames[big[3] + 1:]
    gen.write_pcap(tmp_path / "lost.pcap", lost)
    assert tshark_problems(tmp_path / "lost.pcap")


@needs_data
@needs_tshark
def test_every_tcp_stream_reassembled_by_tshark_is_what_was_sent(cut: tuple) -> None:
    frames, _, out = cut
    sent = sent_streams(frames)
    got = tshark_streams(out)
    assert len(sent) > 60
    assert got == sent


@needs_data
def test_every_datagram_reassembled_by_scapy_is_what_was_sent(cut: tuple) -> None:
    frames, _, out = cut
    want = {k: sorted(v) for k, v in sent_datagrams(frames).items()}
    got = reassembled_datagrams(out)
    assert sum(len(v) for v in want.values()) > 60
    assert got == want


@needs_data
def test_packets_fit_the_mtu_and_single_packet_sends_are_the_frames_sent(cut: tuple) -> None:
    frames, _, out = cut
    got = read_frames(out)
    assert max(len(f) for f in got) <= 1514
    small = [f for f in frames if len(f) <= 1514]
    assert len(small) > 1000
    assert not Counter(small) - Counter(got)   # each one, byte for byte


@needs_data
def test_checksum_offload_leaves_the_pseudo_header_sums(tmp_path: Path) -> None:
    """In offload mode at MTU 1024 the TCP and UDP checksum fields hold the pseudo-header
    sum of each packet (of the datagram, in its first fragment) and IPv4 headers 0:
    completing them as a MAC would gives the checksums a compute run writes."""
    stream = (DATA / "bgp-full-table.txt.gz").read_bytes()[:100_000]
    frames = [*gen.stream_sends(stream, "tcp", seed=1),
              *gen.stream_sends(stream, "udp", ipv6=True, seed=2)]
    gen.write_pcap(tmp_path / "s.pcap", frames)
    runs = {}
    for off in (False, True):
        out = tmp_path / f"out{int(off)}.pcap"
        o = run_capture(load_program(EXAMPLE), tmp_path / "s.pcap", offload=off, output=out,
                        mtu=1024)
        assert o.ok, o.result.errors
        runs[off] = read_frames(out)
    assert len(runs[False]) == len(runs[True]) > 100
    for full, part in zip(runs[False], runs[True], strict=True):
        assert len(full) == len(part) and len(full) <= 1038
        eth = dpkt.ethernet.Ethernet(part)
        ip = eth.data
        if isinstance(ip, dpkt.ip.IP):
            assert ip.sum == 0
            pseudo = ip.src + ip.dst + struct.pack("!HH", ip.p, ip.len - ip.hl * 4)
        else:
            nh = 6 if isinstance(ip.data, dpkt.tcp.TCP) else 17
            if ip.nxt == 44:   # a fragment: the first carries the whole datagram's sum
                frag = part[54:62]
                if struct.unpack("!H", frag[2:4])[0] & ~7:
                    assert part[62:] == full[62:]
                    continue
                dlen = struct.unpack("!H", part[62 + 4:62 + 6])[0]
            else:
                dlen = ip.plen
            pseudo = ip.src + ip.dst + struct.pack("!IxxxB", dlen, nh)
        at = 14 + (ip.hl * 4 if isinstance(ip, dpkt.ip.IP) else 40 + (8 if ip.nxt == 44 else 0))
        field = at + (16 if (ip.p if isinstance(ip, dpkt.ip.IP) else ip.nxt) == 6 else 6)
        words = struct.unpack(f"!{len(pseudo) // 2}H", pseudo)
        s = sum(words)
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        assert part[field:field + 2] == struct.pack("!H", s), "pseudo-header sum"
        # the rest of the packet is what compute mode wrote, checksums aside
        mask = {field, field + 1} | ({24, 25} if isinstance(ip, dpkt.ip.IP) else set())
        assert all(a == b for i, (a, b) in enumerate(zip(full, part, strict=True))
                   if i not in mask)


@needs_data
def test_malformed_descriptors_are_refused_counted_and_completed_with_their_reason(
        tmp_path: Path) -> None:
    """A host program posts good sends and five malformed descriptors through the Python
    API: each malformed one is dropped at the element with its reason, completed with
    it, and the good ones around them are cut."""
    tmpl = gen.Framer(gen.Endpoint(b"\x02" * 6, bytes([192, 0, 2, 1]), 1234),
                      gen.Endpoint(b"\x04" * 6, bytes([192, 0, 2, 2]), 80), False).tcp(
                          1, 1, 0x18)
    with session(load_program(EXAMPLE), output=tmp_path / "o.pcap", mtu=1500) as s:
        s.port.send(tmpl, bytes(5000), mss=1460)
        s.port.post_raw(descriptor(tmpl, 4 << 20, 100, 1460, tag=101))   # past the buffer
        s.port.post_raw(descriptor(tmpl, 0, 100, 0, tag=102))            # MSS 0
        s.port.post_raw(descriptor(tmpl, 0, 3000, 1461, tag=103))        # above the MTU
        s.port.post_raw(descriptor(tmpl[:40], 0, 100, 1460, tag=104))    # template cut
        s.port.post_raw(descriptor(tmpl, 0, 100, 1460)[:20])             # descriptor cut
        s.port.send(tmpl, bytes(3000), mss=1000)
    o = s.result
    assert o.ok, o.result.errors
    reasons = [c.reason for c in o.completions]
    assert reasons == ["", "beyond_buffer", "bad_mss", "bad_mss", "bad_template", "bad_desc", ""]
    assert [c.packets for c in o.completions] == [4, 0, 0, 0, 0, 0, 3]
    why = o.summary["elements"]["lso"]["why"]
    assert why == {"bad_desc": 1, "bad_template": 1, "beyond_buffer": 1, "bad_mss": 2,
                   "too_long": 0, "engine": 0, "made_too_long": 0}
    assert o.summary["accounting"]["forwarded"] == 7 and len(read_frames(tmp_path / "o.pcap")) == 7


def test_the_host_refuses_what_it_can_know_is_wrong_before_posting(tmp_path: Path) -> None:
    tmpl = gen.Framer(gen.Endpoint(b"\x02" * 6, bytes(4), 1), gen.Endpoint(b"\x04" * 6,
                      bytes(4), 2), False).udp(b"")
    with session(load_program(EXAMPLE), mtu=1500) as s:
        with pytest.raises(OfflowError, match="not a send the port takes"):
            s.port.send(tmpl[:30], b"x", mss=100)
        with pytest.raises(OfflowError, match="not a send the port takes"):
            s.port.send(tmpl, b"x", mss=0)
        with pytest.raises(OfflowError, match="not a send the port takes"):
            s.port.send(tmpl, bytes(65536), mss=1000)
    assert s.result.ok and s.result.completions == []


@needs_data
@pytest.mark.parametrize("move", ["dma", "auto", "place"])
def test_dma_auto_and_in_place_cut_the_same_packets_as_pio(tmp_path: Path, move: str) -> None:
    stream = (DATA / "bgp-full-table.txt.gz").read_bytes()[:150_000]
    frames = [*gen.stream_sends(stream, "tcp", seed=1, large=False),
              *gen.stream_sends(stream, "udp", seed=2, large=False)]
    gen.write_pcap(tmp_path / "s.pcap", frames)
    outs = {}
    for m in ("pio", move):
        o = run_capture(load_program(EXAMPLE), tmp_path / "s.pcap", output=tmp_path / f"{m}.pcap",
                        mtu=1500, move=m, dma_min=1000)
        assert o.ok, o.result.errors
        outs[m] = read_frames(tmp_path / f"{m}.pcap")
    assert len(outs["pio"]) > 100 and outs["pio"] == outs[move]


@pytest.fixture(scope="module")
def rte_gso() -> Path:
    """DPDK's side of the benchmark (installs libdpdk-dev when missing and this is root
    with apt-get; otherwise the tests that need it skip with the reason)."""
    from benchmarks.common.peers import setup_dpdk
    from benchmarks.lso import build_dpdk

    version, why = setup_dpdk()
    if version is None:
        pytest.skip(f"DPDK is missing: {why}")
    return build_dpdk()


@needs_data
@pytest.mark.parametrize("mtu", [512, 1500])
def test_rte_gso_cuts_the_same_packets_byte_for_byte(rte_gso: Path, tmp_path: Path,
                                                     mtu: int) -> None:
    """The same TCP/IPv4 and UDP/IPv4 sends (the captures' flows and a stream of mixed
    sizes) through the program and through DPDK 22.11's rte_gso_segment (gso_size the
    headers plus the same MSS; checksums computed with DPDK's rte_ipv4_cksum and
    rte_ipv4_udptcp_cksum*, rte_gso leaving them to offload): the packets are the same,
    header and payload. The standards leave the IPv4 Identification of TCP segments
    with DF set free (RFC 6864); both take the template's and add one per segment, so
    no field is masked. (rte_gso in 22.11 segments no IPv6: tshark and scapy judge
    offlow's IPv6 packets above.)"""
    stream = (DATA / "bgp-full-table.txt.gz").read_bytes()[:200_000]
    frames = [*gen.tcp_sends(DATA / "tls_ciphers.pcap", seed=3),
              *gen.udp_sends(DATA / "quic.pcap", seed=4),
              *gen.stream_sends(stream, "tcp", seed=5, large=False),
              *gen.stream_sends(stream, "udp", seed=6, large=False)]
    gen.write_pcap(tmp_path / "s.pcap", frames)
    o = run_capture(load_program(EXAMPLE), tmp_path / "s.pcap", output=tmp_path / "ours.pcap",
                    mtu=mtu)
    assert o.ok, o.result.errors
    res = subprocess.run([str(rte_gso), "dump", str(tmp_path / "s.pcap"), str(mtu),
                          str(tmp_path / "gso.pcap")], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    ours, theirs = read_frames(tmp_path / "ours.pcap"), read_frames(tmp_path / "gso.pcap")
    assert len(ours) > len(frames) + 100   # sends cut into several packets
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert len(ours) == len(theirs) and differ == []
