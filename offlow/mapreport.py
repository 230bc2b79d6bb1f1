"""A shared hash map's part of the run's report: the stats file's pairs (each
"KEYHEX=VALUEHEX", the key's packed bytes and the value's, in memory order: runtime
map.h's ofl_map_json) read as the key's fields and the value (a record's fields, in
its declared order), sorted by key. An integer field is a number; an address field
(`ipv4`, `ipv6`, `mac`: its bytes as on the wire) is its text: 192.0.2.1, 2001:db8::1,
02:00:00:aa:bb:cc. Every target's report (host, nic, xdp's walk of its BPF map) is read
here."""

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


def fields(raw: bytes, layout: tuple[tuple[str, str], ...]) -> list[tuple[int | bytes, int | str]]:
    """The packed fields `layout` ((name, type) in order) of `raw`: each field's order
    and what the report shows (key_field)."""
    out, at = [], 0
    for _, ftype in layout:
        out.append(key_field(raw[at:at + KEY_TYPES[ftype]], ftype))
        at += KEY_TYPES[ftype]
    return out


def decode(t: SharedTable, raw: dict[str, Any]) -> dict[str, Any]:
    """Map `t`'s stats (kind "map") with its pairs as [[field values...], value], sorted
    by key (an address by its bytes); a record value is [its field values...], their
    names under "value". Stats without pairs (a live read of the counters only: the
    runtime's ofl_map_json) stay without them."""
    names = {"value": [f for f, _ in t.map_record]} if t.map_record else {}
    if "pairs" not in raw:
        return {**raw, "key": [f for f, _ in t.map_key], **names}
    items = []
    for item in raw.get("pairs", []):
        key_hex, value_hex = item.split("=")
        key = fields(bytes.fromhex(key_hex), t.map_key)
        value: Any
        if t.map_record:
            got = fields(bytes.fromhex(value_hex), t.map_record)
            value, order = [s for _, s in got], [o for o, _ in got]
        else:
            value = order = number(bytes.fromhex(value_hex), t.map_value)
        items.append(([o for o, _ in key], [s for _, s in key], order, value))
    items.sort(key=lambda x: (x[0], x[2]))
    return {**raw, "key": [f for f, _ in t.map_key], **names,
            "pairs": [[f, v] for _, f, _, v in items]}


def format_map(name: str, m: dict[str, Any]) -> str:
    """`table NAME: ...` then a row per key: its fields, then the value (a record: each
    of its fields, a column each); the first line alone for stats without pairs."""
    head = (f"table {name}: a hash map, {m['items']} of {m['entries']} entries, "
            f"{m['full']} updates refused (full)")
    if "pairs" not in m:
        return head
    record = "value" in m
    rows = [[*m["key"], *(m["value"] if record else ["value"])],
            *([*map(str, f), *(map(str, v) if record else [str(v)])] for f, v in m["pairs"])]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join([head, *("  " + "  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True))
                              for r in rows)])
