"""A user's program with a channel of its own, for the xdp target: IPv4 frames counted
by TTL class (TTL / 8) in an odd-sized shared array of 33 counters, the last one the
bytes seen, set in the packet path (XDP: the array is a BPF array map); the host asks
over the `census` channel which TTL class is the busiest, and may clear a class (the
handler writes the array, which on xdp is the map XDP updates). Its own names,
comments in its C bodies."""

from offlow import Element, Handler, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

CLASSES = 32  # TTL classes (TTL / 8); entry CLASSES holds the byte total


class TtlClasses(Element):
    """Counts the frame in its TTL's class and adds its bytes to the total."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("by_ttl",)
    body = r"""
    /* the TTL is the ninth byte of the IPv4 header */
    uint16_t at = (uint16_t)(state->l3_off + 8u);
    if (at >= pkt->len) EMIT(out);          // (CheckIPv4 saw a whole header)
    __sync_fetch_and_add(&by_ttl[pkt->data[at] >> 3], 1);   /* classes of 8 */
    __sync_fetch_and_add(&by_ttl[32], pkt->len);   /* the byte total */
    """


class Census(Handler):
    """Answers `top` with the busiest class, its count and the byte total (3 uint64,
    little-endian); `clear` and a class number (one byte) zeroes that class and
    answers its old count."""

    tables = ("counts",)
    body = r"""
    /* "clear" + one byte: the class to zero */
    if (len == 6 && memcmp(msg, "clear", 5) == 0) {
        uint8_t k = msg[5];
        uint64_t old = k < 32u ? __atomic_exchange_n(&counts[k], 0, __ATOMIC_RELAXED) : 0;
        REPLY(&old, sizeof old);
        return;
    }
    uint64_t top[3] = { 0, 0, __atomic_load_n(&counts[32], __ATOMIC_RELAXED) };
    for (unsigned c = 0; c < 32u; c++) {   // the first of the busiest wins
        uint64_t n = __atomic_load_n(&counts[c], __ATOMIC_RELAXED);
        if (n > top[1]) { top[0] = c; top[1] = n; }
    }
    REPLY(top, sizeof top);
    """


def program() -> Program:
    p = Program("xdp_census")
    by_ttl = Shared("by_ttl", "uint64_t", CLASSES + 1)
    wire, frames, v4 = Source("wire"), ParseEth("frames"), CheckIPv4("v4")
    classes, back, rest = TtlClasses("classes", by_ttl=by_ttl), Sink("back"), Discard("rest")
    wire >> frames
    frames["ipv4"] >> v4 >> classes >> back
    frames["ipv6"] >> rest
    frames["other"] >> rest
    p.segment("edge", [wire, frames, v4, classes, back, rest], device="nic", cores=[0])
    p.channel("census", Census("ask", counts=by_ttl))
    return p
