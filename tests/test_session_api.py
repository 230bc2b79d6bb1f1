"""A session's calls as a host program meets them. `Session.drained()`: whether every
packet has been processed now, without waiting (what `wait_drained` waits for). False
while a source that never ends by itself (a UDP port) is running, True once a counted
input has been processed whole (its packets all counted), an error once the program
stopped before draining, and one outside the `with` block. A channel asked of a
program that has none says how one is declared."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from offlow import Element, OfflowError, Port, Program, Shared, Sink, Source
from offlow.dsl.loader import load_program
from offlow.elements import Count
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


def test_a_channel_of_a_program_without_any_says_how_one_is_declared() -> None:
    p = Program("tables_only")   # a table (its control channel), no channel of its own
    src, hits, out = Source("rx"), Count("hits", slot=0, counts=Shared("n", "uint64_t", 3)), \
        Sink("tx")
    src >> hits >> out
    p.segment("rx", [src, hits, out], device="nic")
    with session(p, RunOptions(count=10)) as s:
        with pytest.raises(OfflowError) as e:
            s.channel("ask")
    assert str(e.value) == ("program `tables_only` has no channel `ask`; it has none (a "
                            "program declares one with `p.channel(NAME, handler)`)")
    with session(load_program(ECHO), RunOptions(count=10)) as s:
        with pytest.raises(OfflowError, match=r"no channel `ask`; channels: echo$"):
            s.channel("ask")


class Split(Element):
    """A user's split that forgot the choice for odd lengths."""

    inputs = (Port("i"),)
    outputs = (Port("even"), Port("odd"))
    body = "if (!(pkt->len & 1)) EMIT(even);  /* odd: to do */"


def test_a_session_is_warned_of_as_offlow_run_is(capsys: pytest.CaptureFixture[str]) -> None:
    """The warnings `offlow run` prints before it starts (here: a body that may choose
    no output) a session prints too, and its result holds them (it held none)."""
    p = Program("split_tally")
    src, hits, split = Source("rx"), Count("hits", slot=0, counts=Shared("n", "uint64_t", 1)), \
        Split("split")
    even, odd = Sink("even_tx"), Sink("odd_tx")
    src >> hits >> split
    split["even"] >> even
    split["odd"] >> odd
    p.segment("rx", [src, hits, split, even, odd], device="nic", cores=[0])
    with session(p, RunOptions(count=10)) as s:
        s.wait_drained()
    [w] = [w for w in s.result.warnings if "element `split`" in w] if s.result else [""]
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                if "/* odd: to do */" in text)
    assert w.startswith(f"element `split`: its body may reach its end ({__file__}:{line}) "
                        "without choosing an output"), s.result
    assert f"offlow: warning: {w}\n" in capsys.readouterr().err
