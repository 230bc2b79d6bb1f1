"""offlow/netsum.py: the Internet checksum the packet builders and the test inputs
share, its UDP/TCP pseudo-header and its NumPy form over many rows, against RFC 1071's
worked example and dpkt's own implementation (an independent oracle)."""

from __future__ import annotations

import random
import struct

import dpkt
import numpy as np
import pytest

from offlow.netsum import TCP, UDP, csum, csum_rows, l4_csum, pseudo_header


def test_the_checksum_of_rfc_1071s_example() -> None:
    # RFC 1071, 3.: the words 0001 f203 f4f5 f6f7 add up to ddf2; the checksum stores
    # its complement
    assert csum(bytes.fromhex("0001f203f4f5f6f7")) == 0x220D


def test_the_checksum_agrees_with_dpkts_on_every_length() -> None:
    rng = random.Random(7)
    for n in [*range(0, 70), 1499, 1500, 65535]:
        data = rng.randbytes(n)
        assert csum(data) == dpkt.in_cksum(data), n



def _segment(proto: int, rng: random.Random, size: int) -> dpkt.Packet:
    """A UDP or TCP segment with `size` random payload bytes and a zero checksum."""
    data = rng.randbytes(size)
    if proto == UDP:
        return dpkt.udp.UDP(sport=rng.randrange(65536), dport=53, ulen=8 + size, sum=0,
                            data=data)
    return dpkt.tcp.TCP(sport=rng.randrange(65536), dport=80, seq=rng.randrange(1 << 32),
                        flags=0x18, sum=0, data=data)


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("proto", [UDP, TCP])
def test_udp_and_tcp_checksums_agree_with_dpkts(family: int, proto: int) -> None:
    """l4_csum over the pseudo-header = the checksum dpkt writes when it packs the
    segment into an IPv4 or IPv6 packet (its own pseudo-header code)."""
    rng = random.Random(family * 100 + proto)
    for size in [*range(0, 12), 100, 1001, 1472]:
        alen = 4 if family == 4 else 16
        src, dst = rng.randbytes(alen), rng.randbytes(alen)
        seg = _segment(proto, rng, size)
        raw = bytes(seg)  # checksum field 0
        if family == 4:
            pkt = dpkt.ip.IP(src=src, dst=dst, p=proto, data=seg)
            want = dpkt.ip.IP(bytes(pkt)).data.sum
        else:
            pkt = dpkt.ip6.IP6(src=src, dst=dst, nxt=proto, hlim=64, plen=len(raw), data=seg)
            want = dpkt.ip6.IP6(bytes(pkt)).data.sum
        assert l4_csum(src, dst, proto, raw) == want, (family, proto, size)


def test_a_udp_sum_of_zero_is_sent_as_all_ones() -> None:
    """A UDP segment whose sum comes to 0 carries 0xFFFF (0 means "no checksum"); a
    TCP one carries 0. The payload's last word is chosen to make the sum 0."""
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    for proto in (UDP, TCP):
        seg = bytes(_segment(proto, random.Random(3), 10)) + b"\0\0"
        fix = csum(pseudo_header(src, dst, proto, len(seg)) + seg)
        seg = seg[:-2] + struct.pack("!H", fix)  # the words now add up to 0xFFFF
        assert csum(pseudo_header(src, dst, proto, len(seg)) + seg) == 0
        assert l4_csum(src, dst, proto, seg) == (0xFFFF if proto == UDP else 0)


def test_a_pseudo_header_needs_two_addresses_of_one_family() -> None:
    with pytest.raises(ValueError, match="addresses of 4 and 16 bytes"):
        pseudo_header(bytes(4), bytes(16), UDP, 8)


def test_the_checksums_of_many_rows_agree_with_dpkts() -> None:
    rng = np.random.default_rng(5)
    for width in (2, 20, 40, 1500):
        rows = rng.integers(0, 256, size=(300, width), dtype=np.uint8)
        rows[0] = 0xFF  # the largest sums: every fold taken
        got = csum_rows(rows)
        assert got.dtype == np.uint16 and got.shape == (300,)
        assert got.tolist() == [dpkt.in_cksum(r.tobytes()) for r in rows], width
    assert csum_rows(np.zeros((0, 20), dtype=np.uint8)).shape == (0,)


@pytest.mark.parametrize("bad", [np.zeros((3, 21), np.uint8), np.zeros(20, np.uint8),
                                 np.zeros((3, 20), np.uint16)])
def test_rows_of_another_shape_or_type_are_refused(bad: np.ndarray) -> None:
    with pytest.raises(ValueError, match="csum_rows takes an"):
        csum_rows(bad)
