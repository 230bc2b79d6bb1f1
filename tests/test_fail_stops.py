"""FAIL means "stop here": once an element FAILs, no further packet its core took runs
through any element (not the failing one, not those after it). The packets the core
held then are dropped and counted at the failing element under `failed`, so a gate
that gives up on frame N lets exactly N-1 frames through and the run's accounting
still balances. Checked against the output capture, read by dpkt."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import dpkt
import pytest

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.build import build
from offlow.report import summarize
from offlow.runner import RunOptions, run
from tests.e2e import read_frames

FRAMES = 1000
GIVE_UP_AT = 613  # not at a batch's edge: the core holds frames after it


class FareGate(Element):
    """A user's gate: lets frames through until its budget runs out, then gives up."""

    inputs = (Port("riders", "any"),)
    outputs = (Port("through", "any"),)
    params = {"budget": "uint32_t"}
    body = """
        static uint32_t rode; // riders this gate has seen
        if (++rode == budget) {
            /* out of fares: nobody else goes through */
            FAIL("fare budget of %u spent", budget);
        }
        SEND(through);
    """


class FareGateBatch(Element):
    """The same gate as a batch body: FAIL_AT on the rider that spends the budget, then
    leaves the rest of its batch as it is (undecided: they would go on)."""

    inputs = (Port("riders", "any"),)
    outputs = (Port("through", "any"),)
    params = {"budget": "uint32_t"}
    body = ""
    batch_body = """
        static uint32_t rode; /* riders this gate has seen */
        for (uint32_t k = 0; k < n; k++) {
            if (++rode == budget) {
                FAIL_AT(k, "fare budget of %u spent", budget);
                return;  // the others of the batch: the compiler holds them
            }
            EMIT_AT(k, through);
        }
    """


class Ticket(Element):
    """Stamps each rider (an element before the gate, as a user's program has)."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    fields = {"ticket": "uint32_t"}
    body = "state->ticket = pkt->len; /* the rider's fare */ EMIT(out);"


def capture(path: Path) -> list[bytes]:
    """FRAMES UDP frames, each numbered in its payload, written with dpkt."""
    frames = []
    for k in range(FRAMES):
        udp = dpkt.udp.UDP(sport=4000, dport=5000, data=k.to_bytes(4, "big") * 8)
        udp.ulen = len(udp)
        ip = dpkt.ip.IP(src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02", p=17, data=udp)
        ip.len = len(ip)
        eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, data=ip)
        frames.append(bytes(eth))
    with open(path, "wb") as fh:
        w = dpkt.pcap.Writer(fh)
        for k, f in enumerate(frames):
            w.writepkt(f, ts=k * 1e-6)
    return frames


def run_gate(tmp_path: Path, device: str, batch: bool,
             ring: bool = False) -> tuple[Any, dict[str, Any], Any]:
    """wire -> ticket -> gate -> exit, all in one segment on `device` (or, `ring`, wire
    and ticket in a segment of their own on host core 0, their packets coming to the
    gate's segment through a ring); the run's result, its summary and its plan."""
    p = Program(f"fare_{device}_{'batch' if batch else 'one'}{'_ring' if ring else ''}")
    wire, ticket, out = Source("wire"), Ticket("ticket"), Sink("exit")
    gate = (FareGateBatch if batch else FareGate)("fare_gate", budget=GIVE_UP_AT)
    wire >> ticket >> gate >> out
    if ring:
        p.segment("gates", [wire, ticket], device="host", cores=[0])
        p.segment("station", [gate, out], device=device, cores=[1 if device == "host" else 0])
    else:
        p.segment("station", [wire, ticket, gate, out], device=device, cores=[0])
    b = build(p)
    res = run(b, RunOptions(input=tmp_path / "in.pcap", output=tmp_path / "out.pcap",
                            timeout=120))
    return res, summarize(b.plan, res.stats), b.plan


def _n_minus_1_through(tmp_path: Path, device: str, res: Any, s: dict[str, Any],
                       frames: list[bytes]) -> tuple[dict[str, Any], dict[str, int]]:
    """The run's one error is the gate's FAIL, the output capture holds exactly the
    frames before the failing one, nothing is unaccounted: the accounting and the
    gate's drops by reason."""
    assert res.errors == [f"{device}: segment station core 0: element fare_gate: fare budget "
                          f"of {GIVE_UP_AT} spent: failed by the element"], res.errors
    assert read_frames(tmp_path / "out.pcap") == frames[:GIVE_UP_AT - 1]
    a = s["accounting"]
    assert a["unaccounted"] == 0, a
    assert a["forwarded"] == GIVE_UP_AT - 1, a
    return a, {d["reason"]: d["packets"] for d in a["dropped"] if d["at"] == "fare_gate"}


@pytest.mark.parametrize("device", ["host", "nic"])
@pytest.mark.parametrize("batch", [False, True])
def test_a_gate_that_fails_on_frame_n_lets_exactly_n_minus_1_through(
        tmp_path: Path, device: str, batch: bool) -> None:
    """The gate FAILs (or FAIL_ATs) on frame 613: the output capture holds exactly the
    612 frames before it, in order; the failing frame and those its core had taken
    with it are dropped at the gate under `failed`; nothing is unaccounted."""
    frames = capture(tmp_path / "in.pcap")
    res, s, plan = run_gate(tmp_path, device, batch)
    # a batch body runs over the source's batches (the compiler's vector path)
    assert plan.segment("station").vector == (("fare_gate",) if batch else ())
    a, at_gate = _n_minus_1_through(tmp_path, device, res, s, frames)
    assert at_gate == {"failed": a["read"] - (GIVE_UP_AT - 1)}, (at_gate, a)
    # the core had taken frames after the failing one (they were held, not run)
    assert a["read"] > GIVE_UP_AT, a


@pytest.mark.parametrize("device", ["host", "nic"])
@pytest.mark.parametrize("batch", [False, True])
def test_a_gate_fed_by_a_ring_that_fails_on_frame_n_lets_exactly_n_minus_1_through(
        tmp_path: Path, device: str, batch: bool) -> None:
    """The gate's segment takes its frames from a ring (another core's): the same, the
    entries it had taken with the failing frame dropped at the gate, those still in the
    ring counted lost in it (broken by the failed core)."""
    frames = capture(tmp_path / "in.pcap")
    res, s, _ = run_gate(tmp_path, device, batch, ring=True)
    a, at_gate = _n_minus_1_through(tmp_path, device, res, s, frames)
    assert set(at_gate) == {"failed"} and at_gate["failed"] >= 1, (at_gate, a)
    others = {d["reason"] for d in a["dropped"] if d["at"] != "fare_gate"}
    assert others <= {"ring_broken"}, a["dropped"]


def test_a_gate_fed_by_a_source_that_finished_first_accounts_for_every_frame() -> None:
    """The capture (1000 frames, read once) fits the ring: its source segment reads it,
    fills the ring and finishes, closing it, most often before the gate on the other
    core gives up on frame 613. What the ring still held then is counted lost in it
    (by the failed consumer: its producer is gone); ten runs, none unaccounted."""
    for k in range(10):
        with TemporaryDirectory(prefix="ofl-gate-") as d:
            tmp = Path(d)
            frames = capture(tmp / "in.pcap")
            res, s, _ = run_gate(tmp, "host", False, ring=True)
            assert res.errors == ["host: segment station core 0: element fare_gate: fare "
                                  f"budget of {GIVE_UP_AT} spent: failed by the element"], \
                (k, res.errors)
            assert read_frames(tmp / "out.pcap") == frames[:GIVE_UP_AT - 1], k
            a = s["accounting"]
            assert a["unaccounted"] == 0, (k, a)
            assert {d["reason"] for d in a["dropped"]} <= {"failed", "ring_broken"}, (k, a)


class MarkedGate(Element):
    """The gate, marking in a table of the program that it gave up."""

    inputs = (Port("riders", "any"),)
    outputs = (Port("through", "any"),)
    params = {"budget": "uint32_t"}
    tables = ("board",)
    body = """
        static uint32_t rode;
        if (++rode == budget) {
            board[0] = 1; // the gate is closed from now on
            FAIL("fare budget of %u spent", budget);
        }
        SEND(through);
    """


class Platform(Element):
    """After the gate, in another segment: counts the riders it saw once the gate had
    closed (board[1])."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    tables = ("board",)
    body = "if (board[0]) board[1]++; /* came after the gate closed */ SEND(out);"


def test_a_segment_sharing_the_failed_cores_thread_runs_no_further_packet(
        tmp_path: Path) -> None:
    """The gate's segment and the one after it share host core 0 (one thread, a turn
    each): once the gate FAILs, the other segment runs no packet either (it stops as
    for another core's failure), so its element never sees a rider after the gate
    closed; what the ring between them held is counted lost in it."""
    capture(tmp_path / "in.pcap")
    p = Program("fare_shared_core")
    board = Shared("board", "uint64_t", 2)
    wire, out = Source("wire"), Sink("exit")
    gate, platform = MarkedGate("fare_gate", budget=GIVE_UP_AT, board=board), \
        Platform("platform", board=board)
    wire >> gate >> platform >> out
    p.segment("station", [wire, gate], device="host", cores=[0])
    p.segment("tracks", [platform, out], device="host", cores=[0])
    b = build(p)
    assert [t.loops for t in b.plan.device("host").threads] == [
        (("station", 0), ("tracks", 0))]
    res = run(b, RunOptions(input=tmp_path / "in.pcap", output=tmp_path / "out.pcap",
                            timeout=120))
    assert res.errors == ["host: segment station core 0: element fare_gate: fare budget "
                          f"of {GIVE_UP_AT} spent: failed by the element"], res.errors
    s = summarize(b.plan, res.stats)
    assert s["tables"]["board"] == [1, 0], s["tables"]
    assert s["accounting"]["unaccounted"] == 0, s["accounting"]
    assert len(read_frames(tmp_path / "out.pcap")) <= GIVE_UP_AT - 1



class Platforms(Element):
    """A user's splitter: frame k (its number, in the payload) goes to platform k % 3."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("p0", "any"), Port("p1", "any"), Port("p2", "any"))
    fields = {"rider": "uint32_t"}
    body = """
        const uint8_t *d = pkt->data + 42; /* the UDP payload: the frame's number */
        state->rider = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
        if (state->rider % 3 == 0) EMIT(p0);
        if (state->rider % 3 == 1) EMIT(p1);
        EMIT(p2);
    """


class NumberedGate(Element):
    """A vector gate that gives up on rider `last` (the frame numbered so: the 1-based
    frame `last + 1`), counting the riders it let through (board[0])."""

    inputs = (Port("riders", "any"),)
    outputs = (Port("through", "any"),)
    params = {"last": "uint32_t"}
    tables = ("board",)
    body = ""
    batch_body = """
        for (uint32_t k = 0; k < n; k++) {
            if (states[k].rider == last) {
                FAIL_AT(k, "fare budget of %u spent", last + 1);
                return;
            }
            board[0]++;
            EMIT_AT(k, through);
        }
    """


class Tally(Element):
    """A user's vector element on another platform: counts the riders that reached it
    (board[1]) in one batch body."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    tables = ("board",)
    body = ""
    batch_body = """
        board[1] += n; /* every rider of the batch reached this platform */
        for (uint32_t k = 0; k < n; k++) EMIT_AT(k, out);
    """


@pytest.mark.parametrize("device", ["host", "nic"])
@pytest.mark.parametrize("where", [0, 1])
def test_a_vector_gate_beside_other_vector_elements_lets_exactly_n_minus_1_through(
        tmp_path: Path, device: str, where: int) -> None:
    """Three vector elements in one segment, side by side (frame k goes to the k % 3rd;
    batch 7: frame 613 in the middle of a batch), the gate the first or the middle one
    the flush runs: the 612 frames before the failing one finish their way (the other
    platforms' too: the tallies count each), reach the output in order, and the run's
    accounting balances (the failing frame and those the core held with it dropped at
    the gate under `failed`)."""
    frames = capture(tmp_path / "in.pcap")
    p = Program(f"fare_vec_{device}_{where}", batch=7)
    board = Shared("board", "uint64_t", 2)
    wire, split, out = Source("wire"), Platforms("platforms"), Sink("exit")
    gate = NumberedGate("fare_gate", last=GIVE_UP_AT - 1, board=board)
    # the gate takes the frames k % 3 == 0 (frame 613 is number 612), on platform p0
    line = [Tally("north", board=board), Tally("south", board=board)]
    line.insert(where, gate)
    ports = ["p1", "p2"]
    ports.insert(where, "p0")
    wire >> split
    for port, el in zip(ports, line, strict=True):
        split[port] >> el >> out
    p.segment("station", [wire, split, *line, out], device=device, cores=[0])
    b = build(p)
    assert b.plan.segment("station").vector[where] == "fare_gate", b.plan.segment("station")
    res = run(b, RunOptions(input=tmp_path / "in.pcap", output=tmp_path / "out.pcap",
                            timeout=120))
    s = summarize(b.plan, res.stats)
    a, at_gate = _n_minus_1_through(tmp_path, device, res, s, frames)
    before = GIVE_UP_AT - 1
    assert s["tables"]["board"] == [len(range(0, before, 3)), before - len(range(0, before, 3))], \
        s["tables"]
    assert at_gate == {"failed": a["read"] - before}, (at_gate, a)
    assert {d["at"] for d in a["dropped"]} == {"fare_gate"}, a["dropped"]


class Turnstile(Element):
    """The gate as a user writes it with EMIT (no copies: the segment can run its vector
    element's batch body)."""

    inputs = (Port("riders", "any"),)
    outputs = (Port("through", "any"),)
    params = {"budget": "uint32_t"}
    body = """
        static uint32_t rode;
        if (++rode == budget) FAIL("fare budget of %u spent", budget);
        EMIT(through);
    """


@pytest.mark.parametrize("device", ["host", "nic"])
def test_a_gate_before_a_vector_element_lets_the_riders_waiting_at_it_through(
        tmp_path: Path, device: str) -> None:
    """The gate FAILs per packet (on frame 613) before a vector element (batch 7): the
    frames before it that wait at the vector element for the batch's end came before
    the failing one, so they finish their way (the tally counts each) and reach the
    output; the frames the core took after the failing one are dropped unrun."""
    frames = capture(tmp_path / "in.pcap")
    p = Program(f"fare_before_vec_{device}", batch=7)
    board = Shared("board", "uint64_t", 2)
    wire, out = Source("wire"), Sink("exit")
    gate, tally = Turnstile("fare_gate", budget=GIVE_UP_AT), Tally("tally", board=board)
    wire >> gate >> tally >> out
    p.segment("station", [wire, gate, tally, out], device=device, cores=[0])
    b = build(p)
    assert b.plan.segment("station").vector == ("tally",), b.plan.segment("station").per_packet
    res = run(b, RunOptions(input=tmp_path / "in.pcap", output=tmp_path / "out.pcap",
                            timeout=120))
    s = summarize(b.plan, res.stats)
    a, at_gate = _n_minus_1_through(tmp_path, device, res, s, frames)
    assert s["tables"]["board"] == [0, GIVE_UP_AT - 1], s["tables"]
    assert at_gate == {"failed": a["read"] - (GIVE_UP_AT - 1)}, (at_gate, a)
