"""The stream operators' run-time options (`offlow run --opt NAME_windows.size=...`)
checked before a run starts, as runtime/lib/streams/src/streams_opts.c will read them:
a value it would refuse is one error here, instead of a device process that fails once
started while the other side already reads packets (the Table `check` hook)."""

from __future__ import annotations

import re

from offlow.errors import OfflowError

SIZE_MAX = (2**63 - 1) // 4  # streams_opts.c: INT64_MAX / 4
AGG_FNS = ("count", "sum", "avg", "min", "max")
_NUMBER = re.compile(r"\s*[+-]?[0-9]+")  # what strtoll takes whole, base 10


def _num(name: str, options: dict[str, str], key: str, default: str, lo: int, hi: int) -> int:
    """streams_opts.c's opt_num: option `key` (else `default`) as a number in [lo, hi]."""
    s = options.get(key, default)
    if not _NUMBER.fullmatch(s) or not lo <= int(s) <= hi:
        raise OfflowError(f"stream operator {name}: {key}={s} is not a number within "
                          f"{lo}..{hi}")
    return int(s)


def check_bsort(name: str, options: dict[str, str]) -> None:
    """A BSort's buffer (`slack`), checked before the run."""
    _num(name, options, "slack", "0", 0, 4095)


def check_agg(name: str, options: dict[str, str]) -> None:
    """An Aggregate's windows (`fn`, `size`, `advance`, `groups`), checked before the run."""
    fn = options.get("fn", "avg")
    if fn not in AGG_FNS:
        raise OfflowError(f"stream operator {name}: fn={fn}: expected count, sum, avg, min "
                          "or max")
    size = _num(name, options, "size", "1", 1, SIZE_MAX)
    advance = _num(name, options, "advance", "1", 1, SIZE_MAX)
    _num(name, options, "groups", "64", 1, 65536)
    if size // advance >= 1024:
        raise OfflowError(f"stream operator {name}: size={size} over advance={advance} "
                          "keeps more than 1024 windows open")


def check_window(name: str, options: dict[str, str]) -> None:
    """A Join's or a Resample's window (`size`) and room per side (`cap`)."""
    _num(name, options, "size", "0", 0, SIZE_MAX)
    _num(name, options, "cap", "1024", 1, 65536)
