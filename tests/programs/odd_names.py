"""A user's program whose names are not plain identifiers: a non-ASCII letter, a quote,
a space, a backslash (one inside, one at the end) and a 64-character name, for the
pictures (offlow explain --svg) and the live page that key on them."""

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

LONG = "m" * 64
NAMES = ("é_eth", 'v4"q', "not\\v4", "not ip\\", LONG)


class Mark(Element):
    """Counts each IPv4 packet by its TTL."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("seen",)
    body = "seen[state->ttl]++;"


def program() -> Program:
    p = Program("odd_names")
    seen = Shared("seen_ttl", "uint64_t", 256)
    src, eth, ip4 = Source("wire"), ParseEth(NAMES[0]), CheckIPv4(NAMES[1])
    mark, out = Mark(LONG, seen=seen), Sink("tx")
    v6, other = Discard(NAMES[2]), Discard(NAMES[3])
    src >> eth
    eth["ipv4"] >> ip4 >> mark >> out
    eth["ipv6"] >> v6
    eth["other"] >> other
    p.segment("edge", [src, eth, ip4, v6, other], device="nic", cores=[0])
    p.segment("count", [mark, out], device="host", cores=[0])
    return p
