"""A run whose ring is corrupted from outside (a device that writes an entry wrong, a
damaged window): its consumer stops on the entry and marks the ring broken, its
producer stops instead of waiting for room, and the run ends at once with one error
that names the queue and the ring (whole, however long the user's names), the entries
never delivered counted, not a hang and not an error from every core. A core that
fails for another reason (a user's element) breaks its rings the same way, at either
end of the queue."""

from __future__ import annotations

import mmap
import os
import re
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
BROKEN_OFF = 28  # the header's `broken` word (ring.h's struct ofl_ring_shm)


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


def program(host_cores: tuple[int, ...] = (0,)) -> Program:
    """wire -> tally on the NIC, check -> log on the host's `host_cores` (the queue
    between them one ring per host core)."""
    p = Program("ring_fault")
    wire, tally, check, log = Source("wire"), Tally("tally"), Check("check"), Sink("log")
    wire >> tally >> check >> log
    p.segment("edge", [wire, tally], device="nic", cores=[0])
    p.segment("core", [check, log], device="host", cores=host_cores)
    return p


def rings(window: Path) -> list[int]:
    """The offsets of the rings in a run's window (each starts with the ring magic)."""
    with open(window, "rb") as f:
        data = f.read()
    return [off for off in range(4096, len(data) - 8, 64)
            if struct.unpack_from("<Q", data, off)[0] == RING_MAGIC]


def corrupt_a_ring(b: Any, which: int, nrings: int) -> Any:
    """Runs `b` (a NIC segment producing into the host's), and while packets flow stops
    the NIC, moves the producer index of ring `which` (of the `nrings` in the window) one
    entry on (an entry it never wrote: its seq is wrong) and lets the NIC go; returns
    the run's result, after checking that it ended long before its 60 s."""
    r = Run(b, RunOptions(duration=60, rate=2000, timeout=120))
    r.start()
    t0 = time.monotonic()
    try:
        time.sleep(1.0)  # packets flow
        found = rings(r.window)
        assert len(found) == nrings, found
        nic = r.procs["nic"]
        nic.send_signal(signal.SIGSTOP)
        try:
            time.sleep(0.1)
            fd = os.open(r.window, os.O_RDWR)
            try:
                with mmap.mmap(fd, 0) as m:
                    off = found[which] + TAIL_OFF
                    tail = struct.unpack_from("<I", m, off)[0]
                    struct.pack_into("<I", m, off, (tail + 1) & 0xFFFFFFFF)
                    # the NIC stays stopped until the consumer has met the entry (the
                    # NIC's next publish would write its own index over ours: on a
                    # loaded machine the consumer may not look within a fixed while)
                    end = time.monotonic() + 30
                    while (struct.unpack_from("<I", m, found[which] + BROKEN_OFF)[0] == 0
                           and time.monotonic() < end):
                        time.sleep(0.01)
            finally:
                os.close(fd)
        finally:
            nic.send_signal(signal.SIGCONT)
    except BaseException:
        r.stop()
        r.wait()
        raise
    res = r.wait()
    took = time.monotonic() - t0
    assert took < 50, f"the run went on for {took:.0f} s after its ring broke"
    return res


def test_a_ring_corrupted_while_it_runs_ends_the_run_with_one_error_naming_its_queue(
        tmp_path: Path) -> None:
    """The NIC (the producer) is stopped, the ring's producer index moved one entry on,
    the NIC let go. The host stops on it, the NIC stops, and the run ends long before
    its 60 s with the host's error only, naming the ring; every packet read is
    forwarded or counted (none unaccounted)."""
    b = build(program())
    res = corrupt_a_ring(b, 0, 1)  # edge->core: one ring
    assert not res.ok
    assert res.errors == ["host: segment core core 0: edge->core: corrupt ring (an entry's "
                          "sequence number or length is wrong): instance 0, from segment edge "
                          "core 0 on nic to segment core core 0 on host: Bad message"], res.errors
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
    (`stall_ms`: long enough for the ring before it to fill) and then fails its core
    (FAIL), as an element whose table or device went away would."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    params = {"fail_at": "uint64_t", "stall_ms": "uint64_t"}
    body = """
        if (ctx->core.pkts_in >= fail_at && !ctx->core.err) {
            /* wait as a stuck lookup would, then give up */
            uint64_t until = ofl_now_ns() + stall_ms * 1000000u;
            while (ofl_now_ns() < until) { }
            FAIL("the audit log is gone after %llu packets",
                 (unsigned long long)ctx->core.pkts_in);
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
    assert len(res.errors) == 1, res.errors
    assert re.fullmatch(r"host: segment core core 0: element audit: the audit log is gone "
                        r"after \d+ packets: failed by the element", res.errors[0]), res.errors
    a = s["accounting"]
    assert a["unaccounted"] == 0, a
    if stall_ms:  # the ring was full when the consumer failed: its entries are lost
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
            FAIL("its journal is full");
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
    assert res.errors == [f"{dev}: segment edge core 0: element stamp: its journal is full: "
                          "failed by the element"], res.errors
    a = summarize(b.plan, res.stats)["accounting"]
    assert a["unaccounted"] == 0, a


def test_a_corrupt_ring_of_a_queue_over_several_rings_is_named_by_its_instance() -> None:
    """edge->core over two instances (two rings, one per host core): the second ring is
    corrupted; the error names it (instance 1, host core 1), not the first."""
    b = build(program((0, 1)))
    res = corrupt_a_ring(b, 1, 2)
    assert res.errors == ["host: segment core core 1: edge->core: corrupt ring (an entry's "
                          "sequence number or length is wrong): instance 1, from segment edge "
                          "core 0 on nic to segment core core 1 on host: Bad message"], res.errors


def test_long_queue_and_element_names_are_never_cut_from_the_error() -> None:
    """A user's program whose segment names are 60+ characters (its queue's name twice
    that) and whose element names are as long: the corrupt ring's error says the whole
    queue name and ring (it was cut at 96 bytes)."""
    edge = "packets_arriving_from_the_upstream_provider_link_west_region_a"
    inner = "packets_checked_against_the_provider_contract_before_forwarding"
    assert len(edge) >= 60 and len(inner) >= 60
    p = Program("ring_fault_long_names")
    wire = Source("wire_from_the_upstream_provider_link_in_the_west_region_cage_a")
    tally = Tally("tally_frame_lengths_for_the_contract_check_on_the_host_side_x")
    check = Check("check_frame_lengths_against_what_the_nic_measured_on_the_wire")
    log = Sink("log_of_every_frame_that_passed_the_contract_check_on_the_host")
    wire >> tally >> check >> log
    p.segment(edge, [wire, tally], device="nic", cores=[0])
    p.segment(inner, [check, log], device="host", cores=[0])
    res = corrupt_a_ring(build(p), 0, 1)
    assert res.errors == [f"host: segment {inner} core 0: {edge}->{inner}: corrupt ring (an "
                          "entry's sequence number or length is wrong): instance 0, from "
                          f"segment {edge} core 0 on nic to segment {inner} core 0 on host: "
                          "Bad message"], res.errors


class Quota(Element):
    """A user's element, written as users write them: it lets 999 packets through and
    gives up on its 1000th (its own count, a static of its body)."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("passed", "any"),)
    body = """
        static unsigned long long seen; /* packets this element was given */
        if (++seen == 1000) {
            /* the contract allows 999: stop the run, saying so */
            FAIL("quota of %d frames used up (frame %llu, %u bytes)", 999, seen,
                 (unsigned)pkt->len);
        }
        SEND(passed);
    """


class QuotaBatch(Element):
    """Quota as a batch body only: the 1000th packet of its batches fails the core."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("passed", "any"),)
    body = ""
    batch_body = """
        static unsigned long long seen; // packets this element was given
        for (uint32_t k = 0; k < n; k++) {
            if (++seen == 1000) {
                FAIL_AT(k, "quota of %d frames used up (frame %llu)", 999, seen);
                return; /* the rest of the batch goes on as it is */
            }
            EMIT_AT(k, passed);
        }
    """


@pytest.mark.parametrize("device", ["host", "nic"])
@pytest.mark.parametrize("batch", [False, True])
def test_an_element_that_fails_its_core_ends_the_run_with_its_one_error(
        device: str, batch: bool) -> None:
    """A user's element (per-packet or batch body) on `device`'s segment fails its core
    on its 1000th packet with FAIL: the run ends with one error naming the element, its
    segment and its text; the 1000th and the packets its core held then are dropped at
    it, every other packet is forwarded or lost in the broken ring, nothing is
    unaccounted."""
    p = Program(f"quota_{device}_{'batch' if batch else 'one'}")
    wire, log = Source("frames_in"), Sink("frames_out")
    meter = (QuotaBatch if batch else Quota)("contract_meter")
    wire >> meter >> log
    p.segment("metering", [wire, meter], device=device, cores=[0])
    p.segment("delivery", [log], device="host", cores=[1 if device == "host" else 0])
    b = build(p)
    res = run(b, RunOptions(duration=60, count=100_000, timeout=120))
    assert not res.ok
    text = ("quota of 999 frames used up (frame 1000)" if batch else
            r"quota of 999 frames used up \(frame 1000, \d+ bytes\)")
    assert len(res.errors) == 1, res.errors
    assert re.fullmatch(rf"{device}: segment metering core 0: element contract_meter: "
                        rf"{re.escape(text) if batch else text}: failed by the element",
                        res.errors[0]), res.errors
    s = summarize(b.plan, res.stats)
    a = s["accounting"]
    assert a["unaccounted"] == 0, a
    # the 1000th and the packets its core had taken with it (held, never run: how many
    # depends on where the batch stood) are dropped at the element
    metering = next(x for x in s["segments"] if x["segment"] == "metering")
    held = metering["drops_by_element"]["contract_meter"]
    assert metering["drops_by_element"] == {"contract_meter": held} and held >= 1, metering
    # the drop's reason in the report's table is FAIL's own (not a plain DROP())
    at_meter = [d for d in a["dropped"] if d["at"] == "contract_meter"]
    assert [(d["reason"], d["packets"], d["what"]) for d in at_meter] == [
        ("failed", held, "FAIL() in its body: the run's error; with the packets its core "
                         "held then, dropped unrun")], at_meter
    # the rest were forwarded or lost in the broken ring
    why = {k: v for k, v in s["queues"][0]["dropped_why"].items() if v}
    assert set(why) <= {"ring_broken"}, why
    assert a["forwarded"] + s["queues"][0]["dropped_why"].get("ring_broken", 0) == \
        a["read"] - held, (a, s["queues"][0])
