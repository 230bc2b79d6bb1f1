"""A shared hash map's part of the run's report: the stats file's pairs (each
"KEYHEX=VALUEHEX", the key's packed bytes and the value's, in memory order: runtime
map.h's ofl_map_json) read as the key's fields and the value, sorted by key."""

from __future__ import annotations

from typing import Any

from offlow.ir import SharedTable
from offlow.ir.types import MAP_TYPES


def _number(raw: bytes, ctype: str) -> int:
    return int.from_bytes(raw, "little", signed=ctype.startswith("int"))


def decode(t: SharedTable, raw: dict[str, Any]) -> dict[str, Any]:
    """Map `t`'s stats (kind "map") with its pairs as [[field values...], value], sorted
    by key."""
    items = []
    for item in raw.get("pairs", []):
        key_hex, value_hex = item.split("=")
        key, at = bytes.fromhex(key_hex), 0
        fields = []
        for _, ctype in t.map_key:
            fields.append(_number(key[at:at + MAP_TYPES[ctype]], ctype))
            at += MAP_TYPES[ctype]
        items.append([fields, _number(bytes.fromhex(value_hex), t.map_value)])
    return {**raw, "key": [f for f, _ in t.map_key], "pairs": sorted(items)}


def format_map(name: str, m: dict[str, Any]) -> str:
    """`table NAME: ...` then a row per key: its fields, then the value."""
    head = (f"table {name}: a hash map, {m['items']} of {m['entries']} entries, "
            f"{m['full']} updates refused (full)")
    rows = [[*m["key"], "value"], *([*map(str, f), str(v)] for f, v in m["pairs"])]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join([head, *("  " + "  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True))
                              for r in rows)])
