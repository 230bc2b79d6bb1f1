"""The command line's value types (argparse `type=`), shared by every subcommand: a
value outside what its option allows is refused while the arguments are parsed, before
any work starts, with one error that names the option, the value and what is allowed.

Each type is a small frozen value that says what it allows (tests read it); a value it
refuses raises BadValue, which the CLI's parser turns into `offlow: error: OPTION VALUE:
REASON` (a plain argparse parser shows REASON after the option's name)."""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from pathlib import Path

U64_MAX = (1 << 64) - 1
INT_MAX = (1 << 31) - 1
SECONDS_MAX = 1e9  # ~31 years: any longer is a mistake, and it overflows timers
RATE_MAX = 1e12  # per second: far above any rate a core reaches


class BadValue(argparse.ArgumentTypeError):
    """A value an option's type refuses; its message says what is allowed."""


def _shown(text: str) -> str:
    return text if text.strip() and text == text.strip() else repr(text)


def refusal(action: argparse.Action, text: str, err: BadValue) -> str:
    """`OPTION VALUE: REASON`: the one error for a value `action`'s type refused (a
    Refused option's value is not repeated: it may be a secret)."""
    longs = [s for s in action.option_strings if s.startswith("--")]
    name = (longs or action.option_strings or [str(action.metavar or action.dest)])[0]
    shown = "" if isinstance(action.type, Refused) else f" {_shown(text)}"
    return f"{name}{shown}: {err}"


@dataclass(frozen=True)
class Whole:
    """A whole number within lo..hi (decimal digits only)."""

    lo: int
    hi: int = INT_MAX
    what: str = ""  # what the number counts, said in the error

    def __call__(self, text: str) -> int:
        try:
            value: int | None = int(text)
        except ValueError:  # (also a number of thousands of digits)
            value = None
        if value is None or not self.lo <= value <= self.hi:
            raise BadValue(f"must be a whole number {self.lo}..{self.hi}"
                           + (f" ({self.what})" if self.what else ""))
        return value


@dataclass(frozen=True)
class Number:
    """A finite number at least lo (above lo when `above`) and at most hi."""

    lo: float
    hi: float
    above: bool = False
    unit: str = ""  # "seconds", "packets/s": said in the error

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low_ok = value > self.lo if self.above else value >= self.lo
        if not (math.isfinite(value) and low_ok and value <= self.hi):
            unit = f" of {self.unit}" if self.unit else ""
            raise BadValue(f"must be a number{unit} {'above' if self.above else 'at least'} "
                           f"{self.lo:g}, at most {self.hi:g}")
        return value


def seconds(hi: float = SECONDS_MAX) -> Number:
    """A time in seconds above 0."""
    return Number(0.0, hi, above=True, unit="seconds")


def rate(unit: str) -> Number:
    """A rate per second, 0 for as fast as possible."""
    return Number(0.0, RATE_MAX, unit=f"{unit} (0: as fast as possible)")


PORT = Whole(1, 65535, "a UDP or TCP port")
PORT_OR_FREE = Whole(0, 65535, "a UDP or TCP port; 0: a free one")
SEED = Whole(0, U64_MAX, "a seed")


@dataclass(frozen=True)
class File:
    """An existing file that can be read."""

    def __call__(self, text: str) -> Path:
        path = Path(text)
        if not text.strip():
            raise BadValue("names no file")
        if path.is_dir():
            raise BadValue("is a directory, not a file")
        if not path.exists():
            raise BadValue("no such file")
        if not os.access(path, os.R_OK):
            raise BadValue("cannot be read")
        return path


@dataclass(frozen=True)
class Folder:
    """An existing folder."""

    def __call__(self, text: str) -> Path:
        path = Path(text)
        if not text.strip():
            raise BadValue("names no folder")
        if not path.exists():
            raise BadValue("no such folder")
        if not path.is_dir():
            raise BadValue("not a folder")
        return path


def unwritable(path: Path) -> str | None:
    """Why no file can be written at `path` (a folder is there, its folder is missing or
    takes no files), or None: what NewFile and the run's outputs check before anything
    starts."""
    if path.is_dir():
        return "is a directory; name a file in it"
    folder = path.parent
    if not folder.is_dir():
        return f"no such directory {folder}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"cannot write in {folder}"
    return None


@dataclass(frozen=True)
class NewFile:
    """A file to write: not a folder, in a folder that exists and takes files."""

    def __call__(self, text: str) -> Path:
        path = Path(text)
        if not text.strip():
            raise BadValue("names no file")
        why = unwritable(path)
        if why:
            raise BadValue(why)
        return path


@dataclass(frozen=True)
class Names:
    """A comma-separated list of some of `allowed` (one at least), kept as given."""

    allowed: tuple[str, ...]

    def __call__(self, text: str) -> str:
        names = [x.strip() for x in text.split(",")]
        if not text.strip() or any(x not in self.allowed for x in names):
            raise BadValue(f"expected some of {','.join(self.allowed)}, comma-separated")
        return text


@dataclass(frozen=True)
class Refused:
    """An option refused whatever its value, for `reason`."""

    reason: str

    def __call__(self, text: str) -> str:
        raise BadValue(self.reason)


CHECKED = (Whole, Number, File, Folder, NewFile, Names, Refused)
