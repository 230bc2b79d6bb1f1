"""IPv4 and IPv6 router on the full BGP table.

The NIC parses and checks headers; the `route` segment decrements TTL / hop limit,
looks up the next hop (DIR-24-8 for IPv4, a multibit trie for IPv6: docs/router.md)
and rewrites the Ethernet addresses.  The LPM tables live in the memory of the
device that runs `route`: move it with `--set route.device=host` and the tables are
built on the host instead; only the fields `route` reads cross the interconnect.

    offlow run examples/router.py --prefixes ../shared/data/bgp-full-table.txt.gz
    offlow run examples/router.py --opt routes4.path=OTHER_TABLE.txt ...
"""


from offlow import Program, Sink, Source
from offlow.elements import (
    CheckIPv4,
    CheckIPv6,
    DecHopLimit,
    DecTTL,
    Discard,
    LookupIPv4,
    LookupIPv6,
    ParseEth,
    SetNextHop,
    lpm4_table,
    lpm6_table,
)
from offlow.paths import DATA

TABLE = DATA / "bgp-full-table.txt.gz"


def program() -> Program:
    p = Program("router")
    routes4, routes6 = lpm4_table("routes4", TABLE), lpm6_table("routes6", TABLE)

    src, eth, other = Source("rx"), ParseEth("eth"), Discard("non_ip")
    ip4, ip6 = CheckIPv4("ip4"), CheckIPv6("ip6")
    ttl4, ttl6 = DecTTL("ttl4"), DecHopLimit("ttl6")
    lpm4, lpm6 = LookupIPv4("lpm4", routes=routes4), LookupIPv6("lpm6", routes=routes6)
    mac4, mac6 = SetNextHop("mac4"), SetNextHop("mac6")
    out = Sink("tx")

    src >> eth
    eth["ipv4"] >> ip4 >> ttl4 >> lpm4 >> mac4 >> out
    eth["ipv6"] >> ip6 >> ttl6 >> lpm6 >> mac6 >> out
    eth["other"] >> other

    p.segment("rx", [src, eth, ip4, ip6, other], device="nic", cores=[0])
    p.segment("route", [ttl4, lpm4, ttl6, lpm6], device="nic", cores=[0])
    p.segment("tx", [mac4, mac6, out], device="host", cores=[0])
    return p
