"""Every example's output is byte-identical to what was recorded from the code before a
refactoring (tests/example_outputs.py: the cases, how they are digested, and how to
record them again after a deliberate change)."""

from __future__ import annotations

import pytest

from tests.example_outputs import CASES, Case, outputs, recorded


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_example_output_is_unchanged(case: Case) -> None:
    want = recorded()[case.name]
    got = outputs(case)
    assert got.get("counts") == want.get("counts"), "the run's counters changed"
    assert got["frames"] == want["frames"], "a different number of frames was written"
    assert got["pcap"] == want["pcap"], "the output capture's bytes changed"
