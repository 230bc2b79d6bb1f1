"""A run's inputs as its sources will see them, known before any process starts: a
capture's frames and its longest frame, a synthetic size mix's largest frame (its
prefix file read too). They are read by the runtime's own source code (pcap_port.c,
synth.c) in a small tool, runtime/tools/inputs_main.c, so a file the run would refuse
is refused here first, with the same message."""

from __future__ import annotations

import subprocess
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


def _ask(args: list[str], what: str) -> dict[str, int]:
    """Run the tool; its "key N key N" answer, or its message as an OfflowError."""
    res = subprocess.run([str(_tool()), *args], capture_output=True, text=True)
    if res.returncode != 0:
        msg = res.stderr.strip() or f"status {res.returncode}"
        raise OfflowError(f"{what}: {msg}")
    words = res.stdout.split()
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
