"""A shared hash map's part of the run's report: the stats file's pairs (each
"KEYHEX=VALUEHEX", the key's packed bytes and the value's, in memory order: runtime
map.h's ofl_map_json) read as the key's fields and the value, sorted by key. An
integer field is a number; an address field (`ipv4`, `ipv6`, `mac`: its bytes as on
the wire) is its text: 192.0.2.1, 2001:db8::1, 02:00:00:aa:bb:cc. Every target's
report (host, nic, xdp's walk of its BPF map) is read here."""

from __future__ import annotations

import ipaddress
from typing import Any

from offlow.ir import SharedTable
from offlow.ir.types import ADDRESS_TYPES, KEY_TYPES


def number(raw: bytes, ctype: str) -> int:
    return int.from_bytes(raw, "little", signed=ctype.startswith("int"))


def key_field(raw: bytes, ftype: str) -> tuple[int | bytes, int | str]:
    """A key field's order (a number, an address's bytes) and what the report shows."""
    if ftype == "mac":
        return raw, ":".join(f"{b:02x}" for b in raw)
    if ftype in ADDRESS_TYPES:
        return raw, str(ipaddress.ip_address(raw))
    n = number(raw, ftype)
    return n, n


def decode(t: SharedTable, raw: dict[str, Any]) -> dict[str, Any]:
    """Map `t`'s stats (kind "map") with its pairs as [[field values...], value], sorted
    by key (an address by its bytes)."""
    items = []
    for item in raw.get("pairs", []):
        key_hex, value_hex = item.split("=")
        key, at = bytes.fromhex(key_hex), 0
        fields = []
        for _, ftype in t.map_key:
            fields.append(key_field(key[at:at + KEY_TYPES[ftype]], ftype))
            at += KEY_TYPES[ftype]
        items.append(([o for o, _ in fields], [s for _, s in fields],
                      number(bytes.fromhex(value_hex), t.map_value)))
    items.sort(key=lambda x: (x[0], x[2]))
    return {**raw, "key": [f for f, _ in t.map_key], "pairs": [[f, v] for _, f, v in items]}


def format_map(name: str, m: dict[str, Any]) -> str:
    """`table NAME: ...` then a row per key: its fields, then the value."""
    head = (f"table {name}: a hash map, {m['items']} of {m['entries']} entries, "
            f"{m['full']} updates refused (full)")
    rows = [[*m["key"], "value"], *([*map(str, f), str(v)] for f, v in m["pairs"])]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join([head, *("  " + "  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True))
                              for r in rows)])
