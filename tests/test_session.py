"""Host sessions: a program started with --serve, channels by name, direct
messages answered by a device handler, and the errors a host program can meet."""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from pathlib import Path

import pytest

from offlow import Handler, OfflowError, Program, Shared, Sink, Source
from offlow.build import build
from offlow.channels import ChannelError, ChannelTimeout
from offlow.dsl.loader import load_program
from offlow.report import summarize
from offlow.runner import RunOptions, progress_totals
from offlow.session import Session, attach, session

ECHO = Path(__file__).resolve().parent / "programs" / "echo.py"


def test_messages_are_answered_by_the_device_handler() -> None:
    with session(load_program(ECHO), RunOptions(count=100)) as s:
        ch = s.channel("echo")
        assert ch.request(b"hello") == b"olleh"
        assert ch.request(bytes(range(56))) == bytes(reversed(range(56)))
        assert ch.request(b"") == b""
        s.wait_drained()
        # Another host program finds the program by the session's window; the
        # session holds the channel's end.
        with attach(s.window) as a:
            with pytest.raises(ChannelError) as e:
                a.channel("echo")
            assert e.value.errno == errno.EBUSY
        assert ch.request(b"ok") == b"ko"
    assert s.result is not None and s.result.ok
    assert s.result.stats["nic"]["tables"]["seen"] == [4]


@pytest.mark.parametrize("untaken", [0, 1])
def test_answers_the_host_never_took_are_in_the_report(untaken: int) -> None:
    """The host takes the answer to its first message and, when asked, leaves the
    answer to its second untaken before the session stops: the device withdraws it at
    its stop and the report counts it (`channels`, the text report's line), so the
    messages the handler answered = the answers taken + the ones counted; a run whose
    answers were all taken has no such section."""
    import jsonschema

    from offlow.report import format_summary, summarize
    with session(load_program(ECHO), RunOptions(count=10)) as s:
        ch = s.channel("echo")
        assert ch.request(b"ab", timeout=60) == b"ba"
        ch.send(b"cd", timeout=60)   # taken by the device: its handler answers at once
        if not untaken:
            assert ch.recv(timeout=60) == b"dc"
    assert s.result is not None and s.result.ok
    summary = summarize(s.build.plan, s.result.stats)
    schema = json.loads((Path(__file__).resolve().parent.parent / "docs" /
                         "run-result.schema.json").read_text())
    jsonschema.validate({**summary, "ok": True, "errors": [], "warnings": [],
                         "interrupted": False}, schema)
    seen = s.result.stats["nic"]["tables"]["seen"][0]
    taken = 2 - untaken
    assert seen == 2 and seen == taken + summary.get("channels", {}).get(
        "nic", {}).get("withdrawn", 0)
    assert ("channels" in summary) == bool(untaken)
    assert ("channels nic: 1 answer(s) never taken by the host" in format_summary(summary)) \
        == bool(untaken)


def test_a_handler_answers_in_bulk() -> None:
    """BULK_REPLY: the handler fills a table and answers with it in bulk; the manager
    sends it after the handler returns, and the host takes it with bulk_recv. The
    channel goes on with direct messages and further bulk answers."""
    with session(load_program(ECHO), RunOptions(count=10)) as s:
        ch = s.channel("echo")
        for k in (5, 200):
            ch.send(b"bulk" + bytes([k]))
            got = ch.bulk_recv(300_000, timeout=20)
            assert bytes(got) == bytes((i * 7 + k) & 0xFF for i in range(300_000))
            assert ch.request(b"ab") == b"ba"
        ch.send(b"bulk" + bytes([1]))
        with pytest.raises(ChannelError) as e:   # the host expects another size
            ch.bulk_recv(bytearray(1000), timeout=20)
        assert e.value.errno == errno.EMSGSIZE
        assert ch.request(b"xy") == b"yx"
        s.wait_drained()
    assert s.result is not None and s.result.ok


def test_channel_errors_are_clear(tmp_path: Path) -> None:
    with session(load_program(ECHO), RunOptions(count=10)) as s:
        with pytest.raises(OfflowError, match="has no channel `nope`; channels: echo"):
            s.channel("nope")
        ch = s.channel("echo")
        with pytest.raises(ChannelError) as e:
            ch.send(bytes(57))
        assert e.value.errno == errno.EMSGSIZE
        # (bytes(5) would send five zero bytes; bytes("ab") fails about encodings)
        for wrong, what in ((5, "int"), ("ab", "str: encode it ('ab'.encode())"),
                            (None, "NoneType")):
            with pytest.raises(TypeError) as t:
                ch.request(wrong)  # type: ignore[arg-type]
            assert str(t.value) == ("send on `echo`: a message is bytes, a bytearray or a "
                                    f"memoryview, not {what}")
            with pytest.raises(TypeError, match="try_send on `echo`: a message is bytes"):
                ch.try_send(wrong)  # type: ignore[arg-type]
        ch.send(b"quiet please")  # taken, never answered
        with pytest.raises(ChannelTimeout):
            ch.recv(timeout=0.2)
        assert ch.request(b"ab") == b"ba"  # the channel still works


def test_a_failed_reply_closes_the_channel_and_the_host_is_told() -> None:
    """REPLY of 57 bytes fails (-EMSGSIZE): the handler ends with the error, the
    manager closes the channel, and the host's next calls on it fail with EPIPE at
    once (not a timeout); the program itself goes on."""
    with session(load_program(ECHO), RunOptions(count=10)) as s:
        ch = s.channel("echo")
        assert ch.request(b"ab") == b"ba"
        ch.send(b"toolong")
        with pytest.raises(ChannelError) as e:   # EPIPE at once, not a ChannelTimeout
            ch.recv(timeout=5)
        assert e.value.errno == errno.EPIPE
        # why, not a bare "Broken pipe" (the manager's ofl_chan_close_why)
        assert str(e.value) == ("recv on `echo`: the device's handler for `echo` failed: "
                                "Message too long (REPLY takes at most 56 bytes; BULK_REPLY "
                                "any); it closed the channel")
        with pytest.raises(ChannelError) as e:
            ch.send(b"x")
        assert e.value.errno == errno.EPIPE and "handler for `echo` failed" in str(e.value)
    assert s.result is not None and s.result.ok


def test_a_reply_of_a_constant_size_above_56_bytes_does_not_compile() -> None:
    """A REPLY whose size is known when compiling (sizeof a 64-byte array) is refused
    there, at the program's line, instead of closing the channel at its first message."""

    class Eight(Handler):
        tables = ("counts",)
        body = r"""
        REPLY(counts, 8 * sizeof counts[0]);   /* 64 bytes */
        """

    p = Program("eight")
    src, out = Source("rx"), Sink("tx")
    src >> out
    p.segment("rx", [src, out], device="nic")
    p.channel("top", Eight("top", counts=Shared("counts", "uint64_t", 8)), device="nic")
    with pytest.raises(OfflowError) as e:
        build(p)
    line = next(i for i, x in enumerate(Path(__file__).read_text().splitlines(), 1)
                if "REPLY(counts, 8 * sizeof counts[0]);" in x)
    assert "REPLY of more than 56 bytes (OFL_CHAN_MSG_MAX): answer with BULK_REPLY" \
        in str(e.value), e.value
    assert f"{Path(__file__)}:{line}:" in str(e.value), e.value


def test_a_dead_device_process_is_an_error_not_a_hang() -> None:
    b = build(load_program(ECHO))
    with pytest.raises(OfflowError):
        with session(b, RunOptions(count=10)) as s:
            ch = s.channel("echo")
            assert ch.request(b"x") == b"x"
            os.kill(s.run.procs["nic"].pid, signal.SIGKILL)
            with pytest.raises(ChannelError) as e:   # EPIPE, not a ChannelTimeout
                ch.recv(timeout=10)
            assert e.value.errno == errno.EPIPE
    assert s.result is not None and not s.result.ok


@pytest.mark.parametrize("call", ["try_send", "try_recv"])
def test_try_calls_toward_a_dead_device_raise_instead_of_answering_not_now(call: str) -> None:
    """`while not ch.try_send(m)` (or `while ch.try_recv() is None`) toward a device
    whose process was killed: EPIPE, not False / None for ever."""
    b = build(load_program(ECHO))
    with pytest.raises(OfflowError):  # the session ends with the device's death
        with session(b, RunOptions(count=10)) as s:
            ch = s.channel("echo")
            assert ch.request(b"x") == b"x"
            assert ch.try_recv() is None  # alive: nothing pending
            os.kill(s.run.procs["nic"].pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            with pytest.raises(ChannelError) as e:
                while time.monotonic() < deadline:
                    if call == "try_send":
                        ch.try_send(b"y")  # a manager takes it while the device lives
                    else:
                        assert ch.try_recv() is None
            assert e.value.errno == errno.EPIPE


def _read_once_counting(s: Session) -> int:
    """Packets the sources have read, from the session's counters, once they have read
    any (the processes take a moment to start; 60 s at most)."""
    deadline = time.monotonic() + 60
    while True:
        stats, running = s.stats()
        assert running, "the run ended before its input did"
        read = progress_totals(stats)["read"]
        if read > 0 or time.monotonic() > deadline:
            return read
        time.sleep(0.05)


def test_a_session_reads_its_counters_and_ends_its_run_early() -> None:
    """A synthetic input of COUNT packets at 20,000 a second would last 15 s: the
    session reads the counters while it runs (growing), then stops the run as Ctrl-C
    does; the result counts the packets read until then, fewer than the input's, each
    one forwarded or dropped (nothing unaccounted), and is marked interrupted as a
    Ctrl-C'd run's is. A second stop() does nothing more."""
    count = 300_000
    with session(load_program(ECHO), RunOptions(count=count, rate=20_000)) as s:
        try:
            first = _read_once_counting(s)
            stats, running = s.stats()
            second = progress_totals(stats)["read"]
        finally:
            s.stop()   # (also when the checks fail: the block would wait out the input)
        s.stop()
    assert first > 0 and second >= first and running
    assert s.result is not None and s.result.ok, s.result
    # ended early, as a Ctrl-C'd run is: its counts cover the run until then
    assert s.result.interrupted and s.result.stopped_by == "stop()", s.result
    sources = [src for c in s.result.stats["nic"]["cores"] for src in c.get("sources", {})]
    acct = summarize(s.build.plan, s.result.stats)["accounting"]
    assert len(sources) == 1 and second <= acct["read"] < count, acct
    assert acct["unaccounted"] == 0 and acct["read"] == acct["forwarded"], acct


def test_a_session_is_stopped_and_read_only_while_it_runs() -> None:
    """stop() and stats() before the `with` block, and after it, are one clear error
    each (after it the counts are in `result`)."""
    s = session(load_program(ECHO), RunOptions(count=10))
    for call in (s.stop, s.stats):
        with pytest.raises(OfflowError, match="not running"):
            call()
    with s:
        s.wait_drained()
    assert s.result is not None and s.result.ok
    assert not s.result.interrupted, s.result  # it ran to its input's end
    with pytest.raises(OfflowError, match="the session has ended: stop.. is for a running"):
        s.stop()
    with pytest.raises(OfflowError, match="the session has ended: its counts are in"):
        s.stats()


def test_a_program_without_channels_or_tables_has_no_session() -> None:
    p = Program("plain")
    src, out = Source("in"), Sink("out")
    src >> out
    p.segment("only", [src, out], device="host", cores=[0])
    with pytest.raises(OfflowError, match="has no channels and no tables"):
        session(p)


def test_leaving_a_session_over_a_udp_port_ends_the_run_as_ctrl_c_does() -> None:
    """A UDP port's source never ends by itself: leaving the block stops it, the run
    ends ok with its counts written (it waited out its timeout and failed, "run timed
    out")."""
    with session(load_program(ECHO), RunOptions(udp_port=0, timeout=60)) as s:
        assert s.channel("echo").request(b"abc") == b"cba"
    assert s.result is not None and s.result.ok, s.result.errors
    assert s.result.stats["nic"]["tables"]["seen"] == [1]
