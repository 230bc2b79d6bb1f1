"""A UDP echo server: the NIC parses each datagram's frame with the ordinary header
elements, the host swaps the Ethernet, IPv4 and UDP source and destination (so the
frame is the reply) and the sink sends it back.  Run it with `RunOptions(udp_port=...)`
or `offlow run ... --udp PORT`.

Two payload prefixes break the reply on purpose, so tests can see the sink refuse a
frame: `bad-eth` leaves with an IPv6 ethertype, `bad-len` with a UDP length past
the end of the IPv4 packet.  The mtu is small (256 bytes: payloads up to 214)."""

from offlow import Element, Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4


class SwapUDP(Element):
    """Swaps source and destination of Ethernet, IPv4 and UDP (checksums stay valid:
    the one's-complement sums do not depend on the order of the words)."""

    body = r"""
    uint8_t *p = pkt->data, t[6];
    const uint32_t l3 = state->l3_off, l4 = state->l4_off;
    if (state->ip_proto != 17 || pkt->len < l4 + 8)
        DROP();
    memcpy(t, p, 6); memcpy(p, p + 6, 6); memcpy(p + 6, t, 6);
    memcpy(t, p + l3 + 12, 4); memcpy(p + l3 + 12, p + l3 + 16, 4); memcpy(p + l3 + 16, t, 4);
    memcpy(t, p + l4, 2); memcpy(p + l4, p + l4 + 2, 2); memcpy(p + l4 + 2, t, 2);
    if (pkt->len >= l4 + 15 && !memcmp(p + l4 + 8, "bad-eth", 7)) {
        p[12] = 0x86;
        p[13] = 0xDD;
    }
    if (pkt->len >= l4 + 15 && !memcmp(p + l4 + 8, "bad-len", 7))
        ofl_put_be16(p + l4 + 4, (uint16_t)(pkt->len - l4 + 1));
    """


def program() -> Program:
    p = Program("udp_echo", mtu=256)
    src, eth, ip4, l4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4")
    swap, out = SwapUDP("swap"), Sink("tx")
    non_ip4, non_ip = Discard("non_ip4"), Discard("non_ip")
    src >> eth
    eth["ipv4"] >> ip4 >> l4 >> swap >> out
    eth["ipv6"] >> non_ip4
    eth["other"] >> non_ip
    p.segment("rx", [src, eth, ip4, l4, non_ip4, non_ip], device="nic")
    p.segment("app", [swap, out], device="host")
    return p
