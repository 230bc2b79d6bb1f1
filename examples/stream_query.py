"""A stream query in two operators, the active-NIC seed's synthetic benchmark (seed 004,
section 4): a Filter on the NIC and a sliding-window Aggregate on the host. Each UDP
datagram carries one tuple of 164 bytes (41 32-bit fields); frames are 206 bytes.

The Filter scores each tuple over all its fields (ROUNDS passes) and keeps those whose
score passes; the Aggregate keeps the last WINDOW values of each of GROUPS groups and
recomputes the window's sum and maximum for every tuple (Aurora's Aggregate over a
sliding window). Move the Filter with --set filter.device=host, spread it with
--set filter.cores=0,1,2,3; `offlow bench seeds` predicts the seed's Figure 4 from it.

    offlow run examples/stream_query.py --sizes 206:1
"""

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

TUPLE_OFF = 14 + 20 + 8  # the tuple follows the Ethernet, IPv4 and UDP headers
TUPLE_BYTES = 164
GROUPS, WINDOW = 64, 1024


class Filter(Element):
    """Keeps a tuple when its score (a mix of its 41 fields, `rounds` passes) falls
    below `keep` of 256; its group and value go on in the state."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    params = {"rounds": "uint32_t", "keep": "uint32_t"}
    fields = {"group": "uint32_t", "value": "uint32_t"}
    drops = {"truncated": "the frame holds no whole tuple", "filtered": "the predicate failed"}
    body = f"""
    if (pkt->len < {TUPLE_OFF + TUPLE_BYTES}u) DROP_WHY(truncated);
    const uint8_t *t = pkt->data + {TUPLE_OFF};
    uint32_t src, dst;   /* the stream's tuples differ by their sender too */
    memcpy(&src, pkt->data + 26, 4);
    memcpy(&dst, pkt->data + 30, 4);
    uint32_t score = (2166136261u ^ src) * 16777619u ^ dst;
    for (uint32_t r = 0; r < rounds; r++)
        for (unsigned f = 0; f < {TUPLE_BYTES // 4}u; f++) {{
            uint32_t v;
            memcpy(&v, t + 4 * f, 4);   /* fields are unaligned in the frame */
            score = (score ^ (v + r)) * 16777619u;
        }}
    if ((score & 255u) >= keep) DROP_WHY(filtered);
    uint32_t v0;
    memcpy(&v0, t, 4);
    state->group = (score >> 8) % {GROUPS}u;
    state->value = v0 ^ score;
    """


class Aggregate(Element):
    """The sum, maximum and a decaying average of the last WINDOW values of the tuple's
    group, recomputed over the window for each tuple (the average is a dependent chain:
    a step per value); the tuple goes on with them in the state."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("windows",)
    work = "integer"  # its window (4 KB a group) stays in the caches: arithmetic, not lookups
    fields = {"sum": "uint64_t", "max": "uint32_t", "avg": "uint32_t"}
    body = f"""
    uint32_t *w = windows + (size_t)state->group * ({WINDOW}u + 1u);
    uint32_t at = w[{WINDOW}] % {WINDOW}u;      /* the slot after the newest value */
    w[at] = state->value;
    w[{WINDOW}] = at + 1u;
    uint64_t sum = 0, avg = 0;
    uint32_t max = 0;
    for (unsigned i = 1; i <= {WINDOW}u; i++) {{
        uint32_t v = w[(at + i) % {WINDOW}u];     /* oldest first */
        sum += v;
        max = v > max ? v : max;
        avg = (avg * 7u + v) / 8u;
    }}
    state->sum = sum;
    state->max = max;
    state->avg = (uint32_t)avg;
    """


def program() -> Program:
    p = Program("stream_query")
    windows = Shared("windows", "uint32_t", GROUPS * (WINDOW + 1))
    src, eth, ip4, other = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), Discard("non_ip4")
    filt = Filter("select", rounds=4, keep=128)
    agg, out = Aggregate("window", windows=windows), Sink("tx")
    src >> eth
    eth["ipv4"] >> ip4 >> filt >> agg >> out
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("filter", [src, eth, ip4, filt, other], device="nic", cores=[0])
    p.segment("aggregate", [agg, out], device="host", cores=[0])
    return p
