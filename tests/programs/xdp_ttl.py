"""A program written for the xdp target: ttl_pipeline's NIC part with its path ending
on the same device (forwarded packets leave by a sink, others are discarded), so the
whole path can run in XDP. The user's own names, and a body of its own with comments
and an odd-sized state field."""

from offlow import Element, Port, Program, Sink, Source
from offlow.elements import CheckIPv4, CheckIPv6, DecHopLimit, DecTTL, Discard, ParseEth


class MarkDscp(Element):
    """Sets the DSCP of IPv4 packets to a class (a user's element: a comment and a
    parameter in its body, a 3-byte state field)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    params = {"dscp": "uint8_t"}
    fields = {"tag3": "uint8_t[3]"}
    drops = {"too_short": "no room for the TOS byte"}
    body = r"""
    /* the TOS byte is the second of the IPv4 header */
    uint32_t tos = state->l3_off + 1u;
    if (tos >= pkt->len)
        DROP_WHY(too_short);
    uint8_t old = pkt->data[tos];
    state->tag3[0] = old;   // kept, as a user might
    if ((old >> 2) == dscp) EMIT(out);   /* already marked: untouched */
    pkt->data[tos] = (uint8_t)((dscp << 2) | (old & 3));
    /* the header checksum follows the TOS byte's change (RFC 1624) */
    uint16_t hc = ofl_get_be16(pkt->data + state->l3_off + 10);
    uint16_t w0 = (uint16_t)(pkt->data[state->l3_off] << 8 | old);
    uint16_t w1 = (uint16_t)(pkt->data[state->l3_off] << 8 | pkt->data[tos]);
    ofl_put_be16(pkt->data + state->l3_off + 10, ofl_csum_update16(hc, w0, w1));
    """


def program(split: bool = False) -> Program:
    """`split`: the marking and the sink in a segment of their own on the host, so the
    path crosses from the first segment (on xdp: AF_XDP) to the host
    (tests/programs/xdp_ttl_split.py)."""
    p = Program("xdp_ttl")
    wire, frames = Source("wire"), ParseEth("frames")
    v4, hop4, mark = CheckIPv4("v4"), DecTTL("hop4"), MarkDscp("mark", dscp=10)
    v6, hop6 = CheckIPv6("v6"), DecHopLimit("hop6")
    back, rest = Sink("back"), Discard("rest")
    wire >> frames
    frames["ipv4"] >> v4 >> hop4 >> mark >> back
    frames["ipv6"] >> v6 >> hop6 >> back
    frames["other"] >> rest
    if split:
        p.segment("edge", [wire, frames, v4, hop4, v6, hop6, rest], device="nic", cores=[0])
        p.segment("app", [mark, back], device="host", cores=[0])
        return p
    p.segment("edge", [wire, frames, v4, hop4, mark, v6, hop6, back, rest], device="nic",
              cores=[0])
    return p
