"""JSON text for people (`offlow run --json`): indented as json.dumps(indent=2) writes
it, but an array of numbers on one line.

A shared array of 4M entries is one line of it, written by the json module's C encoder,
not 4M lines by its Python one (json.dumps with an indent never uses the C encoder):
5 s and 411 MB for `offlow run --json` of a 4M-bucket histogram before, and 37 MB of
output. The value read back is the same (json.loads of either text is equal).
"""

from __future__ import annotations

import json
from typing import Any


def _numbers(v: list[Any] | tuple[Any, ...]) -> bool:
    """Every item is an int or a float (not a bool); the types are taken in C: a 4M-item
    list takes milliseconds."""
    return set(map(type, v)) <= {int, float}


def _key(k: Any) -> str:
    """A member's name as json.dumps writes it (a str as it is; true, false, null and
    numbers as their JSON text)."""
    return json.dumps(k if isinstance(k, str) else json.dumps(k))


def _write(v: Any, level: int, indent: int, out: list[str]) -> None:
    inner, outer = " " * (indent * (level + 1)), " " * (indent * level)
    if isinstance(v, dict) and v:
        out.append("{")
        for n, (k, x) in enumerate(v.items()):
            out.append(f"{',' if n else ''}\n{inner}{_key(k)}: ")
            _write(x, level + 1, indent, out)
        out.append(f"\n{outer}}}")
    elif isinstance(v, list | tuple) and v and not _numbers(v):
        out.append("[")
        for n, x in enumerate(v):
            out.append(f"{',' if n else ''}\n{inner}")
            _write(x, level + 1, indent, out)
        out.append(f"\n{outer}]")
    else:  # a scalar, an empty object or array, an array of numbers: one line
        out.append(json.dumps(v))


def dumps(value: Any, indent: int = 2) -> str:
    """`value` as JSON text: json.dumps(value, indent=indent) but each array whose
    items are all numbers (a shared array, a queue's packets by instance) on one
    line."""
    out: list[str] = []
    _write(value, 0, indent, out)
    return "".join(out)
