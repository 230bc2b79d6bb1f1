"""A user's byte count per (IP protocol, TTL) in a hash map, its body taking each value
as a `uint64_t *` in a map declared with 32-bit values, as a user who widened the count
in the body but not in the declaration wrote it: refused (each add would write 8 bytes
into a 4-byte slot; until it was, the NIC ran it and wrote past each value)."""

from offlow import Element, Port, Program, SharedMap, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth


class ProtoBytes(Element):
    """Adds each datagram's length to its (protocol, TTL)'s count."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("per_proto",)
    body = r"""
    const uint8_t *ip = pkt->data + state->l3_off;
    struct proto_ttl_key k = { .proto = ip[9], .ttl = ip[8] };
    uint64_t *sum = ofl_map_lookup(per_proto, &k);    /* NULL: a new pair */
    if (sum != NULL) {
        *sum += pkt->len;
    } else {
        uint64_t first = pkt->len;
        (void)ofl_map_update(per_proto, &k, &first);   // full: counted by the map
    }
    """


def program() -> Program:
    p = Program("proto_bytes")
    wire, eth, v4 = Source("wire"), ParseEth("eth"), CheckIPv4("v4")
    count = ProtoBytes("bytes", per_proto=SharedMap(
        "proto_ttl", (("proto", "uint8_t"), ("ttl", "uint8_t")), "uint32_t", 61))
    out, other = Sink("out"), Discard("other")
    wire >> eth
    eth["ipv4"] >> v4 >> count >> out
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("edge", [wire, eth, v4, count, out, other], device="nic", cores=[0])
    return p
