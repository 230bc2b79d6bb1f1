"""A program written the way users write them: comments in the C bodies, a #define,
a static inline helper, __typeof__, its own element names and an odd table size.

The NIC hashes each IPv4 packet's addresses and length into one of BUCKETS buckets; the host
counts the packets of each bucket (and their bytes in the second half of the table)
and forwards them; a channel answers the first two counters."""

from offlow import Element, Handler, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

BUCKETS = 7  # an odd size on purpose


class FlowBucket(Element):
    """bucket = mix(src ^ dst ^ length) % 7: which of the seven buckets a packet falls
    in (a loopback capture's addresses are all alike: its lengths are not)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"bucket": "uint8_t"}
    helpers = r"""
    /* Murmur3's 32-bit finalizer: spreads the address bits over the word. */
    static inline uint32_t flow_mix(uint32_t x)
    {
        x ^= x >> 16;
        x *= 0x85ebca6bu;   // multiply, shift, again
        x ^= x >> 13;
        x *= 0xc2b2ae35u;
        return x ^ (x >> 16);
    }
    """
    body = r"""
    #define BUCKETS 7u   /* keep in step with the table's length */
    __typeof__(state->src4) both = state->src4 ^ state->dst4;  // the flow, either way
    state->bucket = (uint8_t)(flow_mix(both ^ pkt->len) % BUCKETS);
    #if BUCKETS > 255
    #error too many buckets for a uint8_t
    #endif
    """


class Tally(Element):
    """Counts packets and bytes per bucket (on one core, so plain adds do)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("buckets",)
    body = r"""
    // Two halves: counts, then bytes.
    #define HALF 7
    buckets[state->bucket] += 1;
    buckets[HALF + state->bucket] += pkt->len;  /* the whole frame */
    """


class FirstTwo(Handler):
    """Answers the first two bucket counters."""

    tables = ("buckets",)
    body = r"""
    uint64_t out[2] = { buckets[0], buckets[1] };
    REPLY(out, sizeof out);              /* at most 56 bytes, never blocks */
    """


def program() -> Program:
    p = Program("flow_buckets")
    buckets = Shared("buckets", "uint64_t", 2 * BUCKETS)
    src, eth, ip4 = Source("wire"), ParseEth("eth"), CheckIPv4("ip4")
    fb, tally, out = FlowBucket("fb"), Tally("tally", buckets=buckets), Sink("tx")
    not_v4, v6 = Discard("not_v4"), Discard("v6")
    src >> eth
    eth["ipv4"] >> ip4 >> fb >> tally >> out
    eth["ipv6"] >> v6
    eth["other"] >> not_v4
    p.segment("nic_part", [src, eth, ip4, fb, v6, not_v4], device="nic")
    p.segment("host_part", [tally, out], device="host")
    p.channel("first", FirstTwo("first_two", buckets=buckets))
    return p
