"""PCSA (probabilistic counting with stochastic averaging, Flajolet and Martin) over
IPv4 source addresses, as NFComms ran it on the NIC: 2,048 bitmaps chosen by the top
11 bits of a hash of the address, each recording the rank of the hash's lowest set
bit among the other 21. The host asks for the summary over a direct channel
(PcsaSummary) and computes the estimate (offlow.sketch.pcsa_estimate).

The hash is CRC32C, as the paper's CRC32, followed by the murmur3 finalizer: CRC is
linear, so consecutive addresses get correlated bitmap and rank bits (a /14 of
consecutive sources is underestimated by 40% without the finalizer)."""

from __future__ import annotations

from offlow.dsl import Element, Handler, Port, Shared
from offlow.errors import OfflowError

PCSA_BITMAPS = 2048
PCSA_INDEX_BITS = 11  # log2(PCSA_BITMAPS)


def pcsa_table(name: str) -> Shared:
    """The sketch: one 32-bit bitmap per bucket."""
    return Shared(name, "uint32_t", PCSA_BITMAPS)


class PCSA(Element):
    """Adds the IPv4 source address to the sketch; the packet goes on unchanged."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("sketch",)
    work = "hash"  # a CRC32C and a mix per packet; the sketch is 8 KB (cached)
    # The bitmap is read before the atomic OR: most packets set no new bit, and a
    # plain read keeps the cache line shared between cores.
    body = r"""
    uint8_t a[4] = { (uint8_t)(state->src4 >> 24), (uint8_t)(state->src4 >> 16),
                     (uint8_t)(state->src4 >> 8), (uint8_t)state->src4 };
    uint32_t h = ofl_fmix32(ofl_crc32c(0, a, 4));
    uint32_t rest = h & ((1u << (32 - 11)) - 1);
    uint32_t bit = 1u << (rest ? (uint32_t)__builtin_ctz(rest) : 32 - 11);
    uint32_t *b = &sketch[h >> (32 - 11)];
    if (!(__atomic_load_n(b, __ATOMIC_RELAXED) & bit))
        __atomic_fetch_or(b, bit, __ATOMIC_RELAXED);
    """


class PcsaSummary(Handler):
    """Answers any message with the sketch's summary: 12 bytes, the sum over the
    bitmaps of R (the number of consecutive ones from bit 0), the number of bitmaps
    and the number of empty bitmaps, uint32 little-endian. A message starting with
    `reset` clears the sketch first and answers the empty summary."""

    tables = ("sketch",)
    body = r"""
    if (len >= 5 && !memcmp(msg, "reset", 5)) {
        for (unsigned i = 0; i < 2048; i++) __atomic_store_n(&sketch[i], 0u, __ATOMIC_RELAXED);
    }
    uint32_t out[3] = { 0, 2048, 0 };
    for (unsigned i = 0; i < 2048; i++) {
        uint32_t b = __atomic_load_n(&sketch[i], __ATOMIC_RELAXED);
        out[0] += (uint32_t)__builtin_ctz(~b);
        out[2] += b == 0;
    }
    REPLY(out, sizeof out);
    """


CM_SEED = 0x9E3779B97F4A7C15  # row r hashes with seed (r + 1) * CM_SEED


def countmin_table(name: str, depth: int, width: int) -> Shared:
    """A count-min sketch: `depth` rows of `width` 32-bit counters, row after row."""
    return Shared(name, "uint32_t", depth * width)


class CountMin(Element):
    """Counts the packet's flow (its 5-tuple: IPv4 source and destination, protocol,
    ports) in a count-min sketch of `depth` rows of `width` counters (Cormode and
    Muthukrishnan; Floem's flow classification), then classifies the flow by its
    estimate, the smallest of its counters: `heavy` from `threshold` packets on, else
    `light`. The estimate never falls below the flow's true count; it exceeds it by
    at most e/width of all packets with probability 1 - e^-depth. Counters are added
    atomically, so the sketch may be shared by several cores.
    offlow.sketch.countmin reads it on the host."""

    inputs = (Port("inp", "ip"),)  # after ParseL4 of IPv4 packets (it reads src4, dst4)
    outputs = (Port("heavy", "ip"), Port("light", "ip"))
    params = {"depth": "uint32_t", "width": "uint32_t", "threshold": "uint32_t"}
    tables = ("sketch",)
    helpers = r"""
    /* The flow key folded into 64 bits, then one murmur3 finalizer per row. */
    static inline uint64_t cm_key(uint32_t src, uint32_t dst, uint8_t proto, uint16_t sp,
                                  uint16_t dp)
    {
        uint64_t k = (uint64_t)src << 32 | dst;
        return k ^ ofl_fmix64(((uint64_t)sp << 24 | (uint64_t)dp << 8 | proto) + 1u);
    }
    """
    body = r"""
    uint64_t key = cm_key(state->src4, state->dst4, state->ip_proto, state->sport,
                          state->dport);
    uint32_t est = UINT32_MAX;
    for (uint32_t r = 0; r < depth; r++) {
        uint64_t h = ofl_fmix64(key ^ ((uint64_t)(r + 1u) * 0x9E3779B97F4A7C15ull));
        uint32_t *c = &sketch[(uint64_t)r * width + h % width];
        uint32_t now = __atomic_add_fetch(c, 1u, __ATOMIC_RELAXED);
        if (now < est)
            est = now;
    }
    if (est >= threshold)
        EMIT(heavy);
    EMIT(light);
    """

    def __init__(self, name: str | None = None, *, depth: int, width: int, threshold: int,
                 sketch: Shared) -> None:
        name = name or "countmin"
        if not (0 < depth <= 32 and 0 < width and depth * width == sketch.length):
            raise OfflowError(f"element `{name}`: depth={depth}, width={width}: 1..32 rows "
                              f"of at least one counter, and the sketch `{sketch.name}` holds "
                              f"{sketch.length} (countmin_table(name, depth, width))")
        super().__init__(name, depth=depth, width=width, threshold=threshold, sketch=sketch)
