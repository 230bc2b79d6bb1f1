"""A capture mixing valid packets with malformed ones, for robustness tests.

Every frame is packed by hand (``struct``), so malformed fields are exactly what
is written here; no library "fixes" a length or checksum.  Each frame carries the
category a correct parser pipeline (Ethernet -> IPv4 + header checksum / IPv6 ->
UDP/TCP, as the header elements do it) puts it in:

- ``valid_ipv4``, ``valid_ipv6``: well-formed IP packets (TTL / hop limit 64, correct
  IPv4 header checksums, UDP checksums 0 or correct), some VLAN tagged;
- ``other``: well-formed non-IP frames (ARP);
- ``bad_eth``: the Ethernet header or a VLAN tag is cut short (zero-length frames too);
- ``bad_ipv4``: the IPv4 header is cut, has IHL < 5, a wrong version, a total length
  beyond the frame or below the header, or a wrong checksum;
- ``bad_ipv6``: the IPv6 header is cut, has a wrong version, a payload length beyond
  the frame, or an extension header chain running past the payload;
- ``bad_l4``: a valid IP header, then a UDP/TCP header that is cut by the end of the
  IP payload (Ethernet padding after it does not count), has a TCP data offset < 5 or
  a UDP length < 8, or whose UDP length or TCP data offset runs past the IP payload
  (a first fragment's UDP length may: it covers the whole datagram; a later fragment
  holds no transport header at all).

A malformed frame's ``reason`` is the drop reason of the element that rejects it
(ParseEth, CheckIPv4, CheckIPv6, ParseL4's ``drops``). One record is cut by the
capture's snap length (its frame's bytes a ``bad_ipv4``): a run never parses it, it
counts it at the source as ``cut_short`` (``count_categories``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from offlow.netsum import csum, l4_csum

CATEGORIES = ("valid_ipv4", "valid_ipv6", "other", "bad_eth", "bad_ipv4", "bad_ipv6", "bad_l4")
BAD = ("bad_eth", "bad_ipv4", "bad_ipv6", "bad_l4")

MAC_DST = bytes.fromhex("020000000001")
MAC_SRC = bytes.fromhex("020000000002")
SRC4 = bytes([10, 0, 0, 1])
DST4 = bytes([192, 168, 1, 2])
SRC6 = bytes.fromhex("20010db8000000000000000000000001")
DST6 = bytes.fromhex("20010db8000000000000000000000002")


@dataclass(frozen=True)
class Case:
    """One frame of the capture: what it is, its category and its bytes.

    ``wire_len`` is the record's original length (larger than ``len(frame)`` for a
    frame cut by the capture's snap length)."""

    name: str
    category: str
    frame: bytes
    wire_len: int | None = None
    why: str = ""  # the drop reason, when not its category's usual one (see `reason`)

    @property
    def cut(self) -> bool:
        """Its record holds fewer bytes than the frame had: a run never parses it."""
        return self.wire_len is not None and self.wire_len > len(self.frame)

    @property
    def reason(self) -> str:
        """The drop reason of a malformed frame ("" for a valid one)."""
        return self.why or ("malformed" if self.category in BAD[:3] else "")


def eth(ethertype: int, tags: tuple[int, ...] = ()) -> bytes:
    """Ethernet header with VLAN tags (TPIDs given, VLAN ids 100, 101, ...)."""
    h = MAC_DST + MAC_SRC
    for i, tpid in enumerate(tags):
        h += struct.pack("!HH", tpid, 100 + i)
    return h + struct.pack("!H", ethertype)


def ipv4(payload: bytes, proto: int, *, ihl: int = 5, version: int = 4,
         total_len: int | None = None, ttl: int = 64, bad_csum: bool = False,
         ident: int = 1, frag: int = 0) -> bytes:
    """IPv4 header (NOP options when ihl > 5) followed by ``payload``; ``frag`` is the
    flags and fragment offset word (0x2000: more fragments; offset in 8-byte units)."""
    opts = b"\x01" * (max(ihl, 5) * 4 - 20)
    tl = 20 + len(opts) + len(payload) if total_len is None else total_len
    h = struct.pack("!BBHHHBBH4s4s", version << 4 | ihl, 0, tl, ident, frag, ttl, proto, 0,
                    SRC4, DST4) + opts
    c = csum(h)
    if bad_csum:
        c ^= 0x0101
    return h[:10] + struct.pack("!H", c) + h[12:] + payload


def ipv6(payload: bytes, nh: int, *, version: int = 6, plen: int | None = None,
         hlim: int = 64) -> bytes:
    """IPv6 header followed by ``payload`` (extension headers included)."""
    pl = len(payload) if plen is None else plen
    return struct.pack("!IHBB16s16s", version << 28, pl, nh, hlim, SRC6, DST6) + payload


def ext(nh: int, body_units: int = 0) -> bytes:
    """Hop-by-hop / routing / destination-options header of 8 * (1 + body_units) bytes."""
    return struct.pack("!BB", nh, body_units) + b"\0" * (6 + 8 * body_units)


def frag(nh: int, offset: int = 0) -> bytes:
    """IPv6 fragment header: ``offset`` (8-byte units), more fragments when 0."""
    return struct.pack("!BBHI", nh, 0, offset << 3 | (0 if offset else 1), 0x1234)


def _addrs(version: int) -> tuple[bytes, bytes]:
    """The source and destination addresses of IP ``version``'s frames."""
    return (SRC4, DST4) if version == 4 else (SRC6, DST6)


def udp(sport: int, dport: int, payload: bytes, *, length: int | None = None,
        version: int | None = None) -> bytes:
    """UDP header and payload; checksummed for IP ``version`` 4 or 6, else 0."""
    ln = 8 + len(payload) if length is None else length
    seg = struct.pack("!HHHH", sport, dport, ln, 0) + payload
    if version is None:
        return seg
    return seg[:6] + struct.pack("!H", l4_csum(*_addrs(version), 17, seg)) + seg[8:]


def tcp(sport: int, dport: int, payload: bytes, *, doff: int = 5,
        version: int | None = None) -> bytes:
    """TCP header (NOP options when doff > 5), flags PSH|ACK; checksummed for IP
    ``version`` 4 or 6, else 0."""
    opts = b"\x01" * (max(doff, 5) * 4 - 20)
    seg = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, doff << 4, 0x18, 65535, 0, 0) + \
        opts + payload
    if version is None:
        return seg
    return seg[:16] + struct.pack("!H", l4_csum(*_addrs(version), 6, seg)) + seg[18:]


def arp() -> bytes:
    """An ARP request for 192.168.1.2."""
    return struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, MAC_SRC, SRC4, b"\0" * 6, DST4)


def _valid_cases() -> list[Case]:
    cases: list[Case] = []
    for i in range(12):
        pay = bytes((i + k) % 256 for k in range(18 + 37 * i))
        dport = 53 if i % 2 else 443
        cases.append(Case(f"ipv4_udp_{i}", "valid_ipv4",
                          eth(0x0800) + ipv4(udp(5000 + i, dport, pay, version=4), 17,
                                             ident=i)))
        cases.append(Case(f"ipv4_tcp_{i}", "valid_ipv4",
                          eth(0x0800) + ipv4(tcp(40000 + i, 443, pay, doff=5 + i % 3, version=4), 6,
                                             ihl=5 + i % 2, ident=100 + i)))
        cases.append(Case(f"ipv6_udp_{i}", "valid_ipv6",
                          eth(0x86DD) + ipv6(udp(6000 + i, 443, pay, version=6), 17)))
        cases.append(Case(f"ipv6_tcp_{i}", "valid_ipv6",
                          eth(0x86DD) + ipv6(tcp(41000 + i, 80, pay, doff=5 + i % 4,
                                                 version=6), 6)))
    pay = b"x" * 30
    cases += [
        Case("vlan_ipv4_udp", "valid_ipv4",
             eth(0x0800, (0x8100,)) + ipv4(udp(1234, 53, pay, version=4), 17)),
        Case("qinq_ipv4_tcp", "valid_ipv4",
             eth(0x0800, (0x88A8, 0x8100)) + ipv4(tcp(1234, 443, pay, version=4), 6)),
        Case("ipv4_icmp", "valid_ipv4", eth(0x0800) + ipv4(b"\x08\0\0\0\0\1\0\1" + pay, 1)),
        Case("ipv4_padded", "valid_ipv4",
             eth(0x0800) + ipv4(udp(1, 2, b"", version=4), 17) + b"\0" * 18),
        Case("vlan_ipv6_udp", "valid_ipv6",
             eth(0x86DD, (0x8100,)) + ipv6(udp(1234, 53, pay, version=6), 17)),
        Case("ipv6_ext_udp", "valid_ipv6",
             eth(0x86DD) + ipv6(ext(60) + ext(17, 1) + udp(1, 443, pay, version=6), 0)),
        Case("ipv6_frag_udp", "valid_ipv6",
             eth(0x86DD) + ipv6(ext(44) + frag(17) + udp(1, 53, pay, version=6), 43)),
        Case("ipv6_no_next", "valid_ipv6", eth(0x86DD) + ipv6(b"", 59)),
        Case("arp", "other", eth(0x0806) + arp()),
        Case("vlan_arp", "other", eth(0x0806, (0x8100,)) + arp()),
        # a first fragment: its UDP length counts the whole datagram, more than it holds
        Case("ipv4_first_fragment_udp", "valid_ipv4",
             eth(0x0800) + ipv4(udp(7, 53, pay, length=8 + 3 * len(pay)), 17, frag=0x2000)),
        # later fragments hold no transport header: their bytes are not one
        Case("ipv4_later_fragment", "valid_ipv4",
             eth(0x0800) + ipv4(b"\0\0\0\0\0\3" + pay, 17, frag=4)),
        Case("ipv6_later_fragment", "valid_ipv6",
             eth(0x86DD) + ipv6(frag(6, offset=4) + b"\0" * 12 + b"\x10" + pay, 44)),
    ]
    return cases


def _bad_cases() -> list[Case]:
    u = udp(1, 53, b"y" * 20)
    t = tcp(1, 443, b"z" * 20)
    good4 = ipv4(u, 17)
    good6 = ipv6(u, 17)
    return [
        Case("zero_length", "bad_eth", b""),
        Case("eth_6_bytes", "bad_eth", MAC_DST),
        Case("eth_13_bytes", "bad_eth", eth(0x0800)[:13]),
        Case("vlan_tag_cut", "bad_eth", eth(0x0800, (0x8100,))[:16]),
        Case("qinq_second_tag_cut", "bad_eth", eth(0x0800, (0x88A8, 0x8100))[:20]),
        Case("ipv4_header_cut", "bad_ipv4", eth(0x0800) + good4[:10]),
        Case("ipv4_ihl_4", "bad_ipv4", eth(0x0800) + ipv4(u, 17, ihl=4)),
        Case("ipv4_ihl_0", "bad_ipv4", eth(0x0800) + ipv4(u, 17, ihl=0)),
        Case("ipv4_version_5", "bad_ipv4", eth(0x0800) + ipv4(u, 17, version=5)),
        Case("ipv4_version_6", "bad_ipv4", eth(0x0800) + ipv4(u, 17, version=6)),
        Case("ipv4_ihl_past_frame", "bad_ipv4", eth(0x0800) + ipv4(b"", 17, ihl=15)[:40]),
        Case("ipv4_total_len_plus_1", "bad_ipv4",
             eth(0x0800) + ipv4(u, 17, total_len=20 + len(u) + 1)),
        Case("ipv4_total_len_65535", "bad_ipv4", eth(0x0800) + ipv4(u, 17, total_len=65535)),
        Case("ipv4_total_len_below_header", "bad_ipv4",
             eth(0x0800) + ipv4(u, 17, total_len=19)),
        Case("ipv4_bad_checksum", "bad_ipv4", eth(0x0800) + ipv4(u, 17, bad_csum=True),
             why="bad_checksum"),
        Case("ipv4_snapped_record", "bad_ipv4",
             (eth(0x0800) + ipv4(udp(1, 53, b"s" * 1450), 17))[:64], wire_len=1492),
        Case("ipv6_header_cut", "bad_ipv6", eth(0x86DD) + good6[:30]),
        Case("ipv6_version_4", "bad_ipv6", eth(0x86DD) + ipv6(u, 17, version=4)),
        Case("ipv6_payload_len_plus_1", "bad_ipv6",
             eth(0x86DD) + ipv6(u, 17, plen=len(u) + 1)),
        Case("ipv6_payload_len_65535", "bad_ipv6", eth(0x86DD) + ipv6(u, 17, plen=65535)),
        Case("ipv6_ext_past_end", "bad_ipv6", eth(0x86DD) + ipv6(ext(17, 200)[:8] + u, 0)),
        Case("ipv6_ext_chain_cut", "bad_ipv6", eth(0x86DD) + ipv6(ext(60) + ext(17)[:4], 0)),
        Case("ipv6_ext_past_payload_len", "bad_ipv6",
             eth(0x86DD) + ipv6(ext(60) + ext(17) + u, 0, plen=12)),
        Case("ipv6_hop_by_hop_not_first", "bad_ipv6",
             eth(0x86DD) + ipv6(ext(0) + ext(17) + u, 60)),
        Case("tcp_doff_4", "bad_l4", eth(0x0800) + ipv4(tcp(1, 443, b"z" * 20, doff=4), 6),
             why="bad_header"),
        Case("tcp_doff_0", "bad_l4", eth(0x0800) + ipv4(tcp(1, 443, b"", doff=0), 6),
             why="bad_header"),
        Case("tcp_doff_past_frame", "bad_l4",
             eth(0x0800) + ipv4(tcp(1, 443, b"", doff=15)[:24], 6), why="past_payload"),
        Case("tcp_header_cut", "bad_l4", eth(0x0800) + ipv4(t[:12], 6), why="truncated"),
        Case("udp_header_cut", "bad_l4", eth(0x0800) + ipv4(u[:4], 17), why="truncated"),
        Case("udp_length_7", "bad_l4", eth(0x0800) + ipv4(udp(1, 53, b"", length=7), 17),
             why="bad_header"),
        Case("ipv6_tcp_doff_3", "bad_l4", eth(0x86DD) + ipv6(tcp(1, 80, b"q", doff=3), 6),
             why="bad_header"),
        Case("ipv6_udp_cut", "bad_l4", eth(0x86DD) + ipv6(u[:6], 17), why="truncated"),
        Case("udp_length_past_ip_payload", "bad_l4",
             eth(0x0800) + ipv4(udp(1, 53, b"y" * 20, length=8 + 30), 17),
             why="past_payload"),
        Case("ipv6_udp_length_past_payload", "bad_l4",
             eth(0x86DD) + ipv6(udp(1, 53, b"y" * 20, length=8 + 21), 17),
             why="past_payload"),
        # the header with its options fits the frame, but only thanks to the padding
        Case("tcp_doff_past_ip_payload", "bad_l4",
             eth(0x0800) + ipv4(tcp(1, 443, b"", doff=6)[:20], 6) + b"\0" * 10,
             why="past_payload"),
        Case("udp_header_in_padding", "bad_l4",
             eth(0x0800) + ipv4(u[:4], 17) + u[4:8] + b"\0" * 10, why="truncated"),
    ]


def malformed_cases() -> list[Case]:
    """Every frame of the capture, valid and malformed interleaved, in file order."""
    valid, bad = _valid_cases(), _bad_cases()
    out: list[Case] = []
    for i in range(max(len(valid), len(bad))):
        out += valid[i:i + 1] + bad[i:i + 1]
    return out


def count_categories(cases: list[Case]) -> dict[str, int]:
    """Counts by category as a run of the capture sees them, plus ``cut_short`` (the
    records cut by the snap length: a run drops them at the source, counted there, and
    never parses them, so they are not in their category's count), ``bad`` (every
    frame a run drops: the malformed ones and the cut ones) and ``total``."""
    counts = {c: 0 for c in CATEGORIES}
    counts["cut_short"] = 0
    for case in cases:
        counts["cut_short" if case.cut else case.category] += 1
    counts["bad"] = sum(counts[c] for c in BAD) + counts["cut_short"]
    counts["total"] = len(cases)
    return counts


def write_pcap(path: Path | str, cases: list[Case], snaplen: int = 65535) -> None:
    """Write ``cases`` as a classic little-endian microsecond pcap (Ethernet)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
        for i, case in enumerate(cases):
            wire = len(case.frame) if case.wire_len is None else case.wire_len
            f.write(struct.pack("<IIII", 1_700_000_000 + i // 1000, (i % 1000) * 1000,
                                len(case.frame), wire))
            f.write(case.frame)


def write_malformed_pcap(path: Path | str) -> dict[str, int]:
    """Write the mixed capture to ``path``; returns the expected counts by category
    (see the module doc) plus ``bad`` and ``total``."""
    cases = malformed_cases()
    write_pcap(path, cases)
    return count_categories(cases)
