"""A run whose ring is corrupted from outside (a device that writes an entry wrong, a
damaged window): its consumer stops on the entry and marks the ring broken, its
producer stops instead of waiting for room, and the run ends at once with one error
that names the queue, the entries never delivered counted, not a hang and not an error
from every core."""

from __future__ import annotations

import mmap
import os
import signal
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from offlow import Element, Port, Program, Sink, Source
from offlow.build import build
from offlow.report import summarize
from offlow.runner import Run, RunOptions, core_failures, run

RING_MAGIC = 0x31474E494C464F00  # "\0OFLING1": ring.h's OFL_RING_MAGIC
TAIL_OFF = 64  # the producer index: the line after the ring's header (ring.h)


class Tally(Element):
    """Stamps each packet with its length, as a user's element would."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    fields = {"wire_len": "uint32_t"}
    body = """
        /* the frame's length, for the host's side */
        state->wire_len = pkt->len;
        SEND(out);
    """


class Check(Element):
    """Forwards what crossed, looking at the field the NIC wrote."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    body = "if (state->wire_len != pkt->len) { DROP(); } SEND(out); /* intact */"


def program() -> Program:
    p = Program("ring_fault")
    wire, tally, check, log = Source("wire"), Tally("tally"), Check("check"), Sink("log")
    wire >> tally >> check >> log
    p.segment("edge", [wire, tally], device="nic", cores=[0])
    p.segment("core", [check, log], device="host", cores=[0])
    return p


def rings(window: Path) -> list[int]:
    """The offsets of the rings in a run's window (each starts with the ring magic)."""
    with open(window, "rb") as f:
        data = f.read()
    return [off for off in range(4096, len(data) - 8, 64)
            if struct.unpack_from("<Q", data, off)[0] == RING_MAGIC]


def test_a_ring_corrupted_while_it_runs_ends_the_run_with_one_error_naming_its_queue(
        tmp_path: Path) -> None:
    """The NIC (the producer) is stopped, the ring's producer index moved one entry on
    (an entry it never wrote: its seq is wrong), the NIC let go. The host stops on it,
    the NIC stops, and the run ends long before its 60 s with the host's error only;
    every packet read is forwarded or counted (none unaccounted)."""
    b = build(program())
    r = Run(b, RunOptions(duration=60, rate=2000, timeout=120))
    r.start()
    t0 = time.monotonic()
    try:
        time.sleep(1.0)  # packets flow
        found = rings(r.window)
        assert len(found) == 1, found  # edge->core: one ring
        nic = r.procs["nic"]
        nic.send_signal(signal.SIGSTOP)
        try:
            time.sleep(0.1)
            fd = os.open(r.window, os.O_RDWR)
            try:
                with mmap.mmap(fd, 0) as m:
                    tail = struct.unpack_from("<I", m, found[0] + TAIL_OFF)[0]
                    struct.pack_into("<I", m, found[0] + TAIL_OFF, (tail + 1) & 0xFFFFFFFF)
            finally:
                os.close(fd)
            time.sleep(0.1)
        finally:
            nic.send_signal(signal.SIGCONT)
    except BaseException:
        r.stop()
        r.wait()
        raise
    res = r.wait()
    took = time.monotonic() - t0
    assert took < 50, f"the run went on for {took:.0f} s after its ring broke"
    assert not res.ok
    assert len(res.errors) == 1, res.errors
    assert res.errors[0].startswith("host: segment core core 0: edge->core: corrupt ring"), \
        res.errors
    assert "sequence number" in res.errors[0]
    s = summarize(b.plan, res.stats)
    a = s["accounting"]
    assert a["unaccounted"] == 0, a
    # the host's Check forwards every packet that reached it: the others are counted
    q = s["queues"][0]
    assert q["dropped_why"].get("ring_broken", 0) == a["read"] - a["forwarded"], (q, a)


def test_the_runs_errors_are_the_failed_cores_causes_not_the_cascade() -> None:
    """core_failures: the cores that failed by themselves, not those stopped because of
    them (`secondary`); when only such cores failed, they are what there is to say."""
    cause = {"segment": "core", "core": 1, "where": "edge->core: corrupt ring",
             "error": "Bad message"}
    follow = {"segment": "edge", "core": 0, "where": "doorbell on edge->core",
              "error": "ring broken", "secondary": 1}
    quiet = {"segment": "core", "core": 0}
    assert core_failures({"nic": {"cores": [follow]}, "host": {"cores": [quiet, cause]}}) == [
        "host: segment core core 1: edge->core: corrupt ring: Bad message"]
    assert core_failures({"nic": {"cores": [follow]}}) == [
        "nic: segment edge core 0: doorbell on edge->core: ring broken"]
    assert core_failures({"host": {"cores": [quiet]}}) == []


class Audit(Element):
    """A user's element that gives up mid-run: at its `fail_at`-th packet it stalls
    (`stall_ms`: long enough for the ring before it to fill) and then fails its core,
    as an element whose table or device went away would."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    params = {"fail_at": "uint64_t", "stall_ms": "uint64_t"}
    body = """
        if (ctx->core.pkts_in >= fail_at && !ctx->core.err) {
            /* wait as a stuck lookup would, then give up */
            uint64_t until = ofl_now_ns() + stall_ms * 1000000u;
            while (ofl_now_ns() < until) { }
            ofl_core_fail(&ctx->core, -EIO, "audit: the audit log is gone");
        }
        SEND(out);
    """


def failing_program(cross: str, stall_ms: int) -> Program:
    """wire -> tally | audit -> log, the `|` a queue between processes (nic -> host,
    `cross` "process") or between two host cores ("core"); audit fails at its 3000th
    packet."""
    p = Program(f"audit_fails_{cross}")
    wire, tally, log = Source("wire"), Tally("tally"), Sink("log")
    audit = Audit("audit", fail_at=3000, stall_ms=stall_ms)
    wire >> tally >> audit >> log
    p.segment("edge", [wire, tally], device="nic" if cross == "process" else "host",
              cores=[0])
    p.segment("core", [audit, log], device="host", cores=[1 if cross == "core" else 0])
    return p


def run_failing(cross: str, stall_ms: int) -> tuple[Any, dict[str, Any]]:
    """Runs failing_program as fast as the source goes; the result and its summary."""
    b = build(failing_program(cross, stall_ms))
    r = Run(b, RunOptions(duration=60, count=1_000_000, timeout=120))
    r.start()
    t0 = time.monotonic()
    res = r.wait()
    took = time.monotonic() - t0
    assert took < 50, f"the run went on for {took:.0f} s after its consumer failed"
    return res, summarize(b.plan, res.stats)


@pytest.mark.parametrize("cross", ["process", "core"])
@pytest.mark.parametrize("stall_ms", [0, 300])
def test_a_consumer_that_fails_breaks_its_ring_and_the_run_says_its_error_once(
        cross: str, stall_ms: int) -> None:
    """The host's element fails mid-run (after a stall that fills its ring, or at
    once): the run ends with that one error; the producer, stopped by the broken ring,
    is a secondary failure and says nothing; every packet read is forwarded, dropped
    or counted lost in the broken ring (none unaccounted)."""
    res, s = run_failing(cross, stall_ms)
    assert not res.ok
    assert res.errors == ["host: segment core core 0: audit: the audit log is gone: "
                          "Input/output error"], res.errors
    a = s["accounting"]
    assert a["unaccounted"] == 0, a
    q = s["queues"][0]
    assert q["dropped_why"].get("ring_broken", 0) > 0, q
    edge = [c for dev in res.stats.values() for c in dev.get("cores", [])
            if c["segment"] == "edge"]
    assert edge and all(c.get("secondary") for c in edge if "error" in c), edge


class Stamp(Tally):
    """Tally that fails its core at its 3000th packet, after `stall_ms` (the producer's
    side of the queue failing)."""

    params = {"stall_ms": "uint64_t"}
    body = """
        if (ctx->core.pkts_in >= 3000 && !ctx->core.err) {
            uint64_t until = ofl_now_ns() + stall_ms * 1000000u;
            while (ofl_now_ns() < until) { }
            ofl_core_fail(&ctx->core, -ENOSPC, "stamp: its journal is full");
        }
        state->wire_len = pkt->len;
        SEND(out);
    """


@pytest.mark.parametrize("cross", ["process", "core"])
def test_a_producer_that_fails_breaks_its_ring_and_nothing_is_unaccounted(
        cross: str) -> None:
    """The NIC's (or first core's) element fails mid-run: the run ends with its one
    error; the consumer takes what was published or counts it lost, so every packet
    read is forwarded, dropped or counted (none unaccounted)."""
    p = Program(f"stamp_fails_{cross}")
    wire, stamp = Source("wire"), Stamp("stamp", stall_ms=0)
    check, log = Check("check"), Sink("log")
    wire >> stamp >> check >> log
    host = cross == "core"
    p.segment("edge", [wire, stamp], device="host" if host else "nic", cores=[0])
    p.segment("core", [check, log], device="host", cores=[1 if host else 0])
    b = build(p)
    res = run(b, RunOptions(duration=60, count=1_000_000, timeout=120))
    dev = "host" if host else "nic"
    assert res.errors == [f"{dev}: segment edge core 0: stamp: its journal is full: "
                          "No space left on device"], res.errors
    a = summarize(b.plan, res.stats)["accounting"]
    assert a["unaccounted"] == 0, a
