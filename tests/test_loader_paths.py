"""`load_program` as a host program calls it: a path as a string or a Path, settings as
a list; a string of settings, a folder and a missing file are one clear error each
(not an AttributeError, nor each character taken for a setting)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow import OfflowError, Program
from offlow.dsl.loader import load_program

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
