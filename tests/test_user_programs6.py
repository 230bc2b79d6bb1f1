"""A new user operating running programs: the pictures and live page of a program whose
names are not plain identifiers (tests/programs/odd_names.py)."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import offlow.reload
from offlow import livepage
from offlow.build import plan_program
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.plan import Plan
from offlow.runner import Run, RunOptions, build_for
from tests.e2e import ROOT, offlow_cli
from tests.programs import reload_mark
from tests.programs.odd_names import LONG, NAMES

ODD = ROOT / "tests/programs/odd_names.py"
SVG = "{http://www.w3.org/2000/svg}"
PAUSE = 5.0  # seconds the first of two reloads at once waits for the second to finish


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


@pytest.fixture(scope="module")
def reload_run() -> Iterator[Path]:
    """reload_mark.py (mark 7, counted plainly) running for up to a minute: its window."""
    o = RunOptions(duration=60.0, rate=2000, count=1000, seed=3)
    run = Run(build_for(reload_mark.program(), o), o)
    run.start()
    try:
        assert run.window is not None
        yield Path(run.window)
    finally:
        run.stop()
        run.wait()


def test_two_reloads_at_once_leave_a_true_description(reload_run: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A (mark 9: new nic code) is held after its check, before it sends, until B (mark 7
    # counted atomically) is done or PAUSE has passed. On the old code both compared
    # with the first description: B gave the host new code (the nic's was unchanged),
    # then A the nic, and A wrote back its stale copy (host: plain) over B's, so the
    # reload of the first program below changed the nic only and left the host running
    # B's code. With the lock B waits for A, and compares with what A wrote.
    a_in, b_done = threading.Event(), threading.Event()
    real = offlow.reload.reload_object

    def held(b: Any, device: str) -> Path:
        if threading.current_thread().name == "A":
            a_in.set()
            b_done.wait(PAUSE)
        return real(b, device)

    monkeypatch.setattr(offlow.reload, "reload_object", held)
    done: dict[str, Any] = {}

    def go(name: str, program: Any) -> None:
        try:
            done[name] = offlow.reload.reload(reload_run, program)
        except OfflowError as e:
            done[name] = e
        finally:
            if name == "B":
                b_done.set()

    a = threading.Thread(target=go, name="A", args=("A", reload_mark.program(mark=9)))
    b = threading.Thread(target=go, name="B", args=("B", reload_mark.program(how="atomic")))
    a.start()
    assert a_in.wait(120), done  # A has read the description and built
    b.start()
    a.join()
    b.join()
    assert not any(isinstance(x, OfflowError) for x in done.values()), done
    # A went first (B waited for it), so B replaced both: the nic's mark 9 with its 7
    assert (done["A"].reloaded, done["B"].reloaded) == (("nic",), ("nic", "host")), done
    # the processes now run B's program: the first one differs from it on the host only
    back = offlow.reload.reload(reload_run, reload_mark.program())
    assert back.reloaded == ("host",), (done, back)
