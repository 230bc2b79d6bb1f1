"""A core that never finishes its turn (a user's body in an endless loop) cannot see a
request to stop: the run gives its processes `RunOptions.stop_grace` seconds after the
request (Ctrl-C, SIGTERM, Run.stop), then kills those still up and says which, instead
of waiting for ever (it did: `offlow run` sat for minutes after a SIGTERM, until a
second signal)."""

from __future__ import annotations

import threading
import time

import pytest

from offlow import Element, Port, Program, Sink, Source
from offlow.runner import Run, RunOptions, RunResult, build_for


class WaitsForAFlag(Element):
    """A user's element that waits for a flag nothing ever sets, on frames of 100 bytes
    or more (the case this file is about); the smaller ones go on."""

    body = r"""
    volatile uint32_t flag = 0;      /* "set by the other core" -- never */
    if (pkt->len >= 100) {
        while (!flag) { }
    }
    """
    inputs = (Port("inp"),)
    outputs = (Port("out"),)


def _stuck(device: str) -> Program:
    p = Program("stuck")
    rx, w, out = Source("rx"), WaitsForAFlag("waits"), Sink("out")
    rx >> w >> out
    p.segment("only", [rx, w, out], device=device, cores=[0])
    return p


@pytest.mark.parametrize("device", ["host", "nic"])
def test_a_core_stuck_in_a_body_is_killed_after_the_grace_and_named(device: str) -> None:
    o = RunOptions(count=50, sizes="60:1,200:1", stop_grace=1.0)
    r = Run(build_for(_stuck(device), o), o)
    r.start()
    got: list[RunResult] = []
    waiter = threading.Thread(target=lambda: got.append(r.wait()), daemon=True)
    try:
        time.sleep(1.0)  # (it reads its packets and sticks on the first large one)
        r.stop()
        asked = time.monotonic()
        waiter.start()
        waiter.join(timeout=60)
        assert not waiter.is_alive(), "the run waited for ever for a core that never stops"
        assert time.monotonic() - asked >= 1.0  # (the grace was given)
    finally:
        for p in r.procs.values():
            if p.poll() is None:
                p.kill()
    res = got[0]
    assert not res.ok
    assert (f"{device} did not stop within 1 s of the request to stop: killed, its counts "
            "lost (a core that never finishes its turn: an element's body in an endless "
            "loop?)") in res.errors, res.errors


def test_the_grace_must_be_above_zero() -> None:
    from offlow.errors import OfflowError
    from offlow.runner import check_options
    with pytest.raises(OfflowError, match="--stop_grace 0: must be a number above 0"):
        check_options(RunOptions(stop_grace=0))
