"""Memcached requests as a capture: UDP datagrams with memcached's 8-byte frame header
in Ethernet/IPv4 frames, and Floem's key-value workload written so (the planner's
`--workload kvs`; the key-value store's tests)."""

from __future__ import annotations

import struct
from pathlib import Path

import dpkt
import numpy as np

KVS_PORT = 11211


def kvs_requests(path: Path, count: int = 20_000, keys: int = 100_000, get_ratio: float = 0.9,
                 key_len: int = 32, value_len: int = 64, zipf: float = 0.9,
                 seed: int = 1) -> None:
    """Floem's key-value workload (seed 001: 100k keys of 32 B, 64 B values, Zipf 0.9,
    90% GET) as memcached text requests over UDP (the 8-byte frame header), written to
    the capture `path`; every key is SET once before the mix so GETs hit."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, keys + 1, dtype=np.float64)
    p = ranks ** -zipf
    picks = rng.choice(keys, size=count, p=p / p.sum())
    gets = rng.random(count) < get_ratio
    value = b"v" * value_len
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)  # (dpkt: 1500, which cuts longer frames)
        rid = 0
        warm = sorted(set(int(k) for k in picks))
        for k in [*warm, *map(int, picks)]:
            key = f"{k:0{key_len}d}".encode()[-key_len:]
            is_get = rid >= len(warm) and gets[rid - len(warm)]
            req = (b"get " + key + b"\r\n" if is_get else
                   b"set " + key + f" 0 0 {value_len}\r\n".encode() + value + b"\r\n")
            w.writepkt(memcached_datagram(rid & 0xFFFF, req), ts=rid * 1e-6)
            rid += 1


def memcached_datagram(request_id: int, payload: bytes) -> bytes:
    """One request (`payload`) in a frame from 10.0.0.2 to 10.0.0.1:11211, its frame
    header carrying `request_id` (the source port: 40000 + request_id % 1000)."""
    udp = dpkt.udp.UDP(sport=40000 + request_id % 1000, dport=KVS_PORT,
                       data=struct.pack("!HHHH", request_id, 0, 1, 0) + payload)
    udp.ulen = len(udp)
    ip = dpkt.ip.IP(src=bytes([10, 0, 0, 2]), dst=bytes([10, 0, 0, 1]), p=17, data=udp)
    eth = dpkt.ethernet.Ethernet(src=b"\x02" + bytes(4) + b"\x02", dst=b"\x02" + bytes(5),
                                 type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
    return bytes(eth)
