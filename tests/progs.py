"""Small elements and programs shared by the compiler tests."""

from __future__ import annotations

from offlow import Element, Port, Program, Sink, Source


class SetA(Element):
    fields = {"a": "uint32_t", "b": "uint16_t", "c": "uint8_t"}
    body = "state->a = pkt->len; state->b = 7; state->c = 1;"


class ReadA(Element):
    body = "if (state->a == 0) DROP();"


class ReadB(Element):
    body = "pkt->data[0] = (uint8_t)state->b;"


class Pass(Element):
    body = ""


class NoPkt(Element):
    """Reads only state; never touches the packet bytes."""

    inputs = (Port("inp", "any"),)
    outputs = ()
    body = "if (state->a) return;"


class Split(Element):
    outputs = (Port("yes"), Port("no"))
    body = "if (state->a > 100) EMIT(yes); EMIT(no);"


def two_segment(rx_device: str = "nic") -> Program:
    """src -> seta -> (queue) -> reada -> readb -> sink."""
    p = Program("two")
    src, a, ra, rb, out = Source("src"), SetA("seta"), ReadA("reada"), ReadB("readb"), Sink("out")
    src >> a >> ra >> rb >> out
    p.segment("rx", [src, a], device=rx_device)
    p.segment("app", [ra, rb, out], device="host")
    return p
