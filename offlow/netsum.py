"""The Internet checksum (RFC 1071), as IPv4 headers and UDP/TCP segments carry it:
the one definition the packet builders (offlow.lso, offlow.streams) and the test
inputs (offlow.testing) share."""

from __future__ import annotations

import struct


def csum(data: bytes) -> int:
    """Internet checksum (RFC 1071) of ``data``: the value to store (an odd length is
    padded with a zero byte; 0 over bytes that already hold their right checksum)."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
