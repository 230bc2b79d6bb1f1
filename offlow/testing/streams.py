"""Packet streams with known properties, written as pcap files fast (NumPy, no
per-packet Python): e.g. a stream with an exact number of distinct IPv4 sources."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from offlow.netsum import csum_rows

FRAME = 60  # Ethernet 14 + IPv4 20 + UDP 8 + 18 bytes of payload


def ipv4_frames(sources: np.ndarray, dst: int = 0xC0000201) -> np.ndarray:
    """One 60-byte Ethernet/IPv4/UDP frame per source address (uint32), with valid
    IPv4 header checksums; returns an (n, 60) uint8 array."""
    src = np.asarray(sources, dtype=np.uint32)
    n = len(src)
    f = np.zeros((n, FRAME), dtype=np.uint8)
    f[:, 0:6] = (2, 0, 0, 0, 0, 1)
    f[:, 6:12] = (2, 0, 0, 0, 0, 2)
    f[:, 12:14] = (0x08, 0x00)
    ip = f[:, 14:34]
    ip[:, 0], ip[:, 2:4] = 0x45, (0, 46)  # version/IHL, total length 46
    ip[:, 8], ip[:, 9] = 64, 17  # TTL, UDP
    for k in range(4):
        ip[:, 12 + k] = (src >> np.uint32(24 - 8 * k)) & np.uint32(0xFF)
        ip[:, 16 + k] = (dst >> (24 - 8 * k)) & 0xFF
    c = csum_rows(ip)
    ip[:, 10], ip[:, 11] = c >> 8, c & 0xFF
    f[:, 34:36], f[:, 36:38], f[:, 38:40] = (0x30, 0x39), (0x00, 0x35), (0, 26)  # UDP
    return f


def write_pcap(path: Path, frames: np.ndarray) -> None:
    """Write equal-length frames (an (n, len) uint8 array) as a pcap file, 1 us apart."""
    n, length = frames.shape
    rec = np.zeros((n, 16 + length), dtype=np.uint8)
    hdr = np.zeros((n, 4), dtype="<u4")
    hdr[:, 1] = np.arange(n, dtype=np.uint32)  # microseconds
    hdr[:, 2] = hdr[:, 3] = length
    rec[:, :16] = hdr.view(np.uint8).reshape(n, 16)
    rec[:, 16:] = frames
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        fh.write(rec.tobytes())


def distinct_sources_pcap(path: Path, distinct: int, packets: int, seed: int = 1) -> np.ndarray:
    """A pcap of `packets` frames whose IPv4 sources take exactly `distinct` values
    (every value at least once, the rest repeats, shuffled); returns the sources."""
    if not 0 < distinct <= packets:
        raise ValueError("need 0 < distinct <= packets")
    rng = np.random.default_rng(seed)
    values = np.unique(rng.integers(0, 2**32, size=distinct * 2, dtype=np.uint64))
    values = rng.permutation(values)[:distinct].astype(np.uint32)
    if len(values) < distinct:
        raise ValueError("could not draw enough distinct addresses")
    stream = np.concatenate([values, rng.choice(values, size=packets - distinct)])
    stream = rng.permutation(stream)
    write_pcap(path, ipv4_frames(stream))
    return stream
