"""A user's ACL in the kernel's XDP datapath with the rest on the host, from
docs/targets.md only: `gate` (xdp by default; GATE=nic or host moves it) parses
(VLAN tags too), drops UDP to the denied ports 23 and 6667 and TCP with both SYN and FIN
set (reason each), counts the IPv4 packets it passes by `ip_proto & 3` and in all in an
array of 5 counters and the bytes it passes in a second, and sends the rest up; `stamp`, on the
host, writes the ACL's verdict code (a 3-byte field) into the IPv4 identification and
the frame's length class into the TTL, and sends it out."""

import os

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth


class Acl(Element):
    """Denies UDP to ports 23 and 6667 and TCP SYN+FIN; counts what it passes."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"verdict": "uint8_t[3]"}
    drops = {"denied_port": "UDP to port 23 or 6667",
             "syn_fin": "TCP with both SYN and FIN set"}
    tables = ("hits", "octets")
    body = r"""
    /* ports are at l4_off; a header cut short passes as port 0 } */
    uint32_t l4 = state->l4_off;
    uint16_t dport = 0;
    if (l4 + 4u <= pkt->len && l4 < 4096u)
        dport = (uint16_t)(pkt->data[l4 + 2] << 8 | pkt->data[l4 + 3]);
    if (state->ip_proto == 17 && (dport == 23 || dport == 6667))
        DROP_WHY(denied_port);   // "telnet" and irc
    if (state->ip_proto == 6 && l4 + 14u <= pkt->len && l4 < 4096u &&
        (pkt->data[l4 + 13] & 0x03u) == 0x03u)
        DROP_WHY(syn_fin);
    uint32_t slot = state->ip_proto & 3u;
    hits[slot] += 1;              /* slots 0..3 by the protocol's low bits, */
    hits[4] += 1;                 /* slot 4 all of them ("}" counted once) */
    octets[0] += pkt->len;
    state->verdict[0] = 'o'; state->verdict[1] = 'k'; state->verdict[2] = (uint8_t)slot;
    """


class Stamp(Element):
    """IPv4 identification := verdict[0..1], TTL := the length class (len / 1000)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = r"""
    uint8_t *ip = pkt->data + state->l3_off;
    ip[4] = state->verdict[0]; ip[5] = state->verdict[2];
    ip[8] = (uint8_t)(pkt->len / 1000u);   /* no checksum fix: the test reads the bytes */
    """


def program() -> Program:
    p = Program("xdp_acl_split")
    wire, eth, v4, junk = Source("wire"), ParseEth("eth"), CheckIPv4("v4"), Discard("junk")
    acl = Acl("acl", hits=Shared("hits", "uint64_t", 5), octets=Shared("octets", "uint64_t", 1))
    stamp, out = Stamp("stamp"), Sink("out")
    wire >> eth
    eth["ipv4"] >> v4 >> acl >> stamp >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("gate", [wire, eth, v4, junk, acl], device=os.environ.get("GATE", "xdp"),
              cores=[0])
    p.segment("rest", [stamp, out], device="host", cores=[0])
    return p
