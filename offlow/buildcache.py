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
again and replaces what was there.

The folder is bounded ($OFFLOW_CACHE_MAX, default 2 GiB, 0 = no limit): a publish adds
its size to a running estimate (.offlow-added beside the last scan's total in
.offlow-size), and only when the estimate passes the limit is the folder scanned and its
least recently used entries removed down to 90% of it (`prune`). An entry is one name at
the top of the folder with its NAME.sum, or a folder (a runtime library's, a program's);
its last use is its time of last change, which a hit and `folder` refresh. An entry used
in the last GRACE_S seconds, and a temporary whose process is alive, are never removed,
and an entry is renamed away before it is deleted: a process that finds its entry gone
builds it again. Only a folder marked offlow's (CACHEDIR.TAG, written in the default
folder, or in $OFFLOW_CACHE when offlow makes it or finds it empty) is pruned, and never
one that holds $HOME."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from offlow.errors import OfflowError

NO_CACHE = "OFFLOW_NO_CACHE"
MAX = "OFFLOW_CACHE_MAX"
DEFAULT_MAX = 2 << 30
GRACE_S = 3600  # an entry used this recently may be in use (a test module's
# executable, a build about to run): never removed
RESCAN_S = 86400  # the estimate is checked against a scan at least this often
RETRY_S = 300  # a prune that entries in use kept over its target: not again before this
TAG = "CACHEDIR.TAG"  # https://bford.info/cachedir/ (backup tools skip the folder too)
_TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
             "# This file is a cache directory tag created by offlow (its build cache).\n"
             "# For information about cache directory tags see https://bford.info/cachedir/\n")
_SIZE, _ADDED, _LOCK = ".offlow-size", ".offlow-added", ".offlow-lock"
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40}
_TMP = re.compile(r"\.tmp(\d+)\.\d+$")  # temporary()'s suffix: the builder's process


def cache_dir() -> Path:
    """Where builds are kept: $OFFLOW_CACHE, else $XDG_CACHE_HOME/offlow, else
    ~/.cache/offlow (made when missing; marked offlow's when made, empty or the
    default); a folder that holds $HOME (`/`, $HOME itself) is refused, as is a bad
    $OFFLOW_CACHE_MAX (before anything is built)."""
    base = os.environ.get("OFFLOW_CACHE")
    mine = not base  # (the default folder is offlow's by its name)
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = str(Path(xdg if xdg and os.path.isabs(xdg) else Path.home() / ".cache")
                   / "offlow")
    path = Path(base)
    if Path.home().resolve().is_relative_to(path.resolve()):
        raise OfflowError(f"build cache folder {path} holds the home folder: offlow "
                          "deletes old builds in its cache; set OFFLOW_CACHE to a folder "
                          "of its own (e.g. ~/.cache/offlow)")
    max_size()
    path.mkdir(parents=True, exist_ok=True)
    if not (path / TAG).is_file() and (mine or next(os.scandir(path), None) is None):
        tmp = temporary(path / TAG)
        tmp.write_text(_TAG_TEXT)
        tmp.replace(path / TAG)
    return path


def parse_size(text: str, what: str = MAX) -> int:
    """Bytes from a size with an optional unit (500M, 2G, 1.5GiB: K, M, G, T are powers
    of 1000, Ki, Mi, Gi, Ti of 1024, a trailing B optional); `what` names it in the
    error."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kmgt]i?)?b?\s*", text, re.IGNORECASE)
    if m is None:
        raise OfflowError(f"{what}={text!r}: not a size: a number with an optional unit "
                          "(500M, 2G, 1.5GiB; K, M, G, T are powers of 1000, Ki, Mi, Gi, "
                          "Ti of 1024), 0 for no limit")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])


def max_size() -> int:
    """The cache's size limit in bytes ($OFFLOW_CACHE_MAX, default 2 GiB; 0: none)."""
    text = os.environ.get(MAX, "")
    return parse_size(text) if text.strip() else DEFAULT_MAX


def format_size(n: int) -> str:
    """`n` bytes for a person (1.5 GiB)."""
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


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
        found = _record_path(entry).read_text() == _record(entry, inputs)
    except OSError:  # no file, no record
        return False
    if found:
        _used(entry)
    return found


def _top(path: Path) -> Path | None:
    """The entry of the cache that holds `path` (a name at the folder's top), if any."""
    root = cache_dir()
    try:
        return root / path.relative_to(root).parts[0]
    except (ValueError, IndexError):
        return None


def _used(path: Path) -> None:
    """Mark the entry that holds `path` used now (its last use: what pruning goes by)."""
    top = _top(path)
    if top is not None:
        try:
            os.utime(top)
        except OSError:
            pass  # (removed meanwhile: its user builds it again)


def folder(path: Path) -> Path:
    """Folder `path` of the cache, made when missing and marked used (so that no prune
    removes it while a build writes in it); return it."""
    while True:
        path.mkdir(parents=True, exist_ok=True)
        try:
            os.utime(path)
            _used(path)
            return path
        except FileNotFoundError:  # pruned between the two: make it again
            continue


def temporary(entry: Path) -> Path:
    """A name of this thread's own beside `entry` to build it under."""
    return entry.with_name(f"{entry.name}.tmp{os.getpid()}.{threading.get_native_id()}")


def publish(tmp: Path, entry: Path, inputs: str = "") -> Path:
    """Move the finished build `tmp` into place as `entry` with its record (each a
    rename); return `entry`."""
    rec = temporary(_record_path(entry))
    rec.write_text(_record(tmp, inputs))
    size = tmp.stat().st_size + rec.stat().st_size
    tmp.replace(entry)
    rec.replace(_record_path(entry))
    _added(entry, size)
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


@dataclass(frozen=True)
class Entry:
    """One entry of the cache: its names at the folder's top, bytes, and last use."""

    names: tuple[Path, ...]
    size: int
    used: float  # seconds since the epoch
    busy: bool  # a temporary of a live process, or used in the last GRACE_S seconds


@dataclass(frozen=True)
class Pruned:
    """What a prune did."""

    removed: int
    freed: int
    kept: int  # entries left
    size: int  # their bytes
    busy: int  # entries over the limit kept because they may be in use


def _bytes(path: Path) -> int:
    """The bytes of file or folder `path` (links not followed; 0 when gone)."""
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_size
        return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir())
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # (another user's)
    return True


def _entries(root: Path, now: float) -> Iterator[Entry]:
    """The cache's entries (NAME with NAME.sum; a temporary alone), not its own files."""
    groups: dict[str, list[Path]] = {}
    for p in root.iterdir():
        if p.name == TAG or p.name.startswith(".offlow-"):
            continue
        key = p.name[:-len(".sum")] if p.name.endswith(".sum") else p.name
        groups.setdefault(key, []).append(p)
    for key, names in groups.items():
        try:
            used = max(p.lstat().st_mtime for p in names)
        except OSError:
            continue  # (removed meanwhile)
        tmp = _TMP.search(key)
        busy = now - used < GRACE_S or (tmp is not None and _alive(int(tmp.group(1))))
        yield Entry(tuple(names), sum(map(_bytes, names)), used, busy)


def offlows(root: Path) -> bool:
    """Whether folder `root` is marked offlow's cache (its CACHEDIR.TAG)."""
    try:
        return (root / TAG).read_text().startswith(_TAG_TEXT.splitlines()[0])
    except OSError:
        return False


def _remove(entry: Entry, root: Path) -> None:
    """Delete `entry`: each name renamed away first (a reader then sees it whole or
    gone), never following a link out of `root`."""
    serial = itertools.count()
    for p in entry.names:
        trash = root / f".offlow-trash.{os.getpid()}.{threading.get_native_id()}.{next(serial)}"
        try:
            p.rename(trash)
        except OSError:
            continue  # (removed meanwhile)
        _delete(trash)


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def prune(limit: int | None = None, *, wait: bool = True, root: Path | None = None) -> Pruned:
    """Remove the least recently used entries of the cache until it holds at most
    `limit` bytes (default max_size(), where 0 is no limit; 0 here removes every entry
    not in use), never one in use; `wait`: for another process's prune (else return at
    once, removing nothing)."""
    root = root or cache_dir()
    if not offlows(root):
        raise OfflowError(f"{root} is not offlow's build cache (no {TAG} from offlow): "
                          "nothing deleted; point OFFLOW_CACHE at an empty or new folder")
    if limit is None:
        limit = max_size() or sys.maxsize  # (0 there: no limit)
    with (root / _LOCK).open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return Pruned(0, 0, 0, 0, 0)
        entries = sorted(_entries(root, time.time()), key=lambda e: e.used)
        size = sum(e.size for e in entries)
        removed = freed = busy = 0
        for e in entries:
            if size <= limit:
                break
            if e.busy:
                busy += 1
                continue
            _remove(e, root)
            removed, freed, size = removed + 1, freed + e.size, size - e.size
        for trash in root.glob(".offlow-trash.*"):  # a killed prune's
            m = re.match(r"\.offlow-trash\.(\d+)\.", trash.name)
            if m and not _alive(int(m.group(1))):
                _delete(trash)
        # (kept over the limit by entries in use: the next scan waits RETRY_S)
        _write(root / _SIZE, f"{size} {int(size > limit)}\n")
        (root / _ADDED).write_text("")
    return Pruned(removed, freed, len(entries) - removed, size, busy)


def _write(path: Path, text: str) -> None:
    tmp = temporary(path)
    tmp.write_text(text)
    tmp.replace(path)


def _scan_due(root: Path, limit: int) -> bool:
    """Whether the cache may be over `limit`: its size as of its last scan plus what was
    published since is over it (unless that scan was kept over its target by entries in
    use less than RETRY_S ago), or no scan is recent (RESCAN_S) or readable."""
    try:
        scan = root / _SIZE
        age = time.time() - scan.stat().st_mtime
        size, kept_over = map(int, scan.read_text().split())
        added = sum(map(int, (root / _ADDED).read_text().split()))
    except (OSError, ValueError):
        return True
    return age > RESCAN_S or size + added > limit and (not kept_over or age > RETRY_S)


def _added(entry: Path, size: int) -> None:
    """After `entry` (`size` bytes with its record) was published: count it, and when
    the cache is over its limit (by the estimate: no scan otherwise) prune it to 90% of
    it."""
    top, limit = _top(entry), max_size()
    if top is None or limit == 0 or not offlows(top.parent):
        return
    with (top.parent / _ADDED).open("a") as f:  # (one short append: whole)
        f.write(f"{size}\n")
    if _scan_due(top.parent, limit):
        prune(limit * 9 // 10, wait=False, root=top.parent)  # (room till the next)


@dataclass(frozen=True)
class Info:
    """The cache as `offlow cache info` shows it."""

    folder: Path
    offlows: bool  # marked offlow's (else never pruned)
    entries: int
    size: int
    limit: int  # 0: none


def info(root: Path | None = None) -> Info:
    """The cache's folder, entries, bytes and limit (a scan)."""
    root = root or cache_dir()
    entries = list(_entries(root, time.time()))
    return Info(root, offlows(root), len(entries), sum(e.size for e in entries), max_size())
