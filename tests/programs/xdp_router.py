"""A router written for the xdp target: IPv4 packets are looked up in a DIR-24-8 table
(lpm4_table, a BPF map in XDP) and leave with their next hop's Ethernet addresses by
the sink; IPv6 packets leave with their hop limit down; the rest is discarded. The
user's own names and table; the table's file is the full BGP table unless
`--opt fib.path=FILE` names another."""

from offlow import Program, Sink, Source
from offlow.build import DATA
from offlow.elements import (
    CheckIPv4,
    CheckIPv6,
    DecHopLimit,
    DecTTL,
    Discard,
    LookupIPv4,
    ParseEth,
    SetNextHop,
    lpm4_table,
)


def program() -> Program:
    p = Program("xdp_router")
    fib = lpm4_table("fib", DATA / "bgp-full-table.txt.gz", nports=8)
    wire, frames, rest = Source("wire"), ParseEth("frames"), Discard("rest")
    v4, ttl, find, rewrite = CheckIPv4("v4"), DecTTL("ttl"), LookupIPv4("find", routes=fib), \
        SetNextHop("rewrite")
    v6, hop6, back = CheckIPv6("v6"), DecHopLimit("hop6"), Sink("back")
    wire >> frames
    frames["ipv4"] >> v4 >> ttl >> find >> rewrite >> back
    frames["ipv6"] >> v6 >> hop6 >> back
    frames["other"] >> rest
    p.segment("edge", [wire, frames, v4, ttl, find, rewrite, v6, hop6, back, rest],
              device="nic", cores=[0])
    return p
