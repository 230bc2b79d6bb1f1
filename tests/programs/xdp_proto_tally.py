"""A user's tally of IPv4 traffic for the xdp target: frames per IP protocol class and
per length class, in odd-sized shared arrays the element only adds to (plain `+=`,
`++`, `-=` and an atomic add whose value it ignores), so that on xdp each is a per-CPU
array map (offlow.codegen.bpf.map_kind), summed into the run's table report. Its own
names, comments in its C body; an 8-bit array that wraps."""

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

LENGTHS = 23  # length classes of 64 bytes; the last takes every longer frame


class ProtoTally(Element):
    """Counts the frame by protocol (TCP, UDP, ICMP, other: 4 classes, then the bytes
    of each in 4 more) and by length class; `budget` goes down by each frame's bytes."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("per_proto", "per_len", "budget", "tiny")
    body = r"""
    /* the protocol is the tenth byte of the IPv4 header */
    uint32_t at = state->l3_off + 9u;
    if (at >= pkt->len) EMIT(out);   // (CheckIPv4 saw a whole header)
    uint8_t proto = pkt->data[at];
    uint32_t k = proto == 6 ? 0u : proto == 17 ? 1u : proto == 1 ? 2u : 3u;
    per_proto[k]++;
    __sync_fetch_and_add(&per_proto[4 + k], pkt->len);   /* bytes, by class */
    uint32_t c = pkt->len >> 6;
    if (c > 22u) c = 22u;
    per_len[c] += 1;
    *budget -= (int32_t)pkt->len;
    tiny[pkt->len & 1u]++;            /* 8 bits: odd and even lengths, wrapping past 255 */
    tiny[2]--;                        /* below 0 */
    tiny[3] += (uint8_t)pkt->len;     // the low byte of the byte total
    """


def program() -> Program:
    p = Program("xdp_proto_tally")
    wire, frames, v4 = Source("wire"), ParseEth("frames"), CheckIPv4("v4")
    tally = ProtoTally("tally", per_proto=Shared("protos", "uint64_t", 8),
                       per_len=Shared("lengths", "uint32_t", LENGTHS),
                       budget=Shared("budget", "int32_t", 1), tiny=Shared("tiny", "uint8_t", 4))
    back, rest = Sink("back"), Discard("rest")
    wire >> frames
    frames["ipv4"] >> v4 >> tally >> back
    frames["ipv6"] >> rest
    frames["other"] >> rest
    p.segment("edge", [wire, frames, v4, tally, back, rest], device="nic", cores=[0])
    return p
