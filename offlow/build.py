"""Compiler driver: program -> compiled IR -> C -> executables, cached by content hash."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from offlow import buildcache, cbuild, ccwarn, targets
from offlow.buildcache import cache_dir
from offlow.cbuild import digest
from offlow.codegen.c import gen_common, gen_sources, headers
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.passes import compile_graph
from offlow.plan import Plan, make_plan
from offlow.ports import PortKind


@dataclass(frozen=True)
class Build:
    """The result of compiling a program: its plan, generated sources and executables."""

    plan: Plan
    sources: dict[str, str]
    directory: Path
    binaries: dict[str, Path]  # device -> executable
    # the C compiler's warnings at the program's own lines (offlow/ccwarn.py), each once
    warnings: tuple[str, ...] = ()

    @property
    def graph(self) -> Graph:
        """The compiled graph (the plan's)."""
        return self.plan.graph


QUIET = ".quiet"  # beside a kept executable whose compile printed nothing (no warning)


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


def generate(plan: Plan, ports: tuple[PortKind, ...] = ()) -> dict[str, str]:
    """File name -> text: common.h and sources.h (the source kinds of the run's
    `ports`), then each device's files from its target."""
    files = {"common.h": gen_common(plan), "sources.h": gen_sources(plan, ports)}
    for d in plan.devices:
        files.update(targets.get(d.target).generate(plan, d.name))
    return files


def build(program: Program, *, werror: bool = False, extra_flags: tuple[str, ...] = (),
          fit: tuple[int, str] | None = None, ports: tuple[PortKind, ...] = (),
          own_sets: tuple[str, ...] = (),
          check: Callable[[Plan], object] | None = None) -> Build:
    """Compile `program` to one executable per device, reusing cached builds; `fit`:
    the mtu its input needs and why (offlow.runner.check_options), for a program that sets
    none; `ports`: the port kinds of runtime libraries its run uses (linked in);
    `extra_flags`: for the program and the runtime libraries it links; `own_sets`: flag
    sets for the generated code only (element_time: the runtime's sources never read
    it, so the libraries are the archives every other program links); `check`: called
    with the plan before anything is generated or compiled (it raises OfflowError on
    what the plan's run would refuse: the runner's --opt check)."""
    plan = plan_program(program, fit)
    if check is not None:
        check(plan)
    for dev in plan.devices:
        targets.usable(dev.target)
    sources = generate(plan, ports)
    graph = plan.graph
    d = cbuild.description()
    libs = d.closure(d.for_headers([*headers(graph), *(k.header for k in ports)]))
    archives = {lib.name: cbuild.build_library(lib.name, cbuild.TOOL, extra_flags)
                for lib in libs}
    cflags = (*d.flags("base", "optimize", "export_dynamic"), *extra_flags,
              *d.flags(*own_sets), *(d.flags("werror") if werror else ()))
    compiler = d.compiler()
    key = digest(*(k.encode() + v.encode() for k, v in sorted(sources.items())),
                 *(a.parent.name.encode() for a in archives.values()), " ".join(cflags).encode(),
                 buildcache.compiler_inputs(compiler, cbuild.for_this_cpu(cflags)).encode())
    out = cache_dir() / f"{program.name}-{key}"
    buildcache.folder(out)  # (marked used: no prune removes it meanwhile)
    for name, text in sources.items():
        path = out / name
        # (whole, even beside a build of the same program; rewritten when cut short)
        if not path.is_file() or path.read_text(errors="replace") != text:
            tmp = buildcache.temporary(path)
            tmp.write_text(text)
            tmp.replace(path)

    def compile_c(c_file: Path, exe: Path, more: Sequence[str] = ()) -> None:
        """Compile generated `c_file` with the runtime libraries (and the target's own,
        `more`) into `exe` (once: cached, with the archives and flags it was built
        from). The executable is kept apart too, under a key of what it is made of (its
        C file, common.h and sources.h, the flags but -Werror, the compiler, the
        archives): a program of which only another device's code changed (an edit of
        the host's element) takes it from there instead of compiling it again."""
        mine = d.closure([*archives, *more])
        linked = [archives.get(lib.name) or cbuild.build_library(lib.name, cbuild.TOOL,
                                                                 extra_flags) for lib in mine]
        system = list(dict.fromkeys(f for lib in mine for f in lib.link))
        inputs = " ".join([*(a.parent.name for a in linked), *system, ccwarn.KEPT])
        # -Werror changes no code: the executable is kept under a key without it, for
        # builds with it (the tests') and without (offlow run's) alike; a build with it
        # takes one only if its compile said nothing (`quiet`), else compiles and fails
        # as it always did
        strict = [f for f in d.flags("werror") if f in cflags]
        code_flags = [f for f in cflags if f not in strict]
        own = digest(c_file.read_bytes(), (out / "common.h").read_bytes(),
                     (out / "sources.h").read_bytes(),
                     " ".join(code_flags).encode(), inputs.encode(),
                     buildcache.compiler_inputs(compiler, cbuild.for_this_cpu(cflags)).encode())
        stored = buildcache.folder(cache_dir() / f"{program.name}.{exe.name}-{own}") / exe.name
        quiet = stored.with_name(stored.name + QUIET)

        def compile_to(tmp: Path, product: Path) -> None:
            try:
                said = cbuild.cc(compiler, [*cflags, *cbuild.include_flags(mine, [out]),
                                            str(c_file), *map(str, linked), "-o", str(tmp),
                                            *system],
                                 f"generated {c_file.name} of `{program.name}`")
            except OfflowError as e:
                raise OfflowError(_with_hint(str(e))) from None
            # (with the build: a cached build's run warns again, as ccache replays them)
            ccwarn.keep(product, ccwarn.own_warnings(said, ccwarn.own_files(graph)))
            if product == stored and not said.strip():
                quiet.touch()  # (before the executable is published: every compile of
                #                these inputs says the same, so writers agree)

        def take(tmp: Path) -> None:
            shutil.copyfile(stored, tmp)
            tmp.chmod(stored.stat().st_mode)
            ccwarn.keep(exe, ccwarn.kept_beside(stored))

        buildcache.make(stored, lambda tmp: compile_to(tmp, stored), inputs)
        if strict and not quiet.is_file():
            # kept from a compile without -Werror that warned: compiled with it for this
            # build alone (where it fails, as it always did)
            buildcache.make(exe, lambda tmp: compile_to(tmp, exe), inputs)
            return
        buildcache.make(exe, take, inputs)

    binaries = {dev.name: targets.get(dev.target).build(plan, dev.name, out, compile_c)
                for dev in plan.devices}
    # (every device's, a target's objects' too: the same body's warning shown once)
    return Build(plan, sources, out, binaries, tuple(ccwarn.describe(graph, ccwarn.kept(out))))


def reload_object(b: Build, device: str) -> Path:
    """The shared object of `device`'s generated loops in build `b` (no main, no runtime:
    it links against the running process's), for offlow reload; once per build."""
    so = b.directory / f"{device}.reload.so"
    d = cbuild.description()
    libs = d.closure(d.for_headers(headers(b.graph)))
    return buildcache.make(so, lambda tmp: cbuild.cc(
        d.compiler(), [*d.flags("base", "optimize", "reload_object"),
                       *cbuild.include_flags(libs, [b.directory]),
                       str(b.directory / f"{device}.c"), "-o", str(tmp)],
        f"the reload of {device}.c of `{b.graph.name}`"))
