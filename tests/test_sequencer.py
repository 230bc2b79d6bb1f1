"""The network sequencer (examples/sequencer.py, offlow.elements.sequencer): per group,
the sequence numbers in the order the datagrams are written are 1, 2, ..., n with no gap,
no duplicate and none out of order, and the stamped datagrams are exactly the group's
input datagrams; on one NIC core and on three (oversubscribed here, so the cores really
interleave). Bad input is dropped and counted per reason."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from offlow import Element, Program, Sink, Source
from offlow.dsl import Port
from offlow.dsl.loader import load_program
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.sequencer import Sequence, sequencer_table
from offlow.errors import OfflowError
from tests.e2e import ROOT
from tests.test_crypto_elements import dropped, payloads, run_program, udp_frame

EXAMPLE = ROOT / "examples" / "sequencer.py"
BASE, GROUPS = 7000, 8  # the example's


def stream(seed: int, n: int, base: int, groups: int) -> tuple[list[bytes], dict[int, Counter]]:
    """`n` datagrams to ports base-1 .. base+groups (two of them no group's), payloads of
    0..63 bytes, each unique (it starts with its index), some TCP; and the payloads each
    group must get."""
    rng = random.Random(seed)
    frames: list[bytes] = []
    want: dict[int, Counter] = {g: Counter() for g in range(groups)}
    for k in range(n):
        port = base - 1 + rng.randrange(groups + 2)
        pay = (k.to_bytes(4, "big") + rng.randbytes(rng.randrange(60)))[:rng.randrange(64)]
        proto = 6 if rng.random() < 0.05 else 17
        frames.append(udp_frame("10.0.0.1", 4000 + k % 7, "10.0.0.2", port, pay, proto))
        if proto == 17 and 0 <= port - base < groups:
            want[port - base][pay] += 1
    return frames, want


def check_stamps(out: list[bytes], want: dict[int, Counter], base: int) -> None:
    """Per group, in output order: sequence numbers 1..n, and the payloads the group's."""
    seen: dict[int, list[int]] = {g: [] for g in want}
    got: dict[int, Counter] = {g: Counter() for g in want}
    for fr, pay in zip(out, payloads(out), strict=True):
        g, s = int.from_bytes(pay[:4], "big"), int.from_bytes(pay[4:8], "big")
        assert fr[36:38] == (base + g).to_bytes(2, "big")  # the group is its port's
        seen[g].append(s)
        got[g][pay[8:]] += 1
    for g in want:
        assert seen[g] == list(range(1, len(seen[g]) + 1)), f"group {g}: not 1..n in order"
        assert got[g] == want[g], f"group {g}: not its input datagrams"


@pytest.fixture(scope="module")
def example_stream() -> tuple[list[bytes], dict[int, Counter]]:
    """The example's input, made once (60,000 frames through dpkt): both placements
    run the same one, and neither changes it."""
    return stream(3, 60_000, BASE, GROUPS)


@pytest.mark.parametrize("cores", ["0", "0,1,2"], ids=["one-core", "three-cores"])
def test_each_group_is_numbered_gap_free_in_output_order(
        cores: str, tmp_path: Path,
        example_stream: tuple[list[bytes], dict[int, Counter]]) -> None:
    frames, want = example_stream
    prog = load_program(EXAMPLE, [f"seq.cores={cores}"])
    s, out = run_program(prog, frames, tmp_path)
    check_stamps(out, want, BASE)
    assert sum(sum(c.values()) for c in want.values()) == len(out)
    tcp = sum(1 for fr in frames if fr[23] == 6)
    assert dropped(s) == {("stamp", "no_group"): len(frames) - tcp - len(out),
                          ("stamp", "not_udp"): tcp}


class Tally(Element):
    """A user's element after the sequencer: counts what passes (its own names)."""

    inputs = (Port("in_", "ip"),)
    outputs = (Port("onward", "ip"),)
    tables = ("passed",)
    body = r"""
    /* count, then let it go on: nothing here may reorder */
    __atomic_add_fetch(&passed[0], 1u, __ATOMIC_RELAXED); // one more
    """


def users_program(cores: list[int]) -> Program:
    p = Program("my_sequencer")
    counters, passed = sequencer_table("order_book", 3), sequencer_table("passed", 1)
    src, e, v4, ports = Source("wire_in"), ParseEth("e"), CheckIPv4("v4"), ParseL4("ports")
    st = Sequence("numberer", base=9100, groups=3, seqs=counters)
    t, out, junk = Tally("tally", passed=passed), Sink("wire_out"), Discard("junk")
    src >> e
    e["ipv4"] >> v4 >> ports >> st >> t >> out
    e["ipv6"] >> junk
    e["other"] >> junk
    p.segment("front", [src, e, v4, ports, junk, st, t, out], device="nic", cores=cores)
    return p


def test_a_users_program_with_an_element_after_it_keeps_the_invariants(tmp_path: Path) -> None:
    frames, want = stream(9, 30_000, 9100, 3)
    s, out = run_program(users_program([0, 1, 2]), frames, tmp_path)
    check_stamps(out, want, 9100)
    assert s["tables"]["passed"][0] == len(out) > 0


def test_too_long_and_non_udp_are_dropped_and_counted(tmp_path: Path) -> None:
    # mtu 600: a 592-byte frame has room for the stamp, 593 and 600 have not
    frames = [udp_frame("10.0.0.1", 1, "10.0.0.2", 7001, bytes(n)) for n in (550, 551, 558)]
    frames.append(udp_frame("10.0.0.1", 1, "10.0.0.2", 7001, b"tcp", proto=6))
    frames.append(udp_frame("10.0.0.1", 1, "10.0.0.2", 7001, b""))
    prog = load_program(EXAMPLE, ["mtu=600"])
    s, out = run_program(prog, frames, tmp_path)
    assert dropped(s) == {("stamp", "too_long"): 2, ("stamp", "not_udp"): 1}
    assert [p[4:8] for p in payloads(out)] == [(1).to_bytes(4, "big"), (2).to_bytes(4, "big")]
    assert [len(p) for p in payloads(out)] == [558, 8]


@pytest.mark.parametrize("base, groups, words", [(0, 0, 2), (65530, 7, 14), (1, 2, 3)])
def test_groups_that_do_not_fit_the_ports_or_the_table_are_refused(base: int, groups: int,
                                                                   words: int) -> None:
    from offlow.dsl import Shared
    with pytest.raises(OfflowError, match="element `s`: base="):
        Sequence("s", base=base, groups=groups, seqs=Shared("t", "uint32_t", words))
