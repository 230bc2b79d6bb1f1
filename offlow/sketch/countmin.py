"""Flow estimates from the count-min sketch a device keeps (offlow.elements.sketch.
CountMin): the same key folding and row hashes as its C body, and the sketch's bound."""

from __future__ import annotations

import math
from collections.abc import Sequence

from offlow.elements.sketch import CM_SEED

M64 = (1 << 64) - 1
Flow = tuple[int, int, int, int, int]  # IPv4 source, destination, protocol, ports


def fmix64(h: int) -> int:
    h ^= h >> 33
    h = h * 0xFF51AFD7ED558CCD & M64
    h ^= h >> 33
    h = h * 0xC4CEB9FE1A85EC53 & M64
    return h ^ h >> 33


def flow_key(flow: Flow) -> int:
    src, dst, proto, sport, dport = flow
    return (src << 32 | dst) ^ fmix64(((sport << 24 | dport << 8 | proto) + 1) & M64)


def cells(depth: int, width: int, flow: Flow) -> list[int]:
    """The flow's counters in the sketch, one per row."""
    key = flow_key(flow)
    return [r * width + fmix64(key ^ ((r + 1) * CM_SEED & M64)) % width for r in range(depth)]


def estimate(sketch: Sequence[int], depth: int, width: int, flow: Flow) -> int:
    """The flow's estimate: the smallest of its counters."""
    return min(sketch[c] for c in cells(depth, width, flow))


def error_bound(width: int, depth: int, total: int) -> tuple[float, float]:
    """(e / width * total, e^-depth): an estimate exceeds its flow's count by more than
    the first with probability at most the second."""
    return math.e / width * total, math.exp(-depth)
