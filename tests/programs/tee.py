"""A test program exercising what the example does not: an element sending one packet
on two outputs (a copy each), a queue that carries only a field (no packet bytes),
and two sinks.

NIC: parse, check IPv4, tee.  Host segment `stats` counts packets by IP protocol
from the `ip_proto` field alone; host segment `fwd` decrements the TTL and writes
the packets out."""

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, DecTTL, Discard, ParseEth


class Tee(Element):
    """Sends every packet on both outputs."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("a", "ip.v4"), Port("b", "ip.v4"))
    body = "SEND(a); SEND(b);"


class CountProto(Element):
    """counts[ip_proto] += 1, from the state alone."""

    inputs = (Port("inp", "any"),)
    outputs = ()
    tables = ("counts",)
    body = "__atomic_fetch_add(&counts[state->ip_proto], 1, __ATOMIC_RELAXED);"


def program() -> Program:
    p = Program("tee")
    counts = Shared("proto_counts", "uint64_t", 256)
    src, eth, ip4, tee = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), Tee("tee")
    d6, dother = Discard("d6"), Discard("dother")
    cnt = CountProto("cnt", counts=counts)
    ttl, out = DecTTL("ttl"), Sink("out")
    src >> eth
    eth["ipv4"] >> ip4 >> tee
    eth["ipv6"] >> d6
    eth["other"] >> dother
    tee["a"] >> cnt
    tee["b"] >> ttl >> out
    p.segment("rx", [src, eth, ip4, tee, d6, dother], device="nic", cores=[0])
    p.segment("stats", [cnt], device="host", cores=[0])
    p.segment("fwd", [ttl, out], device="host", cores=[1])
    return p
