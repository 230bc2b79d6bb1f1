"""The C compiler's warnings at the program's own lines (a body's, its helpers') are
shown, as a C programmer expects, on every run of the program, its build cached or
not, and carried in the run's result; its warnings of generated code or of the
runtime's headers are not (offlow/ccwarn.py)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from offlow import cbuild, ccwarn
from offlow.build import build
from offlow.cli import main
from offlow.dsl.loader import load_program
from offlow.paths import ROOT
from offlow.runner import RunOptions, build_for, run

# a user's program: the same class on two devices, comments in its body
SOURCE = textwrap.dedent('''\
    from offlow import Element, Program, Sink, Source


    class Tally(Element):
        """Lets every packet through; its body has two mistakes C compilers warn of."""

        body = r"""
        /* `spare` is set and never read */
        int spare = 7;
        int limit = -1;          // signed ...
        uint32_t seen = 3u;      // ... and unsigned
        if (limit < seen)
            EMIT(out);
        else
            EMIT(out);
        """


    def program() -> Program:
        p = Program("tally")
        src, near, far, out = Source("src"), Tally("near"), Tally("far"), Sink("out")
        src >> near >> far >> out
        p.segment("rx", [src, near], device="nic")
        p.segment("tx", [far, out], device="host")
        return p
    ''')


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A build cache of these tests' own: the first build compiles."""
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("cache")
        mp.setenv("OFFLOW_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prog") / "tally.py"
    path.write_text(SOURCE)
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, x in enumerate(path.read_text().splitlines(), 1) if text in x)


def expected(path: Path) -> list[tuple[str, str]]:
    """(where, what) of each warning: the unused variable, the comparison."""
    return [(f"{path}:{line_of(path, 'int spare')}:9: elements `near`, `far`: ",
             "[-Wunused-variable]"),
            (f"{path}:{line_of(path, 'if (limit < seen)')}:", "[-Wsign-compare]")]


def test_a_bodys_unused_variable_and_signed_unsigned_comparison_are_shown_at_its_lines(
        cache: Path, program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    o = RunOptions(count=20, timeout=60)
    res = run(build_for(load_program(program), o), o)
    assert res.ok, res.errors
    err = capsys.readouterr().err
    for where, flag in expected(program):
        # each once: the body is compiled for both devices
        shown = [x for x in err.splitlines() if where in x and x.endswith(flag)]
        assert len(shown) == 1 and shown[0].startswith("offlow: warning: "), err
        assert sum(1 for w in res.warnings if where in w and w.endswith(flag)) == 1
    assert "spare" in err and "different signedness" in err
    assert "elements `near`, `far`: comparison" in err, err


def test_a_cached_build_warns_again_and_the_json_result_carries_them(
        cache: Path, program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = build(load_program(program))  # (built by the test before, or now)
    made = {d: p.stat().st_mtime_ns for d, p in b.binaries.items()}
    capsys.readouterr()
    assert main(["run", str(program), "--count", "20", "--json"]) == 0
    out, err = capsys.readouterr()
    assert {d: p.stat().st_mtime_ns for d, p in b.binaries.items()} == made  # not rebuilt
    warnings = json.loads(out)["warnings"]
    for where, flag in expected(program):
        assert sum(1 for w in warnings if where in w and w.endswith(flag)) == 1, warnings
        assert sum(1 for x in err.splitlines() if where in x and x.endswith(flag)) == 1, err


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.py")))
def test_the_examples_compile_without_a_warning_at_their_own_lines(example: str) -> None:
    assert build(load_program(ROOT / "examples" / example)).warnings == ()


def test_warnings_of_generated_code_and_runtime_headers_are_not_the_programs(
        tmp_path: Path) -> None:
    """gcc's own output for a file as a build's: a header with a warning, generated
    code with one, and a body #line-mapped to the program's file with one."""
    prog = tmp_path / "prog.py"
    header = tmp_path / "include" / "lib.h"
    header.parent.mkdir()
    header.write_text("static inline int half(int x) { int unused_h = 0; return x / 2; }\n")
    c_file = tmp_path / "host.c"
    c_file.write_text(textwrap.dedent(f'''\
        #include "lib.h"
        int generated(void) {{ int unused_g = 0; return half(4); }}
        int body(unsigned n) {{
        #line 30 "{prog}"
            int unused_b = 0;
            return n;
        #line 7 "host.c"
        }}
        '''))
    said = cbuild.cc("gcc", [*cbuild.flags("base"), f"-I{header.parent}", "-c", str(c_file),
                             "-o", str(tmp_path / "host.o")], "a test file")
    assert "unused_h" in said and "unused_g" in said  # (the compiler did warn of them)
    kept = ccwarn.own_warnings(said, {str(prog)})
    assert len(kept) == 1 and kept[0].startswith(f"{prog}:30:9: warning: ")
    assert "unused_b" in kept[0] and kept[0].endswith("[-Wunused-variable]")


def test_a_damaged_warnings_file_gives_what_it_still_says_never_a_crash(
        tmp_path: Path, program: Path) -> None:
    from offlow.build import compile_program

    g = compile_program(load_program(program))
    spare = line_of(program, "int spare")
    kept = f"{program}:{spare}:9: warning: unused variable 'spare' [-Wunused-variable]"
    (tmp_path / f"host{ccwarn.SUFFIX}").write_bytes(b"\xff\xfe\x00cut sh\n" + kept.encode()
                                                    + b"\n" + kept[:20].encode())
    assert ccwarn.describe(g, ccwarn.kept(tmp_path)) == [
        f"{program}:{spare}:9: elements `near`, `far`: unused variable 'spare' "
        "[-Wunused-variable]"]


def test_the_compiler_speaks_the_c_locale_whatever_the_users(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a user's UTF-8 (or translated) locale gcc would quote with ‘…’ and translate
    `warning:`, which offlow/ccwarn.py would then not recognise: it runs in the C locale."""
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de:fr")
    prog = tmp_path / "prog.py"
    c_file = tmp_path / "body.c"
    c_file.write_text(f'int body(unsigned n) {{\n#line 12 "{prog}"\n    int spare = 0;\n'
                      "    return (int)n;\n}\n")
    said = cbuild.cc("gcc", [*cbuild.flags("base"), "-c", str(c_file),
                             "-o", str(tmp_path / "body.o")], "a test file")
    assert ccwarn.own_warnings(said, {str(prog)}) == [
        f"{prog}:12:9: warning: unused variable 'spare' [-Wunused-variable]"], said
