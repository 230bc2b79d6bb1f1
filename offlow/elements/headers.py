"""Element library v0: header parsing, TTL, classification, counting.

Bodies call the bounds-checked parsers of runtime/core/include/offlow/pkt.h, so a
malformed packet is a counted drop at the element that rejects it, never an
out-of-bounds read."""

from __future__ import annotations

from collections.abc import Mapping

from offlow.dsl.element import Element, Port

# What CheckIPv4 and CheckIPv6 both record.
_IP_FIELDS = {
    "l4_off": "offset of the transport header (IPv6: after the extension headers)",
    "l4_end": "offset where the IP packet ends (what follows is Ethernet padding)",
    "ip_proto": "the transport protocol number (6 TCP, 17 UDP; IPv6: the last next header)",
    "ip_frag": "0: not a fragment, 1: the first fragment, 2: a later one (no transport "
               "header)",
    "ttl": "the TTL (IPv6: the hop limit)",
}


class ParseEth(Element):
    """Ethernet (with up to two VLAN tags): sends IPv4, IPv6 and other frames apart."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("ipv4", "ip.v4"), Port("ipv6", "ip.v6"), Port("other", "eth"))
    fields = {"l3_off": "uint16_t", "ethertype": "uint16_t"}
    field_docs = {"l3_off": "offset of the IP header (after the Ethernet header and the VLAN "
                            "tags)",
                  "ethertype": "the ethertype after the VLAN tags, host byte order (0x0800 "
                               "IPv4, 0x86DD IPv6)"}
    drops = {"malformed": "the Ethernet header or a VLAN tag is cut short, or there are more "
                          "than two VLAN tags"}
    body = r"""
    uint16_t ethertype;
    uint32_t l3_off;
    if (ofl_parse_eth(pkt->data, pkt->len, &ethertype, &l3_off) < 0)
        DROP_WHY(malformed);
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
    fields = {"l4_off": "uint16_t", "l4_end": "uint16_t", "ip_proto": "uint8_t",
              "ip_frag": "uint8_t", "ttl": "uint8_t", "src4": "uint32_t", "dst4": "uint32_t"}
    field_docs = {**_IP_FIELDS,
                  "src4": "the source address, host byte order (10.0.0.1 is 0x0A000001)",
                  "dst4": "the destination address, host byte order"}
    drops = {"malformed": "the header is cut short, or its version, header length or total "
                          "length is impossible (a total length past the frame too)",
             "bad_checksum": "the header checksum is wrong"}
    body = r"""
    struct ofl_ipv4_info ip;
    if (ofl_parse_ipv4(pkt->data, pkt->len, state->l3_off, &ip) < 0)
        DROP_WHY(malformed);
    if (!ofl_ipv4_csum_ok(pkt->data + state->l3_off, ip.hdr_len))
        DROP_WHY(bad_checksum);
    state->l4_off = (uint16_t)(state->l3_off + ip.hdr_len);
    state->l4_end = (uint16_t)ip.end;
    state->ip_frag = ip.frag;
    state->ip_proto = ip.proto;
    state->ttl = ip.ttl;
    state->src4 = ip.src;
    state->dst4 = ip.dst;
    """


class CheckIPv6(Element):
    """Validates the IPv6 header and payload length and finds the transport header."""

    inputs = (Port("inp", "ip.v6"),)
    outputs = (Port("out", "ip.v6"),)
    fields = {"l4_off": "uint16_t", "l4_end": "uint16_t", "ip_proto": "uint8_t",
              "ip_frag": "uint8_t", "ttl": "uint8_t", "dst6": "uint8_t[16]"}
    field_docs = {**_IP_FIELDS,
                  "dst6": "the destination address, network byte order (as on the wire)"}
    drops = {"malformed": "the header is cut short, its version is not 6, its payload "
                          "length runs past the frame, or an extension header is bad"}
    body = r"""
    struct ofl_ipv6_info ip;
    if (ofl_parse_ipv6(pkt->data, pkt->len, state->l3_off, &ip) < 0)
        DROP_WHY(malformed);
    state->l4_off = (uint16_t)ip.l4_off;
    state->l4_end = (uint16_t)ip.end;
    state->ip_frag = ip.frag;
    state->ip_proto = ip.proto;
    state->ttl = ip.hop_limit;
    for (int k = 0; k < 16; k++)
        state->dst6[k] = ip.dst[k];
    """


class DecTTL(Element):
    """Decrements the IPv4 TTL with an incremental checksum update; drops at TTL <= 1."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    drops = {"ttl_expired": "the TTL is 1 or 0: the packet may go no further"}
    body = r"""
    if (state->ttl <= 1)
        DROP_WHY(ttl_expired);
    ofl_ipv4_dec_ttl(pkt->data + state->l3_off);
    state->ttl = (uint8_t)(state->ttl - 1);
    """


class DecHopLimit(Element):
    """Decrements the IPv6 hop limit (no header checksum in IPv6); drops at <= 1."""

    inputs = (Port("inp", "ip.v6"),)
    outputs = (Port("out", "ip.v6"),)
    drops = {"hop_limit_expired": "the hop limit is 1 or 0: the packet may go no further"}
    body = r"""
    if (state->ttl <= 1)
        DROP_WHY(hop_limit_expired);
    pkt->data[state->l3_off + 7] = (uint8_t)(state->ttl - 1);
    state->ttl = (uint8_t)(state->ttl - 1);
    """


class ParseL4(Element):
    """UDP and TCP ports (0 for other protocols and for fragments after the first, which
    hold no transport header); a transport header that does not fit the IP payload is
    dropped, and so is one whose UDP length or TCP data offset is impossible or runs past
    the payload (a first fragment's UDP length covers the whole datagram: it may)."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    fields = {"sport": "uint16_t", "dport": "uint16_t"}
    field_docs = {"sport": "the UDP or TCP source port, host byte order (0: none)",
                  "dport": "the UDP or TCP destination port, host byte order (0: none)"}
    drops = {"truncated": "the UDP or TCP header is cut short by the end of the IP payload",
             "bad_header": "a UDP length below 8 or a TCP data offset below 5",
             "past_payload": "the UDP length or the TCP data offset runs past the IP payload"}
    body = r"""
    uint16_t sport = 0, dport = 0;
    uint32_t end = state->l4_end < pkt->len ? state->l4_end : pkt->len;
    int rc = ofl_parse_l4(pkt->data, end, state->l4_off, state->ip_proto, state->ip_frag,
                          &sport, &dport);
    if (rc == OFL_ETRUNC)
        DROP_WHY(truncated);
    if (rc == OFL_EBADHDR)
        DROP_WHY(bad_header);
    if (rc < 0)
        DROP_WHY(past_payload);
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
    """Consumes packets that are not wanted (counted as consumed, not as drops)."""

    inputs = (Port("inp", "any"),)
    outputs = ()
    body = ""
