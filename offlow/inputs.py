"""A run's inputs as its sources will see them, known before any process starts: a
capture's frames and its longest frame, a synthetic size mix's largest frame (its
prefix file read too). They are read by the runtime's own source code (pcap_port.c,
synth.c) in a small tool, runtime/tools/inputs_main.c, so a file the run would refuse
is refused here first, with the same message."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from offlow.cbuild import RUNTIME, build_exe
from offlow.errors import OfflowError

INPUTS_MAIN = RUNTIME / "tools" / "inputs_main.c"


@dataclass(frozen=True)
class Capture:
    """A capture file: its records and its longest frame in bytes."""

    path: Path
    frames: int
    longest: int


def _tool() -> Path:
    return build_exe("offlow-inputs", [INPUTS_MAIN])


def _stamps(args: Sequence[str]) -> tuple[tuple[str, int, int, int], ...]:
    """What the files among `args` are now (path, inode, size, change time): an answer
    about a file that changed since is not the answer about it."""
    out = []
    for a in args:
        try:
            st = os.stat(a)
        except OSError:
            continue
        out.append((a, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _answer(args: tuple[str, ...], stamps: tuple[tuple[str, int, int, int], ...]
            ) -> tuple[int, str, str]:
    """The tool's status, stdout and stderr for `args` (asked once per process while
    the files they name stay as `stamps` says: a run checks its options when its build
    is made and again when the Run is, and a test process runs many)."""
    del stamps  # (part of the key only)
    res = subprocess.run([str(_tool()), *args], capture_output=True, text=True)
    return res.returncode, res.stdout, res.stderr


def _ask(args: list[str], what: str) -> dict[str, int]:
    """Run the tool; its "key N key N" answer, or its message as an OfflowError."""
    rc, out, err = _answer(tuple(args), _stamps(args))
    if rc != 0:
        msg = err.strip() or f"status {rc}"
        raise OfflowError(f"{what}: {msg}")
    words = out.split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2], strict=True)}


def read_capture(path: Path) -> Capture:
    """What the capture at `path` holds, or an OfflowError saying why a source could
    not replay it (missing, not a capture, a truncated record, a link type ...)."""
    if not path.is_file():
        raise OfflowError(f"--input {path}: no such file" if not path.exists()
                          else f"--input {path}: not a file")
    got = _ask(["pcap", str(path)], "--input")
    return Capture(path, got["frames"], got["longest"])


def largest_synthetic(sizes: str, prefixes: Path | None) -> int:
    """The largest frame of the synthetic size mix `sizes` (checked, and the prefix
    file read, as a synthetic source will), or an OfflowError."""
    if prefixes is not None and not prefixes.is_file():
        raise OfflowError(f"--prefixes {prefixes}: no such file")
    args = ["synth", sizes, *([str(prefixes)] if prefixes is not None else [])]
    return _ask(args, "--sizes" if prefixes is None else "--sizes/--prefixes")["largest"]
