"""A user's marking table operated while it runs (offlow ctl ... map): each IPv4 frame's
(source address, protocol, destination port) is looked up in `marks`; a known flow gets
the mark stored for it as its TOS byte, a new one is learned with mark 0 (the core's own
update). An odd 7-byte key with an address field, a 1-byte value, its own names,
comments in the body. DEVICE (host, nic or xdp) places it; MARKS sets the map's size."""

import os

from offlow import Element, Port, Program, SharedMap, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

PEER_KEY = (("peer", "ipv4"), ("proto", "uint8_t"), ("port", "uint16_t"))


class Stamp(Element):
    """Writes the flow's mark into the TOS byte; learns a new flow with mark 0."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("book",)
    body = r"""
    uint8_t *ip = pkt->data + state->l3_off;
    struct marks_key k;                    /* 7 bytes, packed */
    memcpy(k.peer, ip + 12, 4);            // the source address, as on the wire
    k.proto = ip[9];
    uint32_t l4 = state->l3_off + (ip[0] & 15u) * 4u;
    k.port = l4 + 4u <= pkt->len ? (uint16_t)(pkt->data[l4 + 2] << 8 | pkt->data[l4 + 3]) : 0;
    const uint8_t *mark = ofl_map_lookup(book, &k);
    if (mark) {
        ip[1] = *mark;                     /* the TOS byte (no checksum fix: a test) */
    } else {
        uint8_t zero = 0;
        (void)ofl_map_update(book, &k, &zero);   /* -ENOSPC when full: counted */
    }
    """


def program() -> Program:
    p = Program("dscp_marks")
    wire, eth, v4 = Source("wire"), ParseEth("eth"), CheckIPv4("v4")
    stamp = Stamp("stamp", book=SharedMap("marks", PEER_KEY, "uint8_t",
                                          int(os.environ.get("MARKS", "5"))))
    out, other = Sink("out"), Discard("other")
    wire >> eth
    eth["ipv4"] >> v4 >> stamp >> out
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("edge", [wire, eth, v4, stamp, out, other],
              device=os.environ.get("DEVICE", "host"), cores=[0])
    return p
