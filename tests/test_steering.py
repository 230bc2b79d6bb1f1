"""Key-based steering of a data-parallel segment (Floem's queue mapping): every key
always reaches the same core (key % cores), packets of a key stay in order, and
nothing is lost; mistakes in the steering field are clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow import Element, OfflowError, Program, Sink, Source
from offlow.build import build, compile_program, plan_program
from offlow.dsl.loader import load_program
from offlow.explain import explain
from offlow.runner import RunOptions, run

STEER = Path(__file__).resolve().parent / "programs" / "steer.py"


def test_each_key_reaches_one_core_in_order() -> None:
    b = build(load_program(STEER), werror=True)
    res = run(b, RunOptions(count=20_000, loops=2, sizes="64", timeout=60))
    assert res.ok, res.errors
    tables = res.stats["host"]["tables"]
    assert tables["bad"] == [0, 0]
    assert tables["owner"] == [k % 3 + 1 for k in range(16)]
    cores = [c for c in res.stats["host"]["cores"] if c["segment"] == "app"]
    assert sum(c["pkts_in"] for c in cores) == 40_000
    assert all(c["pkts_in"] > 0 for c in cores)


def test_explain_shows_the_steering() -> None:
    text = explain(plan_program(load_program(STEER)))
    assert "data-parallel over 3 cores (steered by key % 3)" in text


@pytest.mark.parametrize(("setting", "message"), [
    ("app.steer=nosuch", "steered by `nosuch`, which is not an integer per-packet field"),
    ("app.group=on", "is a core group and steered by `key`"),
])
def test_steering_errors(setting: str, message: str) -> None:
    with pytest.raises(OfflowError, match=message):
        compile_program(load_program(STEER, [setting]))


def test_steering_field_must_be_written_before_the_queue() -> None:
    compile_program(load_program(STEER, ["app.steer=seq"]))  # written on the NIC: fine

    class Late(Element):
        fields = {"late": "uint32_t"}
        body = "state->late = 1;"

    p = Program("late")
    src, late, out = Source("rx"), Late("late"), Sink("tx")
    src >> late >> out
    p.segment("rx", [src], device="nic")
    p.segment("app", [late, out], device="host", cores=[0, 1], steer="late")
    with pytest.raises(OfflowError, match="packets from `rx` enter it before any element "
                                          "writes `state->late`"):
        compile_program(p)
