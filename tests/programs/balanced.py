"""A segment on two devices at once: `mix` rewrites each packet's payload (a keyed
running sum over its bytes, the user's own element, with comments in its body) on the
NIC and on the host, the balancer splitting the packets between the two; reading and
writing stay on the host. `--set mix.device=host` runs it on one side."""

from offlow import Element, Program, Sink, Source


class Mix(Element):
    params = {"rounds": "uint32_t"}
    body = r"""
    /* a keyed sum over the payload, written back over it: the work to share */
    uint32_t acc = 2166136261u;
    for (uint32_t r = 0; r < rounds; r++)
        for (uint32_t i = 14; i < pkt->len; i++) {
            acc = (acc ^ pkt->data[i]) * 16777619u;  // FNV-1a step
        }
    if (pkt->len >= 18)
        for (int b = 0; b < 4; b++)
            pkt->data[14 + b] = (uint8_t)(acc >> (8 * b));
    """


def program() -> Program:
    p = Program("balanced")
    src, mix, out = Source("rx"), Mix("mix", rounds=3), Sink("tx")
    src >> mix >> out
    p.segment("rx", [src], device="host", cores=[0])
    p.segment("mix", [mix], device=["nic", "host"], cores=[0])
    p.segment("tx", [out], device="host", cores=[0])
    return p
