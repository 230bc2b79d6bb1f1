"""A user's program for hot reload (offlow reload): the NIC parses, checks IPv4 and
stamps every IPv4 packet's TTL with a mark (plus `shift[0]`, a table the control plane
may set); the host counts what it sees by mark and writes it out. A new build with
another mark, or another way of counting, replaces the processes' code while it runs."""

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

# two ways of counting that count the same
TALLY = {"plain": "seen[state->ttl]++;  // by mark",
         "atomic": "__atomic_fetch_add(&seen[state->ttl], 1, __ATOMIC_RELAXED);"}


class StampTTL(Element):
    """Writes `mark` + shift[0] into the IPv4 TTL (the checksum is left as it is)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    params = {"mark": "uint8_t"}
    tables = ("shift",)
    body = r"""
    /* the TTL is byte 8 of the IPv4 header */
    const uint8_t ttl = (uint8_t)(mark + shift[0]);
    pkt->data[state->l3_off + 8] = ttl;
    state->ttl = ttl;
    """


def tally(how: str) -> type[Element]:
    """seen[ttl] += 1: packets by the mark they carry, counted `how` (a key of TALLY, or
    a body of one's own)."""
    return type("TallyByMark", (Element,), {
        "__doc__": "Counts packets by their mark.", "inputs": (Port("inp", "ip.v4"),),
        "outputs": (Port("out", "ip.v4"),), "tables": ("seen",), "body": TALLY.get(how, how)})


def program(mark: int = 7, how: str = "plain", shift_len: int = 5) -> Program:
    p = Program("reload_mark")
    seen = Shared("seen_by_mark", "uint64_t", 256)
    shift = Shared("shift", "uint32_t", shift_len)
    src, eth, ip4 = Source("wire"), ParseEth("eth"), CheckIPv4("v4")
    stamp, out = StampTTL("stamp", mark=mark, shift=shift), Sink("tx")
    count = tally(how)("tally", seen=seen)
    v6, other = Discard("not_v4"), Discard("not_ip")
    src >> eth
    eth["ipv4"] >> ip4 >> stamp >> count >> out
    eth["ipv6"] >> v6
    eth["other"] >> other
    p.segment("edge", [src, eth, ip4, stamp, v6, other], device="nic", cores=[0])
    p.segment("count", [count, out], device="host", cores=[0])
    return p
