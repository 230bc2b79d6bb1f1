"""A program with vector elements written the way users write them: comments and a
#define in the bodies, a helper, its own element names, an odd batch size.

The NIC parses each frame; IPv4 packets take one of two paths by their protocol, each
through an element that tags the packet (a hash of its addresses, written into the
IPv4 identification field) and drops the "unlucky" ones: `tcp_tag` has a per-packet
body and a batch body, `udp_tag` only a batch body. Both tag the packet in place and
count tags per bucket in a shared table; the host writes what comes through."""

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

SLOTS = 5  # an odd table size on purpose

MIX = r"""
/* Murmur3's 32-bit finalizer over both addresses. */
static inline uint32_t tag_mix(uint32_t a, uint32_t b)
{
    uint32_t x = a * 31u ^ b;
    x ^= x >> 16;
    x *= 0x85ebca6bu;   // spread the bits
    x ^= x >> 13;
    return x ^ (x >> 16);
}
"""


class ByProto(Element):
    """TCP to `tcp`, UDP to `udp`, the rest to `rest`."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("tcp", "ip.v4"), Port("udp", "ip.v4"), Port("rest", "ip.v4"))
    body = r"""
    if (state->ip_proto == 6) EMIT(tcp);
    if (state->ip_proto == 17) EMIT(udp);
    EMIT(rest);
    """


class Tagger(Element):
    """What the two taggers share: ports, the tag, the drop reason, the table, the mix."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"tag": "uint16_t"}
    drops = {"unlucky": "the packet's tag ends in 3 (mod 8)"}
    tables = ("slots",)
    helpers = MIX


class TagTcp(Tagger):
    """Tags a TCP packet (identification := mix(src, dst)); drops tags that end in 3."""

    body = r"""
    uint16_t t = (uint16_t)tag_mix(state->src4, state->dst4);
    if ((t & 7u) == 3u)
        DROP_WHY(unlucky);
    uint8_t *ip = pkt->data + state->l3_off;
    ip[4] = (uint8_t)(t >> 8);  /* the identification field */
    ip[5] = (uint8_t)t;
    state->tag = t;
    slots[t % 5u] += 1;
    """
    batch_body = r"""
    #define UNLUCKY 3u
    uint16_t t[OFL_VEC];
    for (uint32_t i = 0; i < n; i++)   // tags first: the loop the compiler vectorises
        t[i] = (uint16_t)tag_mix(states[i].src4, states[i].dst4);
    for (uint32_t i = 0; i < n; i++) {
        if ((t[i] & 7u) == UNLUCKY) {
            DROP_WHY_AT(i, unlucky);
            continue;
        }
        uint8_t *ip = pkts[i].data + states[i].l3_off;
        ip[4] = (uint8_t)(t[i] >> 8);
        ip[5] = (uint8_t)t[i];
        states[i].tag = t[i];
        slots[t[i] % 5u] += 1;
    }
    """


class TagUdp(Tagger):
    """Tags a UDP packet as TagTcp does a TCP one, with a batch body only; packets of
    source port 53 (DNS) are consumed here."""

    batch_body = r"""
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *l4 = pkts[i].data + states[i].l4_off;
        uint16_t t = (uint16_t)tag_mix(states[i].src4, states[i].dst4);
        if (((uint16_t)(l4[0] << 8 | l4[1])) == 53) {
            CONSUME_AT(i);   /* answered elsewhere */
        } else if ((t & 7u) == 3u) {
            DROP_WHY_AT(i, unlucky);
        } else {
            pkts[i].data[states[i].l3_off + 4] = (uint8_t)(t >> 8);
            pkts[i].data[states[i].l3_off + 5] = (uint8_t)t;
            states[i].tag = t;
            slots[SLOTS_HALF + t % 5u] += 1;
            EMIT_AT(i, out);
        }
    }
    """
    params = {"SLOTS_HALF": "uint32_t"}


def program() -> Program:
    p = Program("vector_tags", batch=7)
    slots = Shared("slots", "uint64_t", 2 * SLOTS)
    src, eth, ip4, by = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), ByProto("by_proto")
    tcp, udp = TagTcp("tcp_tag", slots=slots), TagUdp("udp_tag", slots=slots, SLOTS_HALF=SLOTS)
    not_ip, rest, out = Discard("not_ip"), Discard("rest"), Sink("tx")
    src >> eth
    eth["ipv4"] >> ip4 >> by
    eth["ipv6"] >> not_ip
    eth["other"] >> not_ip
    by["tcp"] >> tcp >> out
    by["udp"] >> udp >> out
    by["rest"] >> rest
    p.segment("rx", [src, eth, ip4, by, tcp, udp, not_ip, rest], device="nic", cores=[0])
    p.segment("tx", [out], device="host", cores=[0])
    return p
