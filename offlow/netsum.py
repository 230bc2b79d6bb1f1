"""The Internet checksum (RFC 1071), as IPv4 headers and UDP/TCP segments carry it:
the one definition the packet builders (offlow.lso, offlow.streams), the benchmarks and
the test inputs (offlow.testing) share, with the UDP/TCP pseudo-header and a NumPy
form for many equal-length headers at once (offlow.testing.streams writes hundreds of
thousands: some 20x faster than one call per header)."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

UDP, TCP = 17, 6


def csum(data: bytes) -> int:
    """Internet checksum (RFC 1071) of ``data``: the value to store (an odd length is
    padded with a zero byte; 0 over bytes that already hold their right checksum)."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def csum_rows(rows: np.ndarray) -> np.ndarray:
    """The Internet checksum of each row of ``rows`` (an (n, k) uint8 array, k even:
    one header per row), as csum gives it, in a uint16 array of n."""
    import numpy as np

    a = np.asarray(rows)
    if a.ndim != 2 or a.dtype != np.uint8 or a.shape[1] % 2:
        raise ValueError(f"csum_rows takes an (n, even) uint8 array, not {a.dtype} {a.shape}")
    words = a.astype(np.uint64).reshape(len(a), a.shape[1] // 2, 2)
    total = (words[:, :, 0] << np.uint64(8) | words[:, :, 1]).sum(axis=1, dtype=np.uint64)
    while (total >> np.uint64(16)).any():
        total = (total & np.uint64(0xFFFF)) + (total >> np.uint64(16))
    return (~total & np.uint64(0xFFFF)).astype(np.uint16)


def pseudo_header(src: bytes, dst: bytes, proto: int, length: int) -> bytes:
    """The pseudo-header a UDP or TCP checksum covers (RFC 768 / 793 for IPv4, RFC
    8200 8.1 for IPv6): the addresses (4 bytes each, or 16), the protocol and the
    segment's ``length``."""
    if len(src) == len(dst) == 4:
        return src + dst + struct.pack("!BBH", 0, proto, length)
    if len(src) == len(dst) == 16:
        return src + dst + struct.pack("!IxxxB", length, proto)
    raise ValueError(f"addresses of {len(src)} and {len(dst)} bytes: a pseudo-header "
                     "takes two IPv4 (4 bytes) or two IPv6 (16 bytes) addresses")


def l4_csum(src: bytes, dst: bytes, proto: int, segment: bytes) -> int:
    """The value to store in the checksum field of UDP or TCP ``segment`` (its field
    zero) sent from ``src`` to ``dst``: over the pseudo-header and the segment; a UDP
    sum of 0 is sent as 0xFFFF (0 there means "no checksum")."""
    c = csum(pseudo_header(src, dst, proto, len(segment)) + segment)
    return 0xFFFF if c == 0 and proto == UDP else c
