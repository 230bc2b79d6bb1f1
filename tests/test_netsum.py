"""offlow/netsum.py: the Internet checksum the packet builders and the test inputs
share, against RFC 1071's worked example and dpkt's own implementation (an
independent oracle)."""

from __future__ import annotations

import random

import dpkt

from offlow.netsum import csum


def test_the_checksum_of_rfc_1071s_example() -> None:
    # RFC 1071, 3.: the words 0001 f203 f4f5 f6f7 add up to ddf2; the checksum stores
    # its complement
    assert csum(bytes.fromhex("0001f203f4f5f6f7")) == 0x220D


def test_the_checksum_agrees_with_dpkts_on_every_length() -> None:
    rng = random.Random(7)
    for n in [*range(0, 70), 1499, 1500, 65535]:
        data = rng.randbytes(n)
        assert csum(data) == dpkt.in_cksum(data), n

