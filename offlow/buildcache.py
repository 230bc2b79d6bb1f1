"""The build cache: where builds are kept, and how an entry is trusted or written.

An entry is one file (an executable, an archive, an object) in the cache folder, named
by its builder after the content hash of what went into it (offlow/cbuild.py: sources'
and headers' contents, flags, the compiler's path and version). Beside it, NAME.sum
records a checksum of its bytes and, where the name alone does not say everything it
was built from, those inputs: an entry whose file is missing, cut short or changed,
whose record is missing, or that was built from other inputs, is built again.

A builder writes under a temporary name of its own and renames into place (`publish`),
so concurrent builds of one entry each put a whole file there, and a reader sees the
old entry, the new one, or a file and record that disagree (then it builds again).

$OFFLOW_CACHE moves the folder (default $XDG_CACHE_HOME/offlow, else ~/.cache/offlow);
OFFLOW_NO_CACHE=1 (`offlow run --no-cache`) trusts no entry: everything is built
again and replaces what was there."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from offlow.errors import OfflowError

NO_CACHE = "OFFLOW_NO_CACHE"


def cache_dir() -> Path:
    """Where builds are kept: $OFFLOW_CACHE, else $XDG_CACHE_HOME/offlow, else
    ~/.cache/offlow (made when missing)."""
    base = os.environ.get("OFFLOW_CACHE")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = str(Path(xdg if xdg and os.path.isabs(xdg) else Path.home() / ".cache")
                   / "offlow")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def bypassed() -> bool:
    """Whether OFFLOW_NO_CACHE asks for every build to be made again."""
    return os.environ.get(NO_CACHE, "") not in ("", "0")


def _record_path(entry: Path) -> Path:
    return entry.with_name(entry.name + ".sum")


def _record(path: Path, inputs: str) -> str:
    """What NAME.sum holds for file `path` built from `inputs`."""
    h = hashlib.blake2b(digest_size=16)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"{h.hexdigest()} {path.stat().st_size}\n{inputs}\n"


def hit(entry: Path, inputs: str = "") -> bool:
    """Whether `entry` is in the cache whole and was built from `inputs` (never when
    OFFLOW_NO_CACHE is set)."""
    if bypassed():
        return False
    try:
        return _record_path(entry).read_text() == _record(entry, inputs)
    except OSError:  # no file, no record
        return False


def temporary(entry: Path) -> Path:
    """A name of this thread's own beside `entry` to build it under."""
    return entry.with_name(f"{entry.name}.tmp{os.getpid()}.{threading.get_native_id()}")


def publish(tmp: Path, entry: Path, inputs: str = "") -> Path:
    """Move the finished build `tmp` into place as `entry` with its record (each a
    rename); return `entry`."""
    rec = temporary(_record_path(entry))
    rec.write_text(_record(tmp, inputs))
    tmp.replace(entry)
    rec.replace(_record_path(entry))
    return entry


def make(entry: Path, build: Callable[[Path], object], inputs: str = "") -> Path:
    """`entry`, from the cache, or made by `build` (given the temporary file to write)
    and published; a failed or interrupted build leaves nothing behind."""
    if hit(entry, inputs):
        return entry
    tmp = temporary(entry)
    try:
        build(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return publish(tmp, entry, inputs)


@functools.cache
def _version(path: str, mtime_ns: int, size: int) -> str:
    res = subprocess.run([path, "--version"], capture_output=True, text=True)
    return res.stdout.partition("\n")[0].strip()


def compiler_id(name: str) -> str:
    """The compiler `name` as a build depends on it: the file it resolves to on $PATH
    and the version it prints (asked once per file as it is now)."""
    found = shutil.which(name)
    if found is None:
        raise OfflowError(f"no C compiler ({name}): install it (the README's setup "
                          "command does)")
    real = os.path.realpath(found)
    st = os.stat(real)
    return f"{found} -> {real}: {_version(real, st.st_mtime_ns, st.st_size)}"


def cpu_id() -> str:
    """This CPU's vendor, model and features (/proc/cpuinfo's lines, once each)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    return "\n".join(dict.fromkeys(line for line in info.splitlines()
                                   if line.startswith(("vendor_id", "model name", "flags"))))


def compiler_inputs(name: str, this_cpu: bool) -> str:
    """What a build with compiler `name` depends on besides its files and flags: the
    compiler (compiler_id), and for a build tuned to this CPU (`this_cpu`: the `native`
    flag set's -march) the CPU too (cpu_id: such a build may not run on another)."""
    return compiler_id(name) + ("\n" + cpu_id() if this_cpu else "")
