"""The PCSA estimate from a device's summary (Flajolet and Martin, 1985)."""

from __future__ import annotations

import math
import struct

# Flajolet and Martin's correction factor.
PCSA_PHI = 0.77351


def pcsa_raw(summary: bytes) -> float:
    """Flajolet and Martin's estimate from PcsaSummary's answer: m / phi * 2^(sum R / m)
    (biased upward when there are not many more distinct items than bitmaps)."""
    sum_r, m, _ = parse_summary(summary)
    return m / PCSA_PHI * 2.0 ** (sum_r / m)


def pcsa_estimate(summary: bytes) -> float:
    """The distinct count: the raw estimate, or linear counting over the empty
    bitmaps (m ln(m / empty)) while that is below 2.5 m, where the raw estimate is
    biased (as HyperLogLog does for small ranges)."""
    _, m, empty = parse_summary(summary)
    if empty:
        linear = m * math.log(m / empty)
        if linear < 2.5 * m:
            return linear
    return pcsa_raw(summary)


def parse_summary(summary: bytes) -> tuple[int, int, int]:
    """(sum of R, bitmaps, empty bitmaps) from PcsaSummary's 12-byte answer."""
    if len(summary) != 12:
        raise ValueError(f"a PCSA summary is 12 bytes, got {len(summary)}")
    sum_r, m, empty = struct.unpack("<III", summary)
    if m == 0 or empty > m:
        raise ValueError(f"not a PCSA summary: {m} bitmaps, {empty} empty")
    return sum_r, m, empty


def pcsa_standard_error(m: int) -> float:
    """Relative standard error of PCSA with m bitmaps: 0.78 / sqrt(m)."""
    return 0.78 / math.sqrt(m)
