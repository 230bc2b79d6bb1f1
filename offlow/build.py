"""Compiler driver: program -> compiled IR -> C -> executables, cached by content hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from offlow import targets
from offlow.codegen.c import gen_common
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.passes import compile_graph
from offlow.plan import Plan, make_plan

ROOT = Path(__file__).resolve().parents[1]
# The real inputs (BGP table, captures): ../shared/data beside the checkout, or
# $OFFLOW_DATA for a checkout that lives elsewhere.
DATA = Path(os.environ.get("OFFLOW_DATA") or ROOT.parent / "shared" / "data")
RUNTIME = ROOT / "runtime"
CFLAGS = ("-std=c11", "-D_GNU_SOURCE", "-O2", "-g", "-pthread", "-Wall", "-Wextra")
LIBS = ("-lpcap", "-lz", "-lm", "-pthread")


def cache_dir() -> Path:
    """Where builds are kept: $OFFLOW_CACHE or ~/.cache/offlow."""
    base = os.environ.get("OFFLOW_CACHE") or Path.home() / ".cache" / "offlow"
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:16]


def _cc(args: list[str], what: str) -> None:
    if shutil.which("gcc") is None:
        raise OfflowError("no C compiler: install gcc (the README's setup command does)")
    res = subprocess.run(["gcc", *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise OfflowError(f"C compiler failed on {what}:\n{_errors_only(args, res.stderr)}")


def _errors_only(args: list[str], stderr: str) -> str:
    """The compiler's errors without its warnings (of generated code, mostly, which a
    user cannot act on): the same compile checked again with warnings off. When that
    passes, the warnings were the errors (-Werror): all of the first output."""
    res = subprocess.run(["gcc", *[a for a in args if a != "-Werror"], "-w", "-fsyntax-only"],
                         capture_output=True, text=True)
    return (res.stderr if res.returncode != 0 and res.stderr.strip() else stderr).strip()


def runtime_hash(extra_flags: tuple[str, ...] = ()) -> str:
    """Hash of the runtime's sources, headers and flags."""
    files = sorted((RUNTIME / "src").glob("*.[ch]")) + sorted((RUNTIME / "include").rglob("*.h"))
    return _digest(*(f.name.encode() + f.read_bytes() for f in files),
                   " ".join(CFLAGS + extra_flags).encode())


def build_runtime(extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile the runtime library once per content hash; return libofflow.a."""
    out = cache_dir() / f"runtime-{runtime_hash(extra_flags)}"
    lib = out / "libofflow.a"
    if lib.exists():
        return lib
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    objs = []
    try:
        for src in sorted((RUNTIME / "src").glob("*.c")):
            obj = tmp / (src.stem + ".o")
            _cc([*CFLAGS, *extra_flags, "-Werror", f"-I{RUNTIME / 'include'}", "-c", str(src),
                 "-o", str(obj)], f"runtime/{src.name}")
            objs.append(str(obj))
        subprocess.run(["ar", "rcs", str(tmp / "libofflow.a"), *objs], check=True)
    except BaseException:  # a compiler error or Ctrl-C: leave no half-built directory
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        tmp.rename(out)
    except OSError:  # another build won the race; use its result
        shutil.rmtree(tmp, ignore_errors=True)
    return lib


def build_tool(name: str, sources: list[Path], cflags: tuple[str, ...] | list[str],
               libs: tuple[str, ...] | list[str] = ()) -> Path:
    """Compile a C tool (a benchmark or checker driver plus the runtime modules it
    names) once per content hash of its sources, the runtime headers and the flags;
    return the executable."""
    if shutil.which("gcc") is None:
        raise OfflowError("no C compiler: install gcc (the README's setup command does)")
    # public headers, the runtime's internal ones (chan_int.h ...), the tools' and the
    # benchmarks'
    headers = [*sorted((RUNTIME / "include" / "offlow").glob("*.h")),
               *sorted((RUNTIME / "src").glob("*.h")), *sorted((RUNTIME / "tools").glob("*.h")),
               *sorted((RUNTIME / "bench").glob("*.h"))]
    key = _digest(*(f.name.encode() + f.read_bytes() for f in [*sources, *headers]),
                  " ".join([*cflags, *libs]).encode())
    exe = cache_dir() / f"{name}-{key}"
    if exe.exists():
        return exe
    tmp = exe.with_name(exe.name + f".tmp{os.getpid()}")
    _cc([*cflags, f"-I{RUNTIME / 'include'}", *map(str, sources), "-o", str(tmp), *libs],
        name)
    tmp.replace(exe)
    return exe


@dataclass(frozen=True)
class Build:
    """The result of compiling a program: its plan, generated sources and executables."""

    plan: Plan
    sources: dict[str, str]
    directory: Path
    binaries: dict[str, Path]  # device -> executable

    @property
    def graph(self) -> Graph:
        """The compiled graph (the plan's)."""
        return self.plan.graph


def compile_program(program: Program, fit: tuple[int, str] | None = None) -> Graph:
    """Front-end and passes only; `fit`: the mtu the input needs and why
    (Program.to_ir)."""
    return compile_graph(program.to_ir(fit))


def plan_graph(g: Graph) -> Plan:
    """The lowering plan of compiled graph `g` on the targets its segments name (a
    target need not be usable here to be planned for: `explain` shows the plan)."""
    return make_plan(g, {d: targets.get(d) for d in g.devices()})


def plan_program(program: Program, fit: tuple[int, str] | None = None) -> Plan:
    """Front-end, passes and the lowering plan (what `explain` shows)."""
    return plan_graph(compile_program(program, fit))


def generate(plan: Plan) -> dict[str, str]:
    """File name -> text: common.h, then each device's files from its target."""
    files = {"common.h": gen_common(plan)}
    for d in plan.devices:
        files.update(targets.get(d.target).generate(plan, d.name))
    return files


def build(program: Program, *, werror: bool = False, extra_flags: tuple[str, ...] = (),
          fit: tuple[int, str] | None = None) -> Build:
    """Compile `program` to one executable per device, reusing cached builds; `fit`:
    the mtu its input needs and why (offlow.runner.check_options), for a program that sets
    none."""
    plan = plan_program(program, fit)
    for d in plan.devices:
        targets.usable(d.target)
    sources = generate(plan)
    flags = extra_flags + (("-Werror",) if werror else ())
    lib = build_runtime(extra_flags)
    key = _digest(*(k.encode() + v.encode() for k, v in sorted(sources.items())),
                  lib.parent.name.encode(), " ".join(flags).encode())
    out = cache_dir() / f"{program.name}-{key}"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in sources.items():
        if not (out / name).exists():  # (whole, even beside a build of the same program)
            tmp = out / f"{name}.tmp{os.getpid()}"
            tmp.write_text(text)
            tmp.replace(out / name)

    def compile_c(c_file: Path, exe: Path) -> None:
        """Compile generated `c_file` with the runtime into `exe` (once: cached)."""
        if exe.exists():
            return
        tmp = exe.with_name(exe.name + f".tmp{os.getpid()}")
        _cc([*CFLAGS, *flags, f"-I{RUNTIME / 'include'}", f"-I{out}", str(c_file), str(lib),
             "-o", str(tmp), *LIBS], f"generated {c_file.name} of `{program.name}`")
        tmp.rename(exe)

    binaries = {d.name: targets.get(d.target).build(plan, d.name, out, compile_c)
                for d in plan.devices}
    return Build(plan, sources, out, binaries)
