"""`Session.drained()`: whether every packet has been processed now, without waiting
(what `wait_drained` waits for). False while a source that never ends by itself
(a UDP port) is running, True once a counted input has been processed whole (its
packets all counted), an error once the program stopped before draining, and one
outside the `with` block."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from offlow import OfflowError
from offlow.dsl.loader import load_program
from offlow.runner import RunOptions, progress_totals
from offlow.session import session

ECHO = Path(__file__).resolve().parent / "programs" / "echo.py"


def test_drained_is_false_while_an_endless_source_runs() -> None:
    with session(load_program(ECHO), RunOptions(udp_port=0, timeout=60)) as s:
        assert s.channel("echo").request(b"abc") == b"cba"   # (the processes are up)
        assert s.drained() is False
        assert s.drained() is False
    assert s.result is not None and s.result.ok, s.result.errors


def test_drained_becomes_true_once_a_counted_input_is_processed_whole() -> None:
    count = 5000
    with session(load_program(ECHO), RunOptions(count=count)) as s:
        deadline = time.monotonic() + 60
        while not s.drained():
            assert time.monotonic() < deadline, "not drained within 60 s"
            time.sleep(0.01)
        totals = progress_totals(s.stats()[0])
        assert totals["read"] == count == totals["forwarded"] + totals["dropped"], totals
        assert s.drained() is True   # (it stays so)
        s.wait_drained(timeout=1)    # (returns at once)
    assert s.result is not None and s.result.ok


def test_drained_is_an_error_once_a_process_died_and_outside_the_block() -> None:
    with pytest.raises(OfflowError):   # the session ends with the device's death
        with session(load_program(ECHO), RunOptions(udp_port=0, timeout=60)) as s:
            assert s.channel("echo").request(b"x") == b"x"
            os.kill(s.run.procs["nic"].pid, signal.SIGKILL)
            s.run.procs["nic"].wait(timeout=30)
            with pytest.raises(OfflowError, match="stopped before draining .*nic"):
                s.drained()
    with pytest.raises(OfflowError, match="not running"):
        s.drained()
