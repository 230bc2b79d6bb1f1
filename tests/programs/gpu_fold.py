"""A user's per-packet checksum and classifier for the gpu target, from docs/targets.md
only: the NIC parses, `crunch` (gpu by default; CRUNCH=host or nic moves it) folds
every byte from the IPv4 header on into a 16-bit ones' complement sum and classifies
the packet by its source address in an LPM table of the user's own (`zones`, 7 ports),
the host writes both into the Ethernet source address. `Fold` has a per-packet body and
a batch body (the kernel runs the per-packet one); comments in both hold a `}` and a
`"`, as do character literals."""

import os

from offlow import Element, Port, Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, lpm4_table


class Fold(Element):
    """The ones' complement sum of the IP packet's bytes, and its source's zone."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"fold": "uint16_t", "zone": "uint16_t", "braces": "uint8_t"}
    drops = {"unzoned": "no prefix of `zones` covers the source"}
    tables = ("zones",)
    body = r"""
    /* big-endian 16-bit words; an odd last byte is the high half } of a word */
    uint32_t s = 0;
    uint8_t br = 0;
    for (uint32_t i = state->l3_off; i < pkt->len; i++) {
        uint8_t c = pkt->data[i];
        s += ((i - state->l3_off) & 1u) ? c : (uint32_t)c << 8;
        if (c == '}' || c == '"') br++;   // count "}" and '"' bytes: a user's quirk
    }
    while (s >> 16) s = (s & 0xffffu) + (s >> 16);
    state->fold = (uint16_t)s;
    state->braces = br;
    uint16_t z = ofl_lpm4_lookup(zones, state->src4);  /* 0: no zone */
    if (!z) DROP_WHY(unzoned);
    state->zone = z;
    """
    batch_body = r"""
    /* the same over n packets: "}" */
    for (uint32_t k = 0; k < n; k++) {
        uint32_t s = 0;
        uint8_t br = 0;
        for (uint32_t i = states[k].l3_off; i < pkts[k].len; i++) {
            uint8_t c = pkts[k].data[i];
            s += ((i - states[k].l3_off) & 1u) ? c : (uint32_t)c << 8;
            if (c == '}' || c == '"') br++;
        }
        while (s >> 16) s = (s & 0xffffu) + (s >> 16);
        states[k].fold = (uint16_t)s;
        states[k].braces = br;
        uint16_t z = ofl_lpm4_lookup(zones, states[k].src4);
        if (!z) { DROP_WHY_AT(k, unzoned); continue; }
        states[k].zone = z;
    }
    """


class Mark(Element):
    """Ethernet source := fold (2 bytes), zone (2 bytes), braces, 0x5a."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = r"""
    uint8_t *m = pkt->data + 6;   // the source MAC
    m[0] = (uint8_t)(state->fold >> 8); m[1] = (uint8_t)state->fold;
    m[2] = (uint8_t)(state->zone >> 8); m[3] = (uint8_t)state->zone;
    m[4] = state->braces; m[5] = 0x5a;
    """


def program() -> Program:
    p = Program("gpu_fold")
    zones = lpm4_table("zones", nports=7)
    wire, eth, v4, junk = Source("wire"), ParseEth("eth"), CheckIPv4("v4"), Discard("junk")
    fold, mark, out = Fold("fold", zones=zones), Mark("mark"), Sink("out")
    wire >> eth
    eth["ipv4"] >> v4 >> fold >> mark >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("rx", [wire, eth, v4, junk], device="nic", cores=[0])
    p.segment("crunch", [fold], device=os.environ.get("CRUNCH", "gpu"), cores=[0])
    p.segment("tx", [mark, out], device="host", cores=[0])
    return p
