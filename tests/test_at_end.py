"""Element.at_end: a user element's code run when its stream ends, which may MAKE
packets; they reach what follows (through a queue to another device too) before the
queues close, and an element after it counts them before its own end code runs. End
code that would touch a packet it does not have is refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow import Element, Program, Sink, Source
from offlow.build import build
from offlow.dsl import Port, Shared
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.errors import OfflowError
from tests.test_crypto_elements import payloads, run_program, udp_frame


class Tally(Element):
    """Counts the datagrams it passes on and keeps the last one (at most 256 bytes); at
    the end of the stream sends a copy of it whose payload is its name's tag and the
    count (a user's element: its own names, comments in its C)."""

    inputs = (Port("seen", "ip"),)
    outputs = (Port("onward", "ip"),)
    params = {"tag": "uint32_t"}
    tables = ("keep",)  # [0] count, [1] length, [2..] the last frame's bytes
    body = r"""
    if (pkt->len <= 256) {  /* keep the last one: the end's packet is a copy of it */
        memcpy(&keep[2], pkt->data, pkt->len);
        keep[1] = pkt->len;
    }
    keep[0]++;
    """
    at_end = r"""
    // nothing seen: nothing to say
    if (!keep[1]) return;
    uint8_t buf[256 + 8];
    memcpy(buf, &keep[2], keep[1]);
    struct ofl_pkt p = { .data = buf, .len = keep[1], .cap = sizeof buf };
    uint32_t at = state->l4_off + 8u;   /* the kept state is the first packet's */
    ofl_put_be32(buf + at, tag);
    ofl_put_be32(buf + at + 4, keep[0]);
    ofl_put_be16(buf + state->l4_off + 4, 16);
    ofl_put_be16(buf + state->l3_off + 2, (uint16_t)(at + 8 - state->l3_off));
    ofl_put_be16(buf + state->l3_off + 10, 0);
    ofl_put_be16(buf + state->l3_off + 10, ofl_csum(buf + state->l3_off, 20));
    p.len = at + 8;
    MAKE(onward, &p);
    """


def keep(name: str) -> Shared:
    return Shared(name, "uint32_t", 2 + 256 // 4)


def chain(nic: bool) -> Program:
    p = Program("tallies")
    src, eth, ip4, l4, junk = Source("in"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4"), \
        Discard("junk")
    first = Tally("first", tag=0xF1, keep=keep("first_keep"))
    second = Tally("second", tag=0xF2, keep=keep("second_keep"))
    out = Sink("out")
    src >> eth
    eth["ipv4"] >> ip4 >> l4 >> first >> second >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("work", [src, eth, ip4, l4, junk, first, second],
              device="nic" if nic else "host")
    p.segment("tx", [out], device="host", cores=[1])
    return p


def alone(el: Element) -> Program:
    """`el` after the parsers, then a sink, all in one host segment."""
    p = Program(f"alone_{el.name}")
    src, eth, ip4, l4, junk = Source("in"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4"), \
        Discard("junk")
    out = Sink("out")
    src >> eth
    eth["ipv4"] >> ip4 >> l4 >> el >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("all", [src, eth, ip4, l4, junk, el, out])
    return p


@pytest.mark.parametrize("nic", [False, True], ids=["host", "nic-then-host"])
def test_end_code_makes_packets_that_reach_the_next_element_and_the_sink(
        nic: bool, tmp_path: Path) -> None:
    frames = [udp_frame("10.0.0.1", 9, "10.0.0.2", 10, bytes([k]) * (k % 40)) for k in range(50)]
    s, out = run_program(chain(nic), frames, tmp_path)
    pays = payloads(out)
    assert pays[:50] == payloads(frames)
    # first's end packet went through second (counted there) before second's end ran
    assert pays[50:] == [(0xF1).to_bytes(4, "big") + (50).to_bytes(4, "big"),
                         (0xF2).to_bytes(4, "big") + (51).to_bytes(4, "big")]
    assert [s["elements"][e]["made"] for e in ("first", "second")] == [1, 1]
    assert s["elements"]["second"]["in"] == 51
    assert s["accounting"]["unaccounted"] == 0


def test_end_code_of_an_element_that_saw_no_packet_makes_nothing(tmp_path: Path) -> None:
    p = alone(Tally("t", tag=1, keep=keep("k")))
    s, out_frames = run_program(p, [bytes(60)], tmp_path)  # no IPv4: to junk
    assert out_frames == [] and s["accounting"]["made"] == 0


@pytest.mark.parametrize("code", ["EMIT(onward);", "state->l4_off = 0;", "SEND(onward);",
                                  "DROP();", "if (keep[0]) CONSUME();"])
def test_end_code_that_touches_a_packet_is_refused(code: str) -> None:
    class Bad(Tally):
        at_end = code

    with pytest.raises(OfflowError, match="element `b`: its at_end code has no packet"):
        build(alone(Bad("b", tag=1, keep=keep("k"))))


def test_end_code_that_fails_its_core_is_refused() -> None:
    """FAIL needs a packet to drop (and its C form one to decide): at_end has none."""
    class Quits(Tally):
        at_end = 'if (keep[0] > 3) FAIL("%u kept", (unsigned)keep[0]); /* too many */'

    with pytest.raises(OfflowError, match=r"element `q`: FAIL\(\) is for a body given a "
                                          r"packet; its at_end code has none"):
        build(alone(Quits("q", tag=1, keep=keep("k"))))
