"""A user's per-flow packet count: a hash map keyed by the IPv4 5-tuple (13 bytes:
addresses, ports, protocol), counting the frames of each flow; a TCP reset forgets its
flow. Its own names, comments in its C body. FLOWS sets how many flows it keeps."""

import os

from offlow import Element, Port, Program, SharedMap, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

FIVE_TUPLE = (("src", "uint32_t"), ("dst", "uint32_t"), ("sport", "uint16_t"),
              ("dport", "uint16_t"), ("proto", "uint8_t"))


class FlowCount(Element):
    """Adds one to its flow's count (a new flow starts at 1; with the table full it is
    not counted, and the table says how often); a TCP RST deletes the flow."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("seen",)
    body = r"""
    const uint8_t *ip = pkt->data + state->l3_off;   /* CheckIPv4 saw the whole header */
    uint32_t ihl = (ip[0] & 15u) * 4u;
    struct flows_key k;
    memset(&k, 0, sizeof k);            // packed: no padding to clear, but ports may stay 0
    memcpy(&k.src, ip + 12, 4);
    memcpy(&k.dst, ip + 16, 4);
    k.proto = ip[9];
    int first_frag = (ip[6] & 0x1fu) == 0 && ip[7] == 0;
    uint32_t l4 = state->l3_off + ihl;
    int rst = 0;
    if ((k.proto == 6 || k.proto == 17) && first_frag && l4 + 14u <= pkt->len) {
        k.sport = (uint16_t)(pkt->data[l4] << 8 | pkt->data[l4 + 1]);
        k.dport = (uint16_t)(pkt->data[l4 + 2] << 8 | pkt->data[l4 + 3]);
        rst = k.proto == 6 && (pkt->data[l4 + 13] & 0x04u);
    }
    if (rst) {
        ofl_map_delete(seen, &k);       /* -ENOENT for a flow never seen: fine */
        EMIT(out);
    }
    uint64_t *n = ofl_map_lookup(seen, &k);
    if (n) {
        __sync_fetch_and_add(n, 1);
    } else {
        uint64_t one = 1;
        (void)ofl_map_update(seen, &k, &one);   // -ENOSPC when full: counted by the map
    }
    """


def flows_program(flows: int) -> Program:
    """The program with a table of `flows` entries."""
    p = Program("flow_counts")
    wire, eth, v4 = Source("wire"), ParseEth("eth"), CheckIPv4("v4")
    count = FlowCount("count", seen=SharedMap("flows", FIVE_TUPLE, "uint64_t", flows))
    out, other = Sink("out"), Discard("other")
    wire >> eth
    eth["ipv4"] >> v4 >> count >> out
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("edge", [wire, eth, v4, count, out, other], device="nic", cores=[0])
    return p


def program() -> Program:
    return flows_program(int(os.environ.get("FLOWS", "4096")))
