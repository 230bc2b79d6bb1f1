"""What a build reads again and again is parsed once per process for the same input: an
element body's analysis (the preprocessor and pycparser), runtime/build.toml, and the
syntax tree of the file an element's C strings are written in. A changed input is
parsed again, and a refusal is said each time."""

from __future__ import annotations

import ast
import tomllib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from offlow import cbuild
from offlow.dsl import where
from offlow.errors import OfflowError
from offlow.passes import cbody, cpp
from offlow.passes.cbody import BodyError, analyze_body
from offlow.passes.gnuc import GnuCParser

FIELDS = {"ttl": "uint8_t", "proto": "uint8_t"}


def _counted(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[object]:
    """Replace `owner.name` by a wrapper that records each call's first argument."""
    calls: list[object] = []
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append(args[0] if args else None)
        return real(*args, **kw)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _body(text: str) -> str:
    """`text` with a comment no other test's body has (the analyses are per process)."""
    return f"/* {uuid.uuid4().hex} */\n{text}"


def test_a_body_analysed_again_with_the_same_inputs_is_not_preprocessed_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(monkeypatch, cbody, "preprocess")
    body = _body("state->ttl = state->proto;\nEMIT(out);")
    first = analyze_body(body, element="e", outputs=["out"], fields=FIELDS)
    again = analyze_body(body, element="e", outputs=["out"], fields=FIELDS)
    assert len(calls) == 1
    assert again == first and first.reads == {"proto"} and first.writes == {"ttl"}


def test_a_body_with_other_inputs_is_analysed_again_with_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(monkeypatch, cbody, "preprocess")
    body = _body("state->ttl = state->proto;\nEMIT(out);")
    analyze_body(body, element="e", outputs=["out"], fields=FIELDS)
    # another output list: `out` is no longer one of its ports
    with pytest.raises(BodyError, match="out"):
        analyze_body(body, element="e", outputs=["tx"], fields=FIELDS)
    # the same text under another element's name: its messages name that element
    with pytest.raises(BodyError, match="element `f`"):
        analyze_body(body, element="f", outputs=["tx"], fields=FIELDS)
    # a field the body reads given another type is another analysis too
    analyze_body(body, element="e", outputs=["out"], fields={**FIELDS, "proto": "uint16_t"})
    assert len(calls) == 4


def test_a_body_refused_is_refused_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(monkeypatch, cbody, "preprocess")
    body = _body("state->ttl = ;")
    for _ in range(2):
        with pytest.raises(BodyError, match="does not parse"):
            analyze_body(body, element="e", outputs=["out"], fields=FIELDS)
    assert len(calls) == 2


def test_the_build_description_is_parsed_once_per_text(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = _counted(monkeypatch, tomllib, "loads")
    path = tmp_path / "build.toml"
    text = cbuild.DESCRIPTION.read_text()
    path.write_text(text)
    first = cbuild.description(path)
    assert cbuild.description(path) == first and len(calls) == 1
    # the file changed: read as it is now
    assert first.cc == "gcc" and 'cc = "gcc"\n' in text
    path.write_text(text.replace('cc = "gcc"\n', 'cc = "cc"\n'))
    assert cbuild.description(path).cc == "cc" and len(calls) == 2
    assert first.cc == "gcc"
    with pytest.raises(TypeError):  # shared between callers: not to be changed by one
        first.flag_sets["optimize"] = ()  # type: ignore[index]


def test_a_damaged_build_description_is_refused_each_time(tmp_path: Path) -> None:
    path = tmp_path / "build.toml"
    path.write_text("cc = \n")
    for _ in range(2):
        with pytest.raises(OfflowError, match="not a build description"):
            cbuild.description(path)
    with pytest.raises(OfflowError, match="not a build description"):
        cbuild.description(tmp_path / "missing.toml")


def _classes(tmp_path: Path, source: str) -> dict[str, type]:
    """The classes of a module file written from `source`, each with the site
    Element.__init_subclass__ records (file, line of its `class` statement)."""
    file = tmp_path / f"m{uuid.uuid4().hex}.py"
    file.write_text(source)
    out: dict[str, type] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = type(node.name, (), {"_ofl_site": (str(file), node.lineno)})
    return out


SOURCE = '''
class A:
    helpers = """int x;"""
    body: str = (
        "EMIT(out);")
    other = 3


class B:
    other = 4
    body = f"{3}"
    body = """
DROP();"""
'''


def test_an_elements_c_strings_lines_come_from_one_syntax_tree_of_its_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = _counted(monkeypatch, ast, "parse")
    classes = _classes(tmp_path, SOURCE)
    calls.clear()
    a, b = classes["A"](), classes["B"]()
    file = vars(classes["A"])["_ofl_site"][0]
    assert where.code_site(a, "helpers") == (file, 3)
    assert where.code_site(a, "body") == (file, 5)
    assert where.code_site(a, "other") == (file, 0)  # not a string
    assert where.code_site(b, "body") == (file, 12)  # the first plain string assigned
    assert where.code_site(b, "missing") == (file, 0)
    assert len(calls) == 1


def test_an_edited_file_gives_its_new_lines(tmp_path: Path) -> None:
    classes = _classes(tmp_path, SOURCE)
    a = classes["A"]()
    file = Path(vars(classes["A"])["_ofl_site"][0])
    assert where.code_site(a, "body") == (str(file), 5)
    file.write_text(SOURCE.replace("    body: str = (\n", "    body: str = (\n\n"))
    assert where.code_site(a, "body") == (str(file), 6)
    file.write_text("class A(:\n")  # no longer Python: the line is unknown
    assert where.code_site(a, "body") == (str(file), 0)


def test_the_parser_is_given_the_code_without_gccs_built_in_macros() -> None:
    """gcc -dD writes its ~380 built-in macros before the code, each after a line
    marker the parser would read; they are left out, the code's lines kept."""
    pre = cpp.preprocess('int a;\n#define TWO 2\nvoid f(void) {\n#define THREE 3\n'
                         '#line 40 "prog.py"\nint b = TWO + THREE;\n}\n', "void f(void) {")
    assert "<built-in>" not in pre.text and "<command-line>" not in pre.text
    assert pre.text.splitlines()[:2] == ['# 1 "<stdin>"', "int a;"]
    assert pre.macros == ("THREE",)
    ast_ = GnuCParser().parse(pre.text, filename="<offlow>")
    assert ast_.ext[0].coord.line == 1
    assert [str(x.coord) for x in ast_.ext[-1].body.block_items] == ["prog.py:40:5"]


def test_a_body_error_names_its_line_in_the_program_file() -> None:
    body = _body("int a = 1;\n\nstate->ttl = ;")  # line 4 of the body: after the comment
    with pytest.raises(BodyError, match=r"prog\.py:13: element `e`: C does not parse"):
        analyze_body(body, element="e", outputs=["out"], fields=FIELDS,
                     site=cbody.Site("prog.py", 10))
