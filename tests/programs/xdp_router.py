"""A router written for the xdp target: IPv4 packets are looked up in a DIR-24-8 table
(lpm4_table), IPv6 packets in a multibit trie (lpm6_table), both BPF maps in XDP, and
leave with their next hop's Ethernet addresses by the sink, TTL or hop limit down; the
rest is discarded. The user's own names and tables; each table's file is the full BGP
table unless `--opt fib.path=FILE` (`fib6.path`) names another."""

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


def program() -> Program:
    p = Program("xdp_router")
    fib = lpm4_table("fib", DATA / "bgp-full-table.txt.gz", nports=8)
    fib6 = lpm6_table("fib6", DATA / "bgp-full-table.txt.gz", nports=8)
    wire, frames, rest = Source("wire"), ParseEth("frames"), Discard("rest")
    v4, ttl, find, rewrite = CheckIPv4("v4"), DecTTL("ttl"), LookupIPv4("find", routes=fib), \
        SetNextHop("rewrite")
    v6, hop6, find6 = CheckIPv6("v6"), DecHopLimit("hop6"), LookupIPv6("find6", routes=fib6)
    back = Sink("back")
    wire >> frames
    frames["ipv4"] >> v4 >> ttl >> find >> rewrite >> back
    frames["ipv6"] >> v6 >> hop6 >> find6 >> rewrite  # one rewrite for both families
    frames["other"] >> rest
    p.segment("edge", [wire, frames, v4, ttl, find, rewrite, v6, hop6, find6, back, rest],
              device="nic", cores=[0])
    return p
