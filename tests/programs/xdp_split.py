"""A program whose path starts in XDP and goes on in the host process (the AF_XDP
crossing): a user's own element names, comments in the bodies, and fields set in XDP
that cross in the XDP metadata (an odd-sized one among them) and are read on the host,
which writes them into the frame's source address, where a test can read them."""

from offlow import Element, Port, Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth


class Tagger(Element):
    """In XDP: notes the TTL and the IPv4 id (3 bytes) and a cookie of the length."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"tag3": "uint8_t[3]", "cookie": "uint64_t"}
    body = r"""
    /* the TTL, then the id (bytes 8, 4 and 5 of the IPv4 header) */
    uint32_t at = state->l3_off;
    state->tag3[0] = pkt->data[at + 8u];
    state->tag3[1] = pkt->data[at + 4u];   // id, high byte
    state->tag3[2] = pkt->data[at + 5u];
    state->cookie = (uint64_t)pkt->len * 2654435761u;   /* Knuth's multiplier */
    """


class Stamp(Element):
    """On the host: writes what crossed into the source MAC address."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = r"""
    /* bytes 6-8: the tag; 9-11: the cookie's low 3 bytes, most significant first */
    for (unsigned k = 0; k < 3; k++) pkt->data[6 + k] = state->tag3[k];
    pkt->data[9] = (uint8_t)(state->cookie >> 16);
    pkt->data[10] = (uint8_t)(state->cookie >> 8);
    pkt->data[11] = (uint8_t)state->cookie;
    """


def program() -> Program:
    p = Program("xdp_split")
    wire, frames, v4 = Source("wire"), ParseEth("frames"), CheckIPv4("v4")
    tag, stamp, out, rest = Tagger("tag"), Stamp("stamp"), Sink("out"), Discard("rest")
    wire >> frames
    frames["ipv4"] >> v4 >> tag >> stamp >> out
    frames["ipv6"] >> rest
    frames["other"] >> rest
    p.segment("edge", [wire, frames, v4, tag, rest], device="nic", cores=[0])
    p.segment("slow", [stamp, out], device="host", cores=[0])
    return p
