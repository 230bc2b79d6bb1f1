"""A user's table of who talks: IPv4 frames counted per (sending station's MAC, client
address, protocol) and IPv6 frames per (client address, hop limit), in hash maps whose
key fields are declared as addresses (`mac`, `ipv4`, `ipv6`: their bytes as on the
wire), so the run's report shows them as addresses. Its own names, comments in its C
bodies, odd table sizes."""

from offlow import Element, Port, Program, SharedMap, Sink, Source
from offlow.elements import CheckIPv4, CheckIPv6, Discard, ParseEth

STATIONS = (("station", "mac"), ("client", "ipv4"), ("proto", "uint8_t"))
CLIENTS6 = (("client6", "ipv6"), ("hops", "uint8_t"))


class Talk4(Element):
    """One more frame for its (station, client, protocol)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("who",)
    body = r"""
    const uint8_t *ip = pkt->data + state->l3_off;   /* CheckIPv4 saw the whole header */
    struct talk4_key k;
    memcpy(k.station, pkt->data + 6, 6);   // the Ethernet source
    memcpy(k.client, ip + 12, 4);          /* as on the wire: no ntohl */
    k.proto = ip[9];
    uint64_t *n = ofl_map_lookup(who, &k);
    if (n) {
        __sync_fetch_and_add(n, 1);
    } else {
        uint64_t one = 1;
        (void)ofl_map_update(who, &k, &one);   // counted `full` past 37 keys
    }
    """


class Talk6(Element):
    """One more frame for its (client, hop limit)."""

    inputs = (Port("inp", "ip.v6"),)
    outputs = (Port("out", "ip.v6"),)
    tables = ("who6",)
    body = r"""
    struct talk6_key k;
    memcpy(k.client6, pkt->data + state->l3_off + 8, 16);   /* CheckIPv6 saw it */
    k.hops = state->ttl;
    uint64_t *n = ofl_map_lookup(who6, &k);
    if (n) {
        __sync_fetch_and_add(n, 1);
    } else {
        uint64_t one = 1;
        (void)ofl_map_update(who6, &k, &one);
    }
    """


def program() -> Program:
    p = Program("talkers")
    wire, eth, v4, v6 = Source("wire"), ParseEth("eth"), CheckIPv4("v4"), CheckIPv6("v6")
    t4 = Talk4("t4", who=SharedMap("talk4", STATIONS, "uint64_t", 37))
    t6 = Talk6("t6", who6=SharedMap("talk6", CLIENTS6, "uint64_t", 11))
    out, other = Sink("out"), Discard("other")
    wire >> eth
    eth["ipv4"] >> v4 >> t4 >> out
    eth["ipv6"] >> v6 >> t6 >> out
    eth["other"] >> other
    p.segment("edge", [wire, eth, v4, v6, t4, t6, out, other], device="nic", cores=[0])
    return p
