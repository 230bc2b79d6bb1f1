"""Build and run C test programs from pytest (plain or with ASan+UBSan)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime"
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-g", "-pthread"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]


def runtime_sources() -> list[Path]:
    """All C sources of the runtime library."""
    return sorted((RUNTIME / "src").glob("*.c"))


def build_c(
    sources: list[Path], out_dir: Path, name: str, sanitize: bool = False,
    libs: tuple[str, ...] = ("-lpcap", "-lz", "-lm"),
) -> Path:
    """Compile `sources` plus the runtime into an executable; return its path."""
    flags = CFLAGS + (SANITIZE + ["-O1"] if sanitize else ["-O2"])
    key = hashlib.sha256(" ".join(map(str, sources + flags)).encode()).hexdigest()[:8]
    exe = out_dir / f"{name}-{'asan' if sanitize else 'plain'}-{key}"
    cmd = ["gcc", *flags, f"-I{RUNTIME / 'include'}", *map(str, sources), "-o", str(exe), *libs]
    subprocess.run(cmd, check=True, capture_output=False)
    return exe


def run_c(exe: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a C test program; sanitizer failures make it exit non-zero."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    return subprocess.run([str(exe), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
