"""Element library v0: header parsing, TTL, classification, counting.

Bodies call the bounds-checked parsers of runtime/include/offlow/pkt.h, so a
malformed packet is a counted drop at the element that rejects it, never an
out-of-bounds read."""

from __future__ import annotations

from collections.abc import Mapping

from offlow.dsl.element import Element, Port


class ParseEth(Element):
    """Ethernet (with up to two VLAN tags): sends IPv4, IPv6 and other frames apart."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("ipv4", "ip.v4"), Port("ipv6", "ip.v6"), Port("other", "eth"))
    fields = {"l3_off": "uint16_t", "ethertype": "uint16_t"}
    body = r"""
    uint16_t ethertype;
    uint32_t l3_off;
    if (ofl_parse_eth(pkt->data, pkt->len, &ethertype, &l3_off) < 0)
        DROP();
    state->ethertype = ethertype;
    state->l3_off = (uint16_t)l3_off;
    if (ethertype == 0x0800) EMIT(ipv4);
    if (ethertype == 0x86DD) EMIT(ipv6);
    EMIT(other);
    """


class CheckIPv4(Element):
    """Validates the IPv4 header (version, IHL, lengths, checksum) and records it."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"l4_off": "uint16_t", "ip_proto": "uint8_t", "ttl": "uint8_t",
              "src4": "uint32_t", "dst4": "uint32_t"}
    body = r"""
    struct ofl_ipv4_info ip;
    if (ofl_parse_ipv4(pkt->data, pkt->len, state->l3_off, &ip) < 0)
        DROP();
    if (!ofl_ipv4_csum_ok(pkt->data + state->l3_off, ip.hdr_len))
        DROP();
    state->l4_off = (uint16_t)(state->l3_off + ip.hdr_len);
    state->ip_proto = ip.proto;
    state->ttl = ip.ttl;
    state->src4 = ip.src;
    state->dst4 = ip.dst;
    """


class CheckIPv6(Element):
    """Validates the IPv6 header and payload length and finds the transport header."""

    inputs = (Port("inp", "ip.v6"),)
    outputs = (Port("out", "ip.v6"),)
    fields = {"l4_off": "uint16_t", "ip_proto": "uint8_t", "ttl": "uint8_t",
              "dst6": "uint8_t[16]"}
    body = r"""
    struct ofl_ipv6_info ip;
    if (ofl_parse_ipv6(pkt->data, pkt->len, state->l3_off, &ip) < 0)
        DROP();
    state->l4_off = ip.l4_off;
    state->ip_proto = ip.proto;
    state->ttl = ip.hop_limit;
    for (int k = 0; k < 16; k++)
        state->dst6[k] = ip.dst[k];
    """


class DecTTL(Element):
    """Decrements the IPv4 TTL with an incremental checksum update; drops at TTL <= 1."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = r"""
    if (state->ttl <= 1)
        DROP();
    ofl_ipv4_dec_ttl(pkt->data + state->l3_off);
    state->ttl = (uint8_t)(state->ttl - 1);
    """


class DecHopLimit(Element):
    """Decrements the IPv6 hop limit (no header checksum in IPv6); drops at <= 1."""

    inputs = (Port("inp", "ip.v6"),)
    outputs = (Port("out", "ip.v6"),)
    body = r"""
    if (state->ttl <= 1)
        DROP();
    pkt->data[state->l3_off + 7] = (uint8_t)(state->ttl - 1);
    state->ttl = (uint8_t)(state->ttl - 1);
    """


class ParseL4(Element):
    """UDP and TCP ports (0 for other protocols); truncated transport headers are dropped."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    fields = {"sport": "uint16_t", "dport": "uint16_t"}
    body = r"""
    uint16_t sport = 0, dport = 0;
    if (state->ip_proto == 17 || state->ip_proto == 6) {
        int rc = state->ip_proto == 17
            ? ofl_parse_udp(pkt->data, pkt->len, state->l4_off, &sport, &dport)
            : ofl_parse_tcp(pkt->data, pkt->len, state->l4_off, &sport, &dport);
        if (rc < 0)
            DROP();
    }
    state->sport = sport;
    state->dport = dport;
    """


class Classify(Element):
    """Classifies by protocol and port: each rule `name: (proto, port)` is an output
    taken when the packet's protocol matches and either port equals `port`; packets
    matching no rule leave on `other`."""

    inputs = (Port("inp", "ip"),)

    def __init__(self, rules: Mapping[str, tuple[int, int]], name: str | None = None) -> None:
        super().__init__(name)
        self.outputs = (*(Port(r, "ip") for r in rules), Port("other", "ip"))
        tests = [
            f"if (state->ip_proto == {proto} && (state->sport == {port} || "
            f"state->dport == {port})) EMIT({r});"
            for r, (proto, port) in rules.items()
        ]
        self.body = "\n".join([*tests, "EMIT(other);"])


class Count(Element):
    """Adds one to `counts[slot]` (atomically: the segment may run on several cores)."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    params = {"slot": "uint32_t"}
    tables = ("counts",)
    body = "__atomic_fetch_add(&counts[slot], 1, __ATOMIC_RELAXED);"


class Discard(Element):
    """Consumes packets that are not wanted (counted as input, not as drops)."""

    inputs = (Port("inp", "any"),)
    outputs = ()
    body = ""
