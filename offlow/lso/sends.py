"""Inputs for the segmentation offload: captures whose frames each carry a whole send
(a header template and up to 64 KB of payload, as a TSO/GSO capture holds it), built
from the shared captures' flows or from any stream of bytes.

- TCP: every connection of a capture (tls_ciphers.pcap) is reassembled per direction
  (dpkt), then replayed as sends: its handshake, each turn of one side cut into sends
  of seeded sizes (below and above the MSS, up to 65,000 bytes), a pure ACK from the
  other side after each send, and its FINs. Zero-length sends (SYN, ACK, FIN) pass
  through the device as they are.
- UDP: the datagrams of each direction of a capture's flows (quic.pcap) joined into
  datagrams of seeded sizes, some small enough for one packet, one empty.
- A stream: a file's bytes (the BGP table) as one TCP connection or as datagrams, every
  send as large as it may be (the seed's 64 KB messages).

IPv6 variants map each IPv4 address a.b.c.d to 2001:db8::a.b.c.d. Every frame has its
lengths and checksums right."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dpkt

from offlow.errors import OfflowError
from offlow.netsum import csum, l4_csum

SEND_MAX = 65000  # payload bytes of the largest send made here (under 64 KB with headers)
WINDOW = 65535
MSS_HINT = 1460  # sizes are drawn around a 1500-byte MTU's MSS
ACK, PSH, SYN, FIN = 0x10, 0x08, 0x02, 0x01


@dataclass
class Endpoint:
    mac: bytes
    addr: bytes  # 4 bytes
    port: int


@dataclass
class Framer:
    """Builds frames of one flow direction: Ethernet, IPv4 or IPv6, TCP or UDP."""

    src: Endpoint
    dst: Endpoint
    ipv6: bool
    ip_id: int = 1

    def _ip(self, proto: int, l4: bytes) -> bytes:
        if self.ipv6:
            s6 = b"\x20\x01\x0d\xb8" + bytes(8) + self.src.addr
            d6 = b"\x20\x01\x0d\xb8" + bytes(8) + self.dst.addr
            hdr = struct.pack("!IHBB", 0x60000000, len(l4), proto, 64) + s6 + d6
            return hdr + _with_l4_csum(l4, proto, s6, d6)
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), self.ip_id & 0xFFFF,
                          0x4000 if proto == 6 else 0, 64, proto, 0, self.src.addr,
                          self.dst.addr)
        self.ip_id += 1
        hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
        return hdr + _with_l4_csum(l4, proto, self.src.addr, self.dst.addr)

    def frame(self, proto: int, l4: bytes) -> bytes:
        eth = self.dst.mac + self.src.mac + (b"\x86\xdd" if self.ipv6 else b"\x08\x00")
        return eth + self._ip(proto, l4)

    def tcp(self, seq: int, ack: int, flags: int, payload: bytes = b"") -> bytes:
        hdr = struct.pack("!HHIIBBHHH", self.src.port, self.dst.port, seq & 0xFFFFFFFF,
                          ack & 0xFFFFFFFF, 0x50, flags, WINDOW, 0, 0)
        return self.frame(6, hdr + payload)

    def udp(self, payload: bytes) -> bytes:
        return self.frame(17, struct.pack("!HHHH", self.src.port, self.dst.port,
                                          8 + len(payload), 0) + payload)


def _with_l4_csum(l4: bytes, proto: int, src: bytes, dst: bytes) -> bytes:
    at = 16 if proto == 6 else 6
    return l4[:at] + struct.pack("!H", l4_csum(src, dst, proto, l4)) + l4[at + 2:]


def _sizes(rng: random.Random, total: int, large: bool | int) -> Iterator[int]:
    """Send sizes that cut `total` bytes: as large as allowed (`large` True), all of
    `large` bytes (an int), else a mix of sends below the MSS and sends of a few to 44
    MSS."""
    left = total
    while left > 0:
        if large is True:
            n = SEND_MAX
        elif large:
            n = int(large)
        elif rng.random() < 0.3:
            n = rng.randint(1, MSS_HINT)
        else:
            n = rng.randint(MSS_HINT + 1, SEND_MAX)
        n = min(n, left)
        yield n
        left -= n


# ---- TCP connections of a capture -------------------------------------------------------

@dataclass
class _Dir:
    end: Endpoint
    isn: int | None = None
    chunks: dict[int, bytes] = field(default_factory=dict)  # offset from isn+1 -> bytes


@dataclass
class _Conn:
    a: _Dir
    b: _Dir
    turns: list[tuple[int, int]] = field(default_factory=list)  # (side 0/1, stream end)


def _tcp_conns(capture: Path) -> list[_Conn]:
    """Each TCP connection of the capture with both directions' data by offset and the
    order in which the sides took turns."""
    conns: dict[tuple, _Conn] = {}
    order: list[_Conn] = []
    for src, dst, t in _flows(capture, dpkt.tcp.TCP):
        key = tuple(sorted([(src.addr, src.port), (dst.addr, dst.port)]))
        c = conns.get(key)
        if c is None:
            c = conns[key] = _Conn(_Dir(src), _Dir(dst))
            order.append(c)
        side = 0 if (c.a.end.addr, c.a.end.port) == (src.addr, src.port) else 1
        d = c.a if side == 0 else c.b
        if t.flags & SYN:
            d.isn = t.seq
        if d.isn is None:
            d.isn = (t.seq - 1) & 0xFFFFFFFF
        data = bytes(t.data)
        if data:
            off = (t.seq - d.isn - 1) & 0xFFFFFFFF
            if off < 1 << 30 and off not in d.chunks:
                d.chunks[off] = data
            end = _stream(d)
            if not c.turns or c.turns[-1][0] != side:
                c.turns.append((side, len(end)))
            else:
                c.turns[-1] = (side, len(end))
    return order


def _flows(capture: Path, l4: type) -> Iterator[tuple[Endpoint, Endpoint, Any]]:
    """(source, destination, transport header) of each IPv4 packet of `capture` whose
    transport is `l4` (dpkt.tcp.TCP or dpkt.udp.UDP)."""
    with open(capture, "rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, l4):
                yield (Endpoint(bytes(eth.src), bytes(ip.src), ip.data.sport),
                       Endpoint(bytes(eth.dst), bytes(ip.dst), ip.data.dport), ip.data)


def _stream(d: _Dir) -> bytes:
    """The direction's bytes from offset 0 up to the first hole."""
    out = bytearray()
    for off in sorted(d.chunks):
        if off > len(out):
            break
        out += d.chunks[off][len(out) - off:]
    return bytes(out)


@dataclass
class _Seqs:
    """Both sides' sequence numbers: the ISN, the SYN and FIN taken, the bytes sent."""

    isn: list[int]
    extra: list[int] = field(default_factory=lambda: [0, 0])
    sent: list[int] = field(default_factory=lambda: [0, 0])

    def __call__(self, side: int) -> int:
        return self.isn[side] + self.extra[side] + self.sent[side]


def tcp_sends(capture: Path, ipv6: bool = False, seed: int = 1, large: bool = False) -> list[bytes]:
    """Frames of whole sends replaying every TCP connection of `capture` (module doc)."""
    rng = random.Random(seed)
    frames: list[bytes] = []
    for c in _tcp_conns(capture):
        streams = [_stream(c.a), _stream(c.b)]
        if not any(streams):
            continue
        fr = [Framer(c.a.end, c.b.end, ipv6), Framer(c.b.end, c.a.end, ipv6)]
        seq = _Seqs([c.a.isn or 1, c.b.isn or 1])
        frames.append(fr[0].tcp(seq(0), 0, SYN))
        seq.extra[0] = 1
        frames.append(fr[1].tcp(seq(1), seq(0), SYN | ACK))
        seq.extra[1] = 1
        frames.append(fr[0].tcp(seq(0), seq(1), ACK))
        for side, end in c.turns:
            start = seq.sent[side]
            for n in _sizes(rng, max(0, end - start), large):
                at = seq.sent[side]
                frames.append(fr[side].tcp(seq(side), seq(1 - side), ACK | PSH,
                                           streams[side][at:at + n]))
                seq.sent[side] += n
                frames.append(fr[1 - side].tcp(seq(1 - side), seq(side), ACK))
        frames.append(fr[0].tcp(seq(0), seq(1), FIN | ACK))
        seq.extra[0] += 1
        frames.append(fr[1].tcp(seq(1), seq(0), FIN | ACK))
        seq.extra[1] += 1
        frames.append(fr[0].tcp(seq(0), seq(1), ACK))
    return frames


# ---- UDP flows of a capture ----------------------------------------------------------

def udp_sends(capture: Path, ipv6: bool = False, seed: int = 1, large: bool = False) -> list[bytes]:
    """Frames of whole datagrams joining each UDP flow direction's payloads (module doc)."""
    rng = random.Random(seed)
    flows: dict[tuple, tuple[Framer, bytearray]] = {}
    for src, dst, u in _flows(capture, dpkt.udp.UDP):
        key = (src.addr, src.port, dst.addr, dst.port)
        if key not in flows:
            flows[key] = (Framer(src, dst, ipv6), bytearray())
        flows[key][1].extend(bytes(u.data))
    frames: list[bytes] = []
    for fr, data in flows.values():
        pos = 0
        for n in _sizes(rng, len(data), large):
            frames.append(fr.udp(bytes(data[pos:pos + n])))
            pos += n
        frames.append(fr.udp(b""))  # an empty datagram: a signalling send
    return frames


# ---- a stream ---------------------------------------------------------------------------

def stream_sends(data: bytes, proto: str = "tcp", ipv6: bool = False, seed: int = 1,
                 large: bool | int = True) -> list[bytes]:
    """`data` as one TCP connection's sends (client to server, acknowledged) or as UDP
    datagrams: every one as large as allowed (`large` True), of `large` bytes (an int),
    or of seeded sizes (False)."""
    rng = random.Random(seed)
    a = Endpoint(b"\x02\x00\x00\x00\x00\x01", bytes([198, 51, 100, 1]), 40000)
    b = Endpoint(b"\x02\x00\x00\x00\x00\x02", bytes([203, 0, 113, 2]), 443)
    fa, fb = Framer(a, b, ipv6), Framer(b, a, ipv6)
    if proto == "udp":
        out, pos = [], 0
        for n in _sizes(rng, len(data), large):
            out.append(fa.udp(data[pos:pos + n]))
            pos += n
        return out
    if proto != "tcp":
        raise OfflowError(f"stream sends: protocol `{proto}`: expected tcp or udp")
    out = [fa.tcp(1000, 0, SYN), fb.tcp(5000, 1001, SYN | ACK), fa.tcp(1001, 5001, ACK)]
    pos = 0
    for n in _sizes(rng, len(data), large):
        out.append(fa.tcp(1001 + pos, 5001, ACK | PSH, data[pos:pos + n]))
        pos += n
        out.append(fb.tcp(5001, 1001 + pos, ACK))
    return out


def write_pcap(path: Path, frames: list[bytes]) -> None:
    """The frames as an Ethernet capture (snaplen 262,144: frames up to 64 KB fit)."""
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=262144, linktype=dpkt.pcap.DLT_EN10MB)
        for i, fr in enumerate(frames):
            w.writepkt(fr, ts=1_700_000_000 + i * 1e-5)
