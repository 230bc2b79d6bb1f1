"""Tuples (ts, v1..vn) in files and frames.

- CSV: one tuple a line, `ts,v1,...,vn` (ts in ns, values 32-bit signed integers);
  blank lines and lines starting with `#` are skipped.
- binary: the 8 bytes `OFLTUPLE`, the number of values n (uint32 little-endian), then
  records of ts (int64) and n values (int32), little-endian: 164 bytes a record for the
  seed's tuples (n = 39).
- frames: an Ethernet/IPv4/UDP frame per tuple whose payload is v1..vn (tuple.h); the ts
  is the frame's timestamp in a capture (nanosecond pcap), the arrival time over UDP.

A line or record that is not a tuple is skipped and counted (`Tuples.bad`, with where
the first few are), never fatal; a file that is not a tuple file at all is an error."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

from offlow.errors import OfflowError
from offlow.netsum import csum

MAGIC = b"OFLTUPLE"
MAX_VALUES = 128  # tuple.h's OFL_TUPLE_MAX
SEED_VALUES = 39  # 8 + 39 * 4 = 164 bytes, the seed's tuple
I32 = (-(1 << 31), (1 << 31) - 1)


@dataclass(frozen=True)
class Tuple:
    ts: int  # ns
    v: tuple[int, ...]


@dataclass
class Tuples:
    """Tuples read from a file, and what was skipped."""

    tuples: list[Tuple] = field(default_factory=list)
    bad: int = 0
    where: list[str] = field(default_factory=list)  # the first few skipped, and why

    def skip(self, at: str) -> None:
        self.bad += 1
        if len(self.where) < 5:
            self.where.append(at)


def _valid(values: list[int]) -> bool:
    return 0 < len(values) <= MAX_VALUES and all(I32[0] <= x <= I32[1] for x in values)


def parse_csv(text: str, name: str = "csv") -> Tuples:
    out = Tuples()
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            ts, *vals = (int(x) for x in s.split(","))
        except ValueError:
            out.skip(f"{name}:{no}: not integers")
            continue
        if ts < 0 or ts >= 1 << 63 or not _valid(vals):
            out.skip(f"{name}:{no}: ts below 0 or values not 1..{MAX_VALUES} 32-bit integers")
            continue
        out.tuples.append(Tuple(ts, tuple(vals)))
    return out


def parse_binary(data: bytes, name: str = "binary") -> Tuples:
    if data[:8] != MAGIC or len(data) < 12:
        raise OfflowError(f"{name}: not a binary tuple file (it starts with {MAGIC!r} and "
                          "the number of values)")
    (n,) = struct.unpack_from("<I", data, 8)
    if not 0 < n <= MAX_VALUES:
        raise OfflowError(f"{name}: {n} values a tuple; expected 1..{MAX_VALUES}")
    rec = struct.Struct(f"<q{n}i")
    out = Tuples()
    body = memoryview(data)[12:]
    whole = len(body) // rec.size
    for k in range(whole):
        ts, *vals = rec.unpack_from(body, k * rec.size)
        if ts < 0:
            out.skip(f"{name}: record {k}: ts below 0")
            continue
        out.tuples.append(Tuple(ts, tuple(vals)))
    if len(body) % rec.size:
        out.skip(f"{name}: record {whole}: cut short ({len(body) % rec.size} of {rec.size} "
                 "bytes)")
    return out


def read_tuples(path: Path) -> Tuples:
    """A CSV or binary tuple file (told apart by the binary one's first 8 bytes)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise OfflowError(f"{path}: {e.strerror}") from None
    if data[:8] == MAGIC:
        return parse_binary(data, str(path))
    try:
        return parse_csv(data.decode("ascii"), str(path))
    except UnicodeDecodeError:
        raise OfflowError(f"{path}: neither a binary tuple file nor ASCII CSV") from None


def write_binary(path: Path, tuples: list[Tuple]) -> None:
    n = len(tuples[0].v) if tuples else SEED_VALUES
    rec = struct.Struct(f"<q{n}i")
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<I", n))
        for t in tuples:
            if len(t.v) != n:
                raise OfflowError(f"{path}: a binary tuple file holds tuples of one width "
                                  f"({n}), not {len(t.v)}")
            f.write(rec.pack(t.ts, *t.v))


def write_csv(path: Path, tuples: list[Tuple]) -> None:
    Path(path).write_text("".join(",".join(map(str, (t.ts, *t.v))) + "\n" for t in tuples))


def generate(seed: int, count: int, values: int = SEED_VALUES, gap_ns: int = 1000,
             disorder: int = 0, low: int = 0, high: int = 99, start_ns: int = 0) -> list[Tuple]:
    """`count` tuples of `values` values uniform in [low, high]; ts start at `start_ns`
    and grow by 0..2*gap_ns (all equal where gap_ns is 0); with `disorder` d, each
    block of d + 1 tuples is shuffled, so every tuple is at most d places from its place
    in ts order (a BSort of slack d puts them back in order)."""
    rng = random.Random(seed)
    ts, out = start_ns, []
    for _ in range(count):
        out.append(Tuple(ts, tuple(rng.randint(low, high) for _ in range(values))))
        ts += rng.randint(0, 2 * gap_ns)
    for i in range(0, len(out), disorder + 1) if disorder else ():
        block = out[i:i + disorder + 1]
        rng.shuffle(block)
        out[i:i + disorder + 1] = block
    return out


ETH = bytes.fromhex("020000000001" "020000000002" "0800")


def frame(t: Tuple, dport: int, sport: int = 40000, src: int = 0x0A000001,
          dst: int = 0x0A000002) -> bytes:
    """The Ethernet/IPv4/UDP frame of a tuple (tuple.h), UDP checksum 0 (none)."""
    payload = struct.pack(f"<{len(t.v)}i", *t.v)
    ip = bytearray(struct.pack("!BBHHHBBHII", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0,
                               src, dst))
    ip[10:12] = struct.pack("!H", csum(bytes(ip)))
    return ETH + bytes(ip) + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def write_pcap(path: Path, streams: list[tuple[Tuple, int]]) -> None:
    """A nanosecond pcap of (tuple, UDP destination port) in the order given, each frame
    stamped with its tuple's ts."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for t, port in streams:
            b = frame(t, port)
            f.write(struct.pack("<IIII", t.ts // 10**9, t.ts % 10**9, len(b), len(b)) + b)


def values_of(frame_bytes: bytes) -> tuple[int, ...] | None:
    """The values of a tuple frame as written by `frame` (Ethernet, IPv4 without options,
    UDP), None for another frame."""
    if len(frame_bytes) < 42 or frame_bytes[12:14] != b"\x08\x00" or frame_bytes[23] != 17:
        return None
    ihl = (frame_bytes[14] & 15) * 4
    (ulen,) = struct.unpack_from("!H", frame_bytes, 14 + ihl + 4)
    n = (ulen - 8) // 4
    return struct.unpack_from(f"<{n}i", frame_bytes, 14 + ihl + 8)
