"""The tree's layout rules, checked from the code itself: no import cycle inside the
offlow package (deferred imports included), no production module importing the test
inputs (offlow.testing), C flags written only in the build
description (runtime/build.toml), a runtime core that uses none of the libraries beside
it, and generated programs that include and link only the libraries their elements and
tables name."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from offlow import Element, OfflowError, Program, Sink, Source, cbuild
from offlow.build import build, compile_program, generate, plan_graph
from offlow.codegen.c import headers
from offlow.dsl.loader import load_program

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "offlow"


# ---- imports -------------------------------------------------------------------------


def _modules(package: Path) -> dict[str, Path]:
    """Every module of `package` by its dotted name."""
    out = {}
    for p in sorted(package.rglob("*.py")):
        parts = list(p.relative_to(package.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that module `name` imports anywhere in its text (at the
    top, in a function body, under TYPE_CHECKING): `from X import y` counts as X.y
    when that is a module, else as X."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = here[:len(here) - node.level + 1]
                base = ".".join([*pkg, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in modules and t != name)
    return out


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    modules = _modules(package)
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph`, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_offlow_package_has_no_import_cycle() -> None:
    cycle = _cycle(import_graph(PACKAGE))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle_closed_by_a_deferred_relative_import(
        tmp_path: Path) -> None:
    """(The check itself.)"""
    pkg = tmp_path / "offlow"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from offlow.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n    return g\n")
    (pkg / "c.py").write_text("import offlow.a\n")
    graph = import_graph(pkg)
    assert graph == {"offlow": set(), "offlow.sub": set(), "offlow.a": {"offlow.sub.b"},
                     "offlow.sub.b": {"offlow.c"}, "offlow.c": {"offlow.a"}}
    assert _cycle(graph) == ["offlow.a", "offlow.sub.b", "offlow.c", "offlow.a"]
    (pkg / "c.py").write_text("g = 1\n")
    assert _cycle(import_graph(pkg)) is None



# Modules outside offlow.testing that may import it, each a tool that is a test by
# nature: `offlow pcsa` (offlow.cli) generates, without --input, a stream of a known
# number of distinct sources to hold the sketch's estimate against.
TESTING_USERS = {"offlow.cli"}


def _testing(module: str) -> bool:
    return module == "offlow.testing" or module.startswith("offlow.testing.")


def test_production_modules_import_no_test_inputs() -> None:
    """What the packet builders need (the Internet checksum: offlow.netsum) lives
    outside offlow.testing, which imports it, not the other way round."""
    users = {m for m, deps in import_graph(PACKAGE).items()
             if not _testing(m) and any(_testing(d) for d in deps)}
    assert users - TESTING_USERS == set(), "modules importing offlow.testing"

# ---- C flags ---------------------------------------------------------------------------

# What a C compiler or linker flag looks like (an include path, -I, is not one: it is
# where a file lies, computed from the layout).
FLAG = re.compile(r"-(std=|O[0-3sz]?$|W[a-zA-Z]|f[a-zA-Z]{2}|march=|mtune=|D[A-Za-z_]|"
                  r"l(pcap|z|m|dpdk|pthread)$|pthread$|shared$|nostdinc$|dD$|g$)")


def _flag_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a Python file that is a C flag."""
    tree = ast.parse(path.read_text(), str(path))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and FLAG.match(n.value)]


def test_c_flags_are_written_only_in_the_build_description() -> None:
    files = [p for d in ("offlow", "tests", "benchmarks", "examples")
             for p in sorted((ROOT / d).rglob("*.py"))]
    # (this file names flags to test the check itself)
    found = [f"{p.relative_to(ROOT)}:{line}: {text!r}" for p in files
             for line, text in _flag_strings(p) if p != Path(__file__)]
    assert found == [], "C flags outside runtime/build.toml:\n" + "\n".join(found)


def test_the_flag_check_sees_a_flag_in_code(tmp_path: Path) -> None:
    """(The check itself: flags in a tuple, an f-string and a call are found; prose, an
    include path and an output file are not.)"""
    probe = tmp_path / "probe.py"
    probe.write_text('CFLAGS = ("-O2", "-Wall")\nx = f"-march={a}"\n'
                     'run(["gcc", "-fPIC", f"-I{p}", "-o", out])\n'
                     '"""Built with -O3 -march=native."""\n')
    assert [t for _, t in _flag_strings(probe)] == ["-O2", "-Wall", "-march=", "-fPIC"]


# ---- the runtime's core and libraries --------------------------------------------------


def _symbols(archive: Path) -> tuple[set[str], set[str]]:
    """(defined, undefined) ofl_ symbols of a static library."""
    out = subprocess.run(["nm", "-g", str(archive)], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-1].startswith("ofl_"):
            (undefined if parts[-2] == "U" else defined).add(parts[-1])
    return defined, undefined


def test_each_runtime_library_uses_only_what_it_says_it_needs() -> None:
    """The core calls no library's function; each library only its own, the core's and
    those of the libraries it `needs` (runtime/build.toml)."""
    d = cbuild.description()
    defined = {n: _symbols(cbuild.build_library(n))[0] for n in d.libraries}
    for name in d.libraries:
        allowed = set().union(*(defined[x.name] for x in d.closure([name])))
        missing = _symbols(cbuild.build_library(name))[1] - allowed
        assert not missing, f"runtime library {name} uses {sorted(missing)}"
    assert d.library("core").needs == ()


def test_the_cores_headers_and_error_text_know_no_library() -> None:
    """runtime.h (every program includes it) pulls in no library header, and the core's
    error text names no library's errors."""
    d = cbuild.description()
    core = d.library("core")
    lib_headers = {h for n, lib in d.libraries.items() if n != "core" for h in lib.public()}
    text = subprocess.run([d.compiler(), *d.flags("base", "depends"),
                           *cbuild.include_flags(d.closure(["lpm", "kvs", "lso"])),
                           str(core.include / "offlow" / "runtime.h")],
                          capture_output=True, text=True, check=True).stdout
    pulled = {h for h in lib_headers if h in text}
    assert pulled == set(), f"runtime.h includes library headers {sorted(pulled)}"
    assert "memcached" not in (core.src / "err.c").read_text().lower()


def _tiny() -> Program:
    p = Program("tiny")
    src, out = Source("rx"), Sink("tx")
    src >> out
    p.segment("all", [src, out], device="host", cores=[0])
    return p


@pytest.mark.parametrize(("program", "libs"), [
    ("examples/ttl_pipeline.py", ("core",)), ("examples/router.py", ("core", "lpm")),
    ("examples/kvs_cache.py", ("core", "kvs")), ("examples/lso.py", ("core", "lso")),
    ("examples/pcsa.py", ("core",))])
def test_a_program_includes_and_links_only_the_libraries_it_names(
        program: str, libs: tuple[str, ...]) -> None:
    g = compile_program(load_program(ROOT / program))
    d = cbuild.description()
    assert d.for_headers(headers(g)) == libs
    common = generate(plan_graph(g))["common.h"]
    for name, lib in d.libraries.items():
        named = [h for h in lib.public() if f"#include <{h}>" in common]
        assert bool(named) == (name in libs), (name, named)


def test_a_program_that_names_no_library_builds_without_them(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """Only the core's archive is built for a program that names no library header."""
    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path))
    b = build(_tiny())
    assert b.binaries["host"].exists()
    assert sorted(p.name.split("-")[1] for p in tmp_path.glob("runtime-*")) == ["core"]


class _Replies(Element):
    """A user's element that calls a function of the kvs library (static inline in
    kvs_pkt.h): it must name the header."""

    body = """
    /* a reply of the store's is sent on */
    if (!ofl_kvs_sends(OFL_KVS_SEND)) DROP();
    """


def _replies(includes: tuple[str, ...]) -> Program:
    p = Program("replies_user")
    el = type("Replies", (_Replies,), {"includes": includes})("replies")
    src, out = Source("rx"), Sink("tx")
    src >> el >> out
    p.segment("all", [src, el, out], device="host", cores=[0])
    return p


def test_a_body_that_calls_a_library_without_naming_its_header_says_what_to_do() -> None:
    with pytest.raises(OfflowError) as e:
        build(_replies(()))
    assert "OFL_KVS_SEND" in str(e.value) and "name it in the element's or the table's " \
        "`includes`" in str(e.value)
    assert build(_replies(("offlow/kvs_pkt.h",))).binaries["host"].exists()
