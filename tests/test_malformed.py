"""The malformed-packet capture: it reads back with dpkt record for record, its valid
frames decode cleanly with correct checksums, and every frame's category agrees with
an independent reading of the protocol rules."""

from __future__ import annotations

import struct
from pathlib import Path

import dpkt
import pytest

from offlow.testing import count_categories, malformed_cases, write_malformed_pcap
from offlow.testing.malformed import BAD, CATEGORIES


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    path = tmp_path_factory.mktemp("malformed") / "malformed.pcap"
    return path, write_malformed_pcap(path)


def _fold(data: bytes) -> int:
    return dpkt.in_cksum(data)


def reference(frame: bytes) -> tuple[str, str]:
    """What a correct Ethernet -> IP -> UDP/TCP pipeline does with ``frame``, written
    from the RFCs with struct (independent of offlow's parsers): its category and, for
    a malformed frame, the reason the rejecting element gives."""
    if len(frame) < 14:
        return "bad_eth", "malformed"
    (et,) = struct.unpack_from("!H", frame, 12)
    off = 14
    for _ in range(2):
        if et not in (0x8100, 0x88A8, 0x9100):
            break
        if len(frame) < off + 4:
            return "bad_eth", "malformed"
        (et,) = struct.unpack_from("!H", frame, off + 2)
        off += 4
    rest = frame[off:]
    if et == 0x0800:
        if len(rest) < 20 or rest[0] >> 4 != 4:
            return "bad_ipv4", "malformed"
        hl = (rest[0] & 15) * 4
        (total, flags) = struct.unpack_from("!HxxH", rest, 2)
        if hl < 20 or hl > len(rest) or total < hl or total > len(rest):
            return "bad_ipv4", "malformed"
        if dpkt.in_cksum(rest[:hl]) != 0:
            return "bad_ipv4", "bad_checksum"
        proto, l4 = rest[9], rest[hl:total]  # what follows `total` is padding
        first, later = bool(flags & 0x2000) and not flags & 0x1FFF, bool(flags & 0x1FFF)
    elif et == 0x86DD:
        if len(rest) < 40 or rest[0] >> 4 != 6:
            return "bad_ipv6", "malformed"
        (plen,) = struct.unpack_from("!H", rest, 4)
        if plen > len(rest) - 40:
            return "bad_ipv6", "malformed"
        payload, proto, nth, first, later = rest[40:40 + plen], rest[6], 0, False, False
        while proto in (0, 43, 44, 51, 60) and not later:
            if (proto == 0 and nth) or len(payload) < 8:
                return "bad_ipv6", "malformed"
            size = 8 if proto == 44 else (payload[1] + 2) * 4 if proto == 51 \
                else (payload[1] + 1) * 8
            if size > len(payload):
                return "bad_ipv6", "malformed"
            if proto == 44:  # a fragment header: offset << 3 | more fragments
                (word,) = struct.unpack_from("!H", payload, 2)
                later, first = word >> 3 != 0, word >> 3 == 0 and bool(word & 1)
            proto, payload, nth = payload[0], payload[size:], nth + 1
        l4 = payload
    else:
        return "other", ""
    valid = ("valid_ipv4" if et == 0x0800 else "valid_ipv6"), ""
    if later or proto not in (6, 17):
        return valid
    if proto == 17:
        if len(l4) < 8:
            return "bad_l4", "truncated"
        (ulen,) = struct.unpack_from("!H", l4, 4)
        if ulen < 8:
            return "bad_l4", "bad_header"
        if ulen > len(l4) and not first:
            return "bad_l4", "past_payload"
        return valid
    if len(l4) < 20:
        return "bad_l4", "truncated"
    if l4[12] >> 4 < 5:
        return "bad_l4", "bad_header"
    if (l4[12] >> 4) * 4 > len(l4):
        return "bad_l4", "past_payload"
    return valid


def test_counts_match_the_frames_written(capture: tuple[Path, dict[str, int]]) -> None:
    _, counts = capture
    cases = malformed_cases()
    assert counts == count_categories(cases)
    assert counts["total"] == len(cases) == sum(counts[c] for c in CATEGORIES) + 1
    assert counts["cut_short"] == 1  # the snapped record: dropped at a run's source
    assert counts["bad"] == sum(counts[c] for c in BAD) + 1
    assert counts["valid_ipv4"] >= 20 and counts["valid_ipv6"] >= 20
    assert all(counts[c] >= 4 for c in BAD)


def test_capture_reads_back_with_dpkt_record_for_record(
        capture: tuple[Path, dict[str, int]]) -> None:
    path, counts = capture
    with open(path, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        assert reader.datalink() == dpkt.pcap.DLT_EN10MB
        records = list(reader)
    cases = malformed_cases()
    assert len(records) == counts["total"]
    assert [bytes(buf) for _, buf in records] == [c.frame for c in cases]
    assert all(b >= a for (a, _), (b, _) in zip(records, records[1:], strict=False))


def test_snapped_record_keeps_its_wire_length(capture: tuple[Path, dict[str, int]]) -> None:
    path, _ = capture
    data = path.read_bytes()
    off, lens = 24, []
    while off < len(data):
        _, _, incl, orig = struct.unpack_from("<IIII", data, off)
        lens.append((incl, orig))
        off += 16 + incl
    snapped = [(i, o) for i, o in lens if o != i]
    assert snapped == [(64, 1492)]


def test_valid_frames_decode_with_dpkt_and_have_correct_checksums() -> None:
    for case in malformed_cases():
        if not case.category.startswith("valid"):
            continue
        eth = dpkt.ethernet.Ethernet(case.frame)
        ip = eth.data
        want = dpkt.ip.IP if case.category == "valid_ipv4" else dpkt.ip6.IP6
        assert isinstance(ip, want), case.name
        if isinstance(ip, dpkt.ip.IP):
            off = 14 + 4 * len(getattr(eth, "vlan_tags", None) or [])
            hdr = case.frame[off:off + ip.hl * 4]
            assert ip.ttl == 64 and _fold(hdr) == 0, case.name
            pseudo = struct.pack("!4s4sBBH", ip.src, ip.dst, 0, ip.p, ip.len - ip.hl * 4)
        else:
            assert ip.hlim == 64, case.name
            seg_len = len(bytes(ip.data)) if ip.p in (6, 17) else 0
            pseudo = struct.pack("!16s16sIxxxB", ip.src, ip.dst, seg_len, ip.p)
        # a fragment's transport checksum covers bytes other fragments hold
        frag6 = (getattr(ip, "extension_hdrs", None) or {}).get(44)
        fragment = (ip.mf or ip.offset) if isinstance(ip, dpkt.ip.IP) else (
            frag6 is not None and frag6.frag_off != 0)
        if ip.p in (6, 17) and not fragment:
            l4 = ip.data
            assert isinstance(l4, dpkt.udp.UDP if ip.p == 17 else dpkt.tcp.TCP), case.name
            assert _fold(pseudo + bytes(l4)) == 0, f"{case.name}: transport checksum"


def test_every_frame_is_in_the_category_the_protocol_rules_give() -> None:
    wrong = [(c.name, c.category, c.reason, reference(c.frame)) for c in malformed_cases()
             if reference(c.frame) != (c.category, c.reason)]
    assert wrong == []


def test_ethernet_frames_of_other_types_are_not_ip() -> None:
    others = [c for c in malformed_cases() if c.category == "other"]
    assert others and all(isinstance(dpkt.ethernet.Ethernet(c.frame).data, dpkt.arp.ARP)
                          for c in others)
