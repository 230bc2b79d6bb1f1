"""How a benchmark reports repeated measurements of one thing: their median, the
range around it and how many there were."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def spread(v: Sequence[float]) -> dict[str, float] | None:
    """Median, min, max and count of `v`; None when there is nothing to report."""
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
