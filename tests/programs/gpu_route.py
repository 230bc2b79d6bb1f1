"""A program written by a user for the gpu target: its own element names, bodies with
comments, odd-sized state fields, a switch with two ways out of the offloaded segment,
its own lookups on LPM tables of its own names, and a packet byte rewrite in the
kernel. The NIC parses, `work` (placed on gpu, nic or host) classifies and looks up,
the host writes what `work` decided into the frame and sends it."""

from offlow import Element, Port, Program, Sink, Source
from offlow.elements import CheckIPv4, CheckIPv6, Discard, ParseEth, lpm4_table, lpm6_table


class Grade(Element):
    """Grades a packet by its destination's low byte: `bulk` (even) or `fast` (odd);
    keeps three bytes of the destination and a 64-bit stamp (odd sizes)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("fast", "ip.v4"), Port("bulk", "ip.v4"))
    fields = {"trail": "uint8_t[3]", "stamp": "uint64_t", "odd": "bool"}
    body = r"""
    /* three bytes of the destination, low first */
    for (int k = 0; k < 3; k++)
        state->trail[k] = (uint8_t)(state->dst4 >> (8 * k));
    state->stamp = (uint64_t)state->dst4 * 0x9E3779B97F4A7C15ull;  // a 64-bit product
    state->odd = (state->dst4 & 1u) != 0;
    if (state->odd) EMIT(fast);
    EMIT(bulk);
    """


class Route4(Element):
    """The user's IPv4 lookup on a table of their own name; no route: dropped here."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"port": "uint16_t"}
    drops = {"no_route": "no prefix of the table covers the destination"}
    tables = ("fib",)
    body = r"""
    uint16_t p = ofl_lpm4_lookup(fib, state->dst4); /* 0: none */
    if (p == 0)
        DROP_WHY(no_route);
    state->port = p;
    """


class Route6(Element):
    """The same for IPv6, and the hop limit decremented in the frame itself."""

    inputs = (Port("inp", "ip.v6"),)
    outputs = (Port("out", "ip.v6"),)
    fields = {"port": "uint16_t"}
    drops = {"no_route": "no prefix of the table covers the destination",
             "expired": "hop limit 1 or 0"}
    tables = ("fib",)
    body = r"""
    if (state->ttl <= 1) DROP_WHY(expired);
    // byte 7 of the IPv6 header is the hop limit — “décrémenté” (a user's UTF-8 comment)
    pkt->data[state->l3_off + 7] = (uint8_t)(state->ttl - 1);
    uint16_t p = ofl_lpm6_lookup(fib, state->dst6);
    if (!p) DROP_WHY(no_route);
    state->port = p;
    """


class Stampit(Element):
    """Writes what the offloaded segment decided into the Ethernet addresses: the port,
    the trail, the stamp's top bytes and the grade."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    params = {"grade": "uint8_t"}
    body = r"""
    uint8_t *d = pkt->data;
    d[0] = (uint8_t)(state->port >> 8); d[1] = (uint8_t)state->port;
    d[2] = state->trail[0]; d[3] = state->trail[1]; d[4] = state->trail[2];
    d[5] = grade;
    for (int k = 0; k < 6; k++) d[6 + k] = (uint8_t)(state->stamp >> (8 * (7 - k)));
    """


class PortMac(Element):
    """Writes the port into the Ethernet destination (IPv6: no grade, no trail)."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    body = r"""
    pkt->data[0] = (uint8_t)(state->port >> 8);
    pkt->data[1] = (uint8_t)state->port;  /* the low byte */
    """


def program() -> Program:
    p = Program("gpu_route")
    fib4, fib6 = lpm4_table("fib4"), lpm6_table("fib6")
    wire, frames, other = Source("wire"), ParseEth("frames"), Discard("other")
    v4, v6 = CheckIPv4("v4"), CheckIPv6("v6")
    grade = Grade("grade")
    r4fast, r4bulk = Route4("r4fast", fib=fib4), Route4("r4bulk", fib=fib4)
    r6 = Route6("r6", fib=fib6)
    out_fast, out_bulk, out6 = Stampit("out_fast", grade=1), Stampit("out_bulk", grade=2), \
        PortMac("out6")
    back = Sink("back")
    wire >> frames
    frames["ipv4"] >> v4 >> grade
    grade["fast"] >> r4fast >> out_fast >> back
    grade["bulk"] >> r4bulk >> out_bulk >> back
    frames["ipv6"] >> v6 >> r6 >> out6 >> back
    frames["other"] >> other
    p.segment("parse", [wire, frames, other, v4, v6], device="nic", cores=[0])
    p.segment("work", [grade, r4fast, r4bulk, r6], device="gpu", cores=[0])
    p.segment("send", [out_fast, out_bulk, out6, back], device="host", cores=[0])
    return p
