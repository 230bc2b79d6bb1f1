"""`load_program` as a host program calls it: a path as a string or a Path, settings as
a list; a string of settings, a folder and a missing file are one clear error each
(not an AttributeError, nor each character taken for a setting)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from offlow import OfflowError, Program
from offlow.dsl.loader import load_program
from tests.e2e import run_example

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ttl_pipeline.py"


def test_a_path_as_a_string_loads_the_same_program() -> None:
    a, b = load_program(str(EXAMPLE), ["rx.device=host"]), load_program(EXAMPLE, ["rx.device=host"])
    assert isinstance(a, Program) and a.to_ir() == b.to_ir()
    assert {s.name: s.device for s in a.to_ir().segments}["rx"] == "host"


def test_settings_given_as_one_string_are_refused_naming_the_list() -> None:
    with pytest.raises(OfflowError) as e:
        load_program(str(EXAMPLE), "rx.device=host")
    assert str(e.value) == (f"load_program({str(EXAMPLE)!r}, 'rx.device=host'): settings are "
                            "a list of strings: ['rx.device=host']")


def test_a_folder_or_a_missing_file_is_one_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(OfflowError, match=r"is not a program file \(a folder\?\): give the "
                                          r"\.py file"):
        load_program(tmp_path)
    with pytest.raises(OfflowError, match=r"^no such program file: .*nope\.py$"):
        load_program(str(tmp_path / "nope.py"))


SIBLING = '''"""A user's own element, in a module beside the program that uses it."""
from offlow import Element, Port


class Hop(Element):
    inputs = (Port("inp"),)
    outputs = (Port("out"),)
    body = r"""
    /* the frame's last byte, plus one } */
    if (pkt->len) pkt->data[pkt->len - 1]++;
    """
'''

PROGRAM = '''from offlow import Program, Sink, Source
from loader_sibling_elems import Hop   # beside this file, as `python FILE` finds it


def program() -> Program:
    p = Program("sibling")
    src, hop, out = Source("rx"), Hop("hop"), Sink("tx")
    src >> hop >> out
    p.segment("all", [src, hop, out], device="host")
    return p
'''


def test_a_program_imports_its_own_module_beside_it(tmp_path: Path) -> None:
    """`from loader_sibling_elems import Hop` in a program file finds the module in the
    program's folder, as `python FILE` does (a ModuleNotFoundError before 2026-11-28,
    for offlow run and offlow reload alike), and the import path is as it was after."""
    (tmp_path / "loader_sibling_elems.py").write_text(SIBLING)
    (tmp_path / "prog.py").write_text(PROGRAM)
    before = list(sys.path)
    try:
        s = run_example(program=tmp_path / "prog.py", count=100)
    finally:
        sys.modules.pop("loader_sibling_elems", None)
    assert s["ok"], s["errors"]
    assert s["accounting"]["forwarded"] == 100
    assert sys.path == before
