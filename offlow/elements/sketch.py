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
