"""A slice of the BGP table for the router benchmark tests (random prefixes when the
table is not there), with default and host routes and nested prefixes beside it."""

from __future__ import annotations

import gzip
import ipaddress
import random
from pathlib import Path

import pytest

from benchmarks import router

BGP = router.DEFAULT_PREFIXES
# Default and host routes, nested prefixes, beside the slice.
EXTRA = ["0.0.0.0/0", "::/0", "192.0.2.1/32", "192.0.2.0/24", "192.0.2.128/25",
         "2001:db8::1/128", "2001:db8::/32", "2001:db8::/64"]


def slice_lines(n4: int, n6: int) -> list[str]:
    """About n4 IPv4 and n6 IPv6 prefixes: every k-th line of the BGP table, or random
    prefixes when the table is not there."""
    if BGP.exists():
        lines = gzip.decompress(BGP.read_bytes()).decode().splitlines()
        v4 = [s for s in lines if ":" not in s]
        v6 = [s for s in lines if ":" in s]
        return v4[::max(1, len(v4) // n4)] + v6[::max(1, len(v6) // n6)]
    rng = random.Random(5)
    out = [str(ipaddress.ip_network((rng.getrandbits(32), rng.randint(8, 32)), strict=False))
           for _ in range(n4)]
    out += [str(ipaddress.ip_network(((0x2001 << 112) | rng.getrandbits(112),
                                      rng.randint(16, 64)), strict=False))
            for _ in range(n6)]
    return out


def write_slice(factory: pytest.TempPathFactory, n4: int, n6: int,
                extra: tuple[str, ...] = ()) -> Path:
    """The slice and EXTRA (and `extra`) as a prefix file."""
    p = factory.mktemp("routes") / "slice.txt"
    p.write_text("\n".join(slice_lines(n4, n6) + EXTRA + list(extra)) + "\n")
    return p


