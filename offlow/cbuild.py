"""The C build: runtime/build.toml (the one table of C flags, and the runtime's core and
libraries), and compiling with it, cached by content hash (offlow/buildcache.py).

Everything offlow compiles goes through here: the runtime's libraries (one static
archive each, per set of flags), generated programs (offlow/build.py), offlow's C tools,
the C tests and the benchmarks' drivers."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import threading
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from offlow import buildcache
from offlow.buildcache import cache_dir
from offlow.errors import OfflowError
from offlow.paths import ROOT

RUNTIME = ROOT / "runtime"
DESCRIPTION = RUNTIME / "build.toml"
# The builds of the runtime and of offlow's tools: warnings are errors there.
TOOL = ("base", "optimize", "werror")


@dataclass(frozen=True)
class Library:
    """One folder of the runtime: the core, or a library beside it (runtime/lib/NAME)."""

    name: str
    path: Path
    needs: tuple[str, ...] = ()
    link: tuple[str, ...] = ()  # the system libraries it needs
    cflags: tuple[str, ...] = ()  # its own compile flags (a peer's headers), after the sets'

    @property
    def include(self) -> Path:
        return self.path / "include"

    @property
    def src(self) -> Path:
        return self.path / "src"

    @property
    def tests(self) -> Path:
        return self.path / "tests"

    def sources(self) -> list[Path]:
        return sorted(self.src.glob("*.c"))

    def source(self, module: str) -> Path:
        """Its source file `module`.c (a tool that takes only some modules)."""
        path = self.src / f"{module}.c"
        if not path.exists():
            raise OfflowError(f"runtime library `{self.name}` has no module {module}.c")
        return path

    def headers(self) -> list[Path]:
        """Its public headers and the private ones beside its sources."""
        return [*sorted(self.include.rglob("*.h")), *sorted(self.src.glob("*.h"))]

    def public(self) -> list[str]:
        """Its public headers as a program includes them (`offlow/lpm4.h`)."""
        return [str(h.relative_to(self.include)) for h in sorted(self.include.rglob("*.h"))]


@dataclass(frozen=True)
class Description:
    """runtime/build.toml, read."""

    cc: str
    flag_sets: Mapping[str, tuple[str, ...]]
    cc_for: Mapping[str, str]  # flag set -> the compiler it needs
    libraries: Mapping[str, Library]

    def flags(self, *sets: str) -> tuple[str, ...]:
        """The flags of the named sets, in order."""
        unknown = [s for s in sets if s not in self.flag_sets]
        if unknown:
            raise OfflowError(f"{DESCRIPTION}: no flag set {unknown[0]!r}; it has "
                              + ", ".join(self.flag_sets))
        return tuple(f for s in sets for f in self.flag_sets[s])

    def compiler(self, *sets: str) -> str:
        return next((self.cc_for[s] for s in sets if s in self.cc_for), self.cc)

    def library(self, name: str) -> Library:
        if name not in self.libraries:
            raise OfflowError(f"{DESCRIPTION}: no library {name!r}; it has "
                              + ", ".join(self.libraries))
        return self.libraries[name]

    def closure(self, names: Iterable[str]) -> tuple[Library, ...]:
        """The libraries `names` and those they need, in link order (each one before the
        libraries it needs)."""
        order: list[str] = []

        def visit(name: str, path: tuple[str, ...]) -> None:
            if name in path:
                raise OfflowError(f"{DESCRIPTION}: libraries need each other: "
                                  + " -> ".join((*path, name)))
            if name in order:
                return
            for dep in self.library(name).needs:
                visit(dep, (*path, name))
            order.append(name)

        for n in names:
            visit(n, ())
        return tuple(self.libraries[n] for n in reversed(order))

    def owner(self, header: str) -> Library | None:
        """The library whose include folder holds `header` (`offlow/lpm4.h`)."""
        return next((lib for lib in self.libraries.values()
                     if (lib.include / header).is_file()), None)

    def for_headers(self, headers: Iterable[str]) -> tuple[str, ...]:
        """The libraries a program that includes `headers` links: the core and the
        owners of those headers (a header no library holds is the program's own or the
        system's)."""
        names = ["core"]
        for h in headers:
            lib = self.owner(h)
            if lib and lib.name not in names:
                names.append(lib.name)
        return tuple(names)


def description(path: Path = DESCRIPTION) -> Description:
    """Read the build description (the file is read each time; its text is parsed once
    per process: one build asks for it ~20 times, ~8 ms of TOML each)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise OfflowError(f"{path}: not a build description: {e}") from None
    return _described(str(path), text)


@functools.lru_cache(maxsize=8)
def _described(path: str, text: str) -> Description:
    """The build description `text` (of file `path`, for its errors), read-only."""
    try:
        raw = tomllib.loads(text)
        libs = {name: Library(name, RUNTIME / v["path"], tuple(v.get("needs", ())),
                              tuple(v.get("link", ())), tuple(v.get("cflags", ())))
                for name, v in raw["lib"].items()}
        return Description(raw["cc"],
                           MappingProxyType({k: tuple(v) for k, v in raw["flags"].items()}),
                           MappingProxyType(dict(raw.get("cc_for", {}))),
                           MappingProxyType(libs))
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise OfflowError(f"{path}: not a build description: {e}") from None


def flags(*sets: str) -> tuple[str, ...]:
    """The flags of the named sets of runtime/build.toml, in order."""
    return description().flags(*sets)


def for_this_cpu(args: Sequence[str]) -> bool:
    """Whether flags `args` tune the build to this CPU (the `native` set's -m flags)."""
    return any(f in args for f in flags("native") if f.startswith("-m"))


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:16]


def _files_digest(files: Iterable[Path], *extra: str) -> str:
    return digest(*(str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f).encode()
                    + f.read_bytes() for f in files), *(x.encode() for x in extra))


def c_locale() -> dict[str, str]:
    """The environment with the C locale: the compiler's messages in English with plain
    quotes on every machine, as offlow/ccwarn.py reads them (a translated `warning:`
    would not be recognised)."""
    return {**{k: v for k, v in os.environ.items() if k != "LANGUAGE"}, "LC_ALL": "C"}


def cc(cc_name: str, args: Sequence[str], what: str) -> str:
    """Run the compiler (in the C locale); return its output (its warnings, when it
    succeeds: the caller picks those it shows, offlow/ccwarn.py); its errors (without
    its warnings) as an OfflowError."""
    if shutil.which(cc_name) is None:
        raise OfflowError(f"no C compiler ({cc_name}): install it (the README's setup "
                          "command does)")
    res = subprocess.run([cc_name, *args], capture_output=True, text=True, env=c_locale())
    if res.returncode != 0:
        raise OfflowError(f"C compiler failed on {what}:\n"
                          f"{_errors_only(cc_name, args, res.stderr)}")
    return res.stderr


def _errors_only(cc_name: str, args: Sequence[str], stderr: str) -> str:
    """The compiler's errors without its warnings (of generated code, mostly, which a
    user cannot act on): the same compile checked again with warnings off. When that
    passes, the warnings were the errors (-Werror): all of the first output."""
    werror = set(flags("werror"))
    res = subprocess.run([cc_name, *[a for a in args if a not in werror], *flags("errors_only")],
                         capture_output=True, text=True, env=c_locale())
    return (res.stderr if res.returncode != 0 and res.stderr.strip() else stderr).strip()


def include_flags(libs: Iterable[Library], extra: Iterable[Path] = ()) -> list[str]:
    return [f"-I{p}" for p in [*(lib.include for lib in libs), *extra]]


def each_in_parallel(fn: Callable[..., object], calls: Sequence[tuple[Any, ...]]) -> None:
    """fn(*args) for each of `calls`, as many at once as this machine has CPUs (a
    compiler each: threads wait on them); the first error is raised once the calls
    under way have ended, and the calls not yet begun are dropped (each looks, as it
    begins, whether one has failed: a free thread takes the next call before this one
    can cancel it, as it did under load)."""
    failed = threading.Event()

    def one(*args: Any) -> None:
        if failed.is_set():
            return
        try:
            fn(*args)
        except BaseException:
            failed.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, min(len(calls), os.cpu_count() or 1))) as pool:
        futures = [pool.submit(one, *c) for c in calls]
        try:
            for f in as_completed(futures):
                f.result()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def build_library(name: str, sets: Sequence[str] = TOOL, extra: Sequence[str] = ()) -> Path:
    """Compile runtime library `name` into a static archive once per content hash of
    its sources, the headers it can see and the flags (the sets', then `extra`); return
    the archive."""
    d = description()
    lib = d.library(name)
    seen = d.closure([name])
    args = [*d.flags(*sets), *extra, *lib.cflags]
    compiler = d.compiler(*sets)
    key = _files_digest([*lib.sources(), *(h for x in seen for h in x.headers())],
                        buildcache.compiler_inputs(compiler, for_this_cpu(args)),
                        " ".join(args))
    out = cache_dir() / f"runtime-{name}-{key}"
    archive = out / f"libofflow-{name}.a"
    if buildcache.hit(archive):
        return archive
    objects = buildcache.temporary(out)  # this build's own folder: no half-built entry
    objects.mkdir(parents=True, exist_ok=True)
    try:
        objs = [str(objects / (src.stem + ".o")) for src in lib.sources()]
        each_in_parallel(lambda src, obj: cc(
            compiler, [*args, *include_flags(seen, [lib.src]), "-c", str(src), "-o", obj],
            f"{src.relative_to(ROOT)}"), list(zip(lib.sources(), objs, strict=True)))
        subprocess.run(["ar", "rcs", str(objects / archive.name), *objs], check=True)
        buildcache.folder(out)
        return buildcache.publish(objects / archive.name, archive)
    finally:  # also after a compiler error or Ctrl-C
        shutil.rmtree(objects, ignore_errors=True)


def build_exe(name: str, sources: Sequence[Path], libs: Sequence[str] = ("core",),
              sets: Sequence[str] = TOOL, *, includes: Sequence[Path] = (),
              extra: Sequence[str] = (), peer: Sequence[str] = (),
              link: Sequence[str] = (), archives: bool = True,
              own_sets: Sequence[str] = ()) -> Path:
    """Compile `sources` (a tool's, a test's or a benchmark driver's) with runtime
    libraries `libs` once per content hash of the sources, the headers they can see and
    the flags; return the executable (a shared object with flag set `shared`).
    `archives`: link the libraries' archives, built with the same flags; else the
    sources name every runtime module they need (a shared object exports only those).
    `includes`: more folders of headers; `extra`: flags after the sets'; `peer`: a
    peer's flags (from pkg-config), before the sets' (ours win), for `sources` only (a
    driver that includes the peer's headers); `link`: more libraries; `own_sets`: flag
    sets for `sources` only, last (a system header folder, a warning of theirs). The
    libraries get neither: they stay the archives other builds link."""
    d = description()
    seen = d.closure(libs)
    args = [*peer, *d.flags(*sets), *extra]
    mine = [*args, *d.flags(*own_sets)]
    compiler = d.compiler(*sets)
    headers = [*(h for lib in seen for h in lib.headers()),
               *(h for inc in includes for h in sorted(inc.glob("*.h")))]
    linked = [build_library(lib.name, sets, extra) for lib in seen] if archives else []
    system = [f for lib in seen for f in lib.link if f not in link]
    key = _files_digest([*sources, *headers],
                        buildcache.compiler_inputs(compiler, for_this_cpu(mine)),
                        " ".join(mine),
                        " ".join(link), " ".join(system), *(a.parent.name for a in linked))
    return buildcache.make(cache_dir() / f"{name}-{key}", lambda tmp: cc(compiler, [
        *mine, *include_flags(seen, [*includes, *(lib.src for lib in seen)]),
        *map(str, sources), *map(str, linked), "-o", str(tmp), *link,
        *dict.fromkeys(system)], name))


def build_shared(name: str, modules: Sequence[tuple[str, str]]) -> Path:
    """A shared library (for ctypes) of the runtime modules `modules`, (library,
    module) pairs, once per content hash; return its path."""
    d = description()
    sources = [d.library(lib).source(m) for lib, m in modules]
    return build_exe(name, sources, sorted({lib for lib, _ in modules}), (*TOOL, "shared"),
                     archives=False)
