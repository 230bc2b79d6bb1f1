"""A new user operating running programs: the pictures and live page of a program whose
names are not plain identifiers (tests/programs/odd_names.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from offlow import livepage
from offlow.build import plan_program
from offlow.dsl.loader import load_program
from offlow.plan import Plan
from tests.e2e import ROOT, offlow_cli
from tests.programs.odd_names import LONG, NAMES

ODD = ROOT / "tests/programs/odd_names.py"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def drawing(tmp_path_factory: pytest.TempPathFactory) -> tuple[ET.Element, str]:
    """`offlow explain odd_names.py --svg`: the SVG's root, and the command's stderr."""
    svg = tmp_path_factory.mktemp("odd") / "odd.svg"
    r = offlow_cli("explain", str(ODD), "--svg", str(svg))
    assert r.returncode == 0, r.stderr
    return ET.parse(svg).getroot(), r.stderr


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_program(load_program(ODD), None)


def _nodes(root: ET.Element) -> dict[str, list[str]]:
    """Each node's <title> -> the lines of text drawn in it."""
    return {g.findtext(f"{SVG}title") or "": [t.text or "" for t in g.iter(f"{SVG}text")]
            for g in root.iter(f"{SVG}g") if g.get("class") == "node"}


def test_odd_names_are_drawn_as_they_are_written(drawing: tuple[ET.Element, str]) -> None:
    # the old code wrote `not\v4` as `notv4` (Graphviz's `\v`) and failed on `not ip\`
    # (a quoted DOT name ending in a backslash: "Graphviz failed: ... syntax error")
    root, err = drawing
    drawn = [line for lines in _nodes(root).values() for line in lines]
    for name in NAMES:
        assert name in drawn, (name, drawn)
    assert "seen_ttl" in drawn  # the table's cylinder
    assert err == ""


def test_the_live_page_keys_are_the_pictures_titles(drawing: tuple[ET.Element, str],
                                                    plan: Plan) -> None:
    # live.json's element keys must be the SVG titles the page looks them up by
    root, _ = drawing
    titles = set(_nodes(root))
    keys = set(livepage.counters(plan, {}, False)["elements"])
    assert keys == titles - {t for t in titles if t.startswith("table ")}


def test_a_program_with_odd_names_runs_and_counts_them_by_name() -> None:
    # the old code wrote the names into C as they are ("v4"q", "not ip\"): the generated
    # nic.c did not compile ("expected '}' before 'q'"), so the program could not run
    r = offlow_cli("run", str(ODD), "--duration", "1", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    elements = result["elements"]
    # counted under their own names: what reached the 64-char element is what left by tx
    for name in (NAMES[0], NAMES[1], LONG):
        assert elements[name]["in"] > 0, (name, elements)
    assert elements[LONG]["in"] == result["sinks"]["tx"]["packets"]
