"""Compiler driver: program -> compiled IR -> C -> executables, cached by content hash."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from offlow import cbuild
from offlow.cbuild import ROOT, cache_dir, digest
from offlow.codegen.c import generate, headers
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.passes import compile_graph

# The real inputs (BGP table, captures): ../shared/data beside the checkout, or
# $OFFLOW_DATA for a checkout that lives elsewhere.
DATA = Path(os.environ.get("OFFLOW_DATA") or ROOT.parent / "shared" / "data")


@dataclass(frozen=True)
class Build:
    """The result of compiling a program: its IR, generated C and executables."""

    graph: Graph
    sources: dict[str, str]
    directory: Path
    binaries: dict[str, Path]  # device -> executable


def _with_hint(message: str) -> str:
    """A compiler error, and what to do when a body uses a runtime name (ofl_, OFL_)
    that the program's headers do not declare (a library's, whose header no element
    names)."""
    if re.search(r"(implicit declaration of function|undefined reference to) .ofl_|"
                 r".(ofl|OFL)_\w*. undeclared", message):
        return (f"{message}\n(a name of a runtime library beside the core is declared by "
                "the library's header: name it in the element's or the table's `includes`, "
                "for example includes = (\"offlow/lpm4.h\",); docs/elements.md)")
    return message


def compile_program(program: Program, fit: tuple[int, str] | None = None) -> Graph:
    """Front-end and passes only (what `explain` needs); `fit`: the mtu the input
    needs and why (Program.to_ir)."""
    return compile_graph(program.to_ir(fit))


def build(program: Program, *, werror: bool = False, extra_flags: tuple[str, ...] = (),
          fit: tuple[int, str] | None = None) -> Build:
    """Compile `program` to one executable per device, reusing cached builds; `fit`:
    the mtu its input needs and why (offlow.runner.check_options), for a program that sets
    none."""
    graph = compile_program(program, fit)
    sources = generate(graph)
    d = cbuild.description()
    libs = d.closure(d.for_headers(headers(graph)))
    archives = [cbuild.build_library(lib.name, cbuild.TOOL, extra_flags) for lib in libs]
    cflags = (*d.flags("base", "optimize"), *extra_flags, *(d.flags("werror") if werror else ()))
    key = digest(*(k.encode() + v.encode() for k, v in sorted(sources.items())),
                 *(a.parent.name.encode() for a in archives), " ".join(cflags).encode())
    out = cache_dir() / f"{program.name}-{key}"
    binaries = {dev: out / dev for dev in graph.devices()}
    if not all(b.exists() for b in binaries.values()):
        out.mkdir(parents=True, exist_ok=True)
        for name, text in sources.items():
            (out / name).write_text(text)
        system = dict.fromkeys(f for lib in libs for f in lib.link)
        for dev, exe in binaries.items():
            tmp = exe.with_name(exe.name + f".tmp{os.getpid()}")
            try:
                cbuild.cc(d.compiler(), [*cflags, *cbuild.include_flags(libs, [out]),
                                         str(out / f"{dev}.c"), *map(str, archives), "-o",
                                         str(tmp), *system],
                          f"generated {dev}.c of `{program.name}`")
            except OfflowError as e:
                raise OfflowError(_with_hint(str(e))) from None
            tmp.rename(exe)
    return Build(graph, sources, out, binaries)
