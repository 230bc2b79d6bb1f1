"""An independent longest-prefix-match reference, for checking the C tables.

Prefixes are parsed with Python's `ipaddress` module, next hops come from the shared
rule (`next_hop`), and a lookup is the textbook one: for each prefix length present,
longest first, look the address masked to that length up in a dict of that length's
prefixes; the first hit wins. Nothing here shares code with the C side.

`Reference.lookup` is that loop, one address at a time. `lookup4_many` and
`lookup6_many` do the same per length over numpy arrays (a sorted key array and a
binary search stand in for the dict), for millions of addresses; `run_check` compares
the two on a sample so the fast path is held to the simple one.
"""

from __future__ import annotations

import gzip
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from offlow.router import DEFAULT_PORTS, MAX_HOP

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_BLANKS = " \t\r\v\f"
_SEPARATORS = re.compile(r"[ \t\r\v\f,;|]")
# Lines longer than this are garbage for the C reader (OFL_PREFIX_LINE_MAX).
_LINE_MAX = 256


def fnv1a32(data: bytes) -> int:
    """FNV-1a, 32 bits."""
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def next_hop(net: Network, nports: int = DEFAULT_PORTS) -> int:
    """The hop of a prefix: FNV-1a-32 over the network address bytes (network order,
    host bits zero) followed by the length byte, modulo nports, plus one."""
    if not 1 <= nports <= MAX_HOP:
        raise ValueError(f"nports {nports} is not within 1..{MAX_HOP}")
    return fnv1a32(net.network_address.packed + bytes([net.prefixlen])) % nports + 1


def parse_line(line: str) -> Network | None | bool:
    """One line of a prefix file: a network, None for a blank or comment line, False
    for garbage. The first field (up to a blank, ',', ';' or '|') is the prefix; an
    IPv4 address without a length is a /32, an IPv6 prefix needs its length; host bits
    are cleared."""
    if len(line) > _LINE_MAX:
        return False
    s = line.lstrip(_BLANKS)
    if not s or s.startswith("#"):
        return None
    tok = _SEPARATORS.split(s, 1)[0]
    if ":" in tok and "/" not in tok:
        return False
    try:
        return ipaddress.ip_network(tok, strict=False)
    except ValueError:
        return False


def read_prefixes(path: Path) -> tuple[list[Network], int]:
    """The networks of a prefix file (plain or gzip) in file order, and the number of
    garbage lines."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    nets: list[Network] = []
    bad = 0
    lines = raw.decode("latin-1").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        p = parse_line(line)
        if p is False:
            bad += 1
        elif p is not None:
            nets.append(p)
    return nets, bad


@dataclass
class _Family:
    """The prefixes of one address family: per length, masked address -> hop."""

    bits: int
    tables: dict[int, dict[int, int]] = field(default_factory=dict)
    # The numpy form, built on first use: length -> (sorted keys, their hops).
    arrays: dict[int, tuple[np.ndarray, np.ndarray]] | None = None

    def mask(self, length: int) -> int:
        return ((1 << length) - 1) << (self.bits - length)

    def add(self, addr: int, length: int, hop: int) -> None:
        self.tables.setdefault(length, {})[addr & self.mask(length)] = hop

    def lookup(self, addr: int) -> int:
        for length in sorted(self.tables, reverse=True):
            hop = self.tables[length].get(addr & self.mask(length))
            if hop is not None:
                return hop
        return 0


class Reference:
    """Longest-prefix match over a list of routes (network, hop); of two equal
    prefixes the later wins."""

    def __init__(self, routes: Iterable[tuple[Network, int]]) -> None:
        self.v4 = _Family(32)
        self.v6 = _Family(128)
        for net, hop in routes:
            fam = self.v4 if net.version == 4 else self.v6
            fam.add(int(net.network_address), net.prefixlen, hop)

    @classmethod
    def from_networks(cls, nets: Iterable[Network], nports: int = DEFAULT_PORTS) -> Reference:
        """Routes with hops by `next_hop`."""
        return cls((n, next_hop(n, nports)) for n in nets)

    def lookup(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int:
        """The hop of the longest prefix containing `addr`, 0 when none does."""
        fam = self.v4 if addr.version == 4 else self.v6
        return fam.lookup(int(addr))

    # ---- numpy: the same per-length search over arrays of addresses ----------------

    @staticmethod
    def _arrays(fam: _Family, to_keys: Callable[[list[int]], np.ndarray]
                ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per length: the sorted key array and the hops in the same order."""
        if fam.arrays is None:
            fam.arrays = {}
            for length, table in fam.tables.items():
                keys = to_keys(list(table))
                hops = np.fromiter(table.values(), dtype=np.uint16, count=len(table))
                order = np.argsort(keys, kind="stable")
                fam.arrays[length] = (keys[order], hops[order])
        return fam.arrays

    def lookup4_many(self, addrs: np.ndarray) -> np.ndarray:
        """Hops of uint32 IPv4 addresses (host values)."""
        addrs = np.asarray(addrs, dtype=np.uint32)
        arrays = self._arrays(self.v4, lambda ks: np.array(ks, dtype=np.uint32))
        return _longest_first(arrays, len(addrs),
                              lambda idx, length: addrs[idx] & np.uint32(self.v4.mask(length)))

    def lookup6_many(self, addrs: np.ndarray) -> np.ndarray:
        """Hops of IPv6 addresses given as an (n, 16) uint8 array (network order)."""
        addrs = np.ascontiguousarray(addrs, dtype=np.uint8).reshape(-1, 16)
        arrays = self._arrays(self.v6, _ints_to_s16)

        def masked(unmatched: np.ndarray, length: int) -> np.ndarray:
            m = np.frombuffer(self.v6.mask(length).to_bytes(16, "big"), dtype=np.uint8)
            return np.ascontiguousarray(addrs[unmatched] & m).view("S16").ravel()

        return _longest_first(arrays, len(addrs), masked)


def _longest_first(arrays: dict[int, tuple[np.ndarray, np.ndarray]], n: int,
                   masked: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    """Hops of `n` addresses (0: no route): each prefix length's sorted keys and hops
    from the longest length down, `masked(unmatched, length)` giving the keys of the
    addresses `unmatched` (indices) not matched yet, cut to that length."""
    out = np.zeros(n, dtype=np.uint16)
    unmatched = np.arange(n)
    for length in sorted(arrays, reverse=True):
        if not len(unmatched):
            break
        keys, hops = arrays[length]
        out_i, found = _search(keys, masked(unmatched, length))
        out[unmatched[found]] = hops[out_i[found]]
        unmatched = unmatched[~found]
    return out


def _search(keys: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each query, its index in the sorted `keys` and whether it is there."""
    if not len(keys):
        return np.zeros(len(q), dtype=np.intp), np.zeros(len(q), dtype=bool)
    i = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return i, keys[i] == q


def _ints_to_s16(values: list[int]) -> np.ndarray:
    """128-bit ints as big-endian 16-byte strings (which sort as the numbers do)."""
    return np.array([v.to_bytes(16, "big") for v in values], dtype="S16")
