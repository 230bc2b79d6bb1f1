"""Values elements are constructed with: shared tables, and parameters as C literals."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from offlow.errors import OfflowError


@dataclass(frozen=True)
class Shared:
    """A shared table or counter array, declared once, used by elements by name.

    It lives in the memory of the device whose elements use it; when elements on
    several devices use it, it lives in the interconnect window.
    """

    name: str
    ctype: str
    length: int = 1


def c_literal(value: Any, ctype: str, where: str) -> str:
    """`value` as a C literal of type `ctype`; `where` names it in the error."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        suffix = "ULL" if ctype.startswith("uint") and value >= 0 else "LL"
        return f"{value}{suffix}"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str) and ctype in ("const char *", "str"):
        return json.dumps(value)
    raise OfflowError(f"{where}: cannot pass {value!r} as C type `{ctype}`")
