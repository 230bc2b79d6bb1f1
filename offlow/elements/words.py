"""Storm-style word count (Floem's real-time analytics): a text stream carried in UDP
datagrams is split into words (`SplitWords`, Storm's split bolt) and each word is
counted (`CountWords`, the count bolt) in a table shared by the cores that count; the
ranker (offlow.streams.words.top_k) reads the table after the run.

A word is a maximal run of bytes other than ASCII whitespace (space, \t, \n, \v, \f,
\r: Python's bytes.split()); words of 1..15 bytes are counted."""

from __future__ import annotations

from offlow.dsl import Element, Port, Shared
from offlow.elements.udp4 import UDP4_INCLUDE, UDP_DROPS, UDP_PAYLOAD
from offlow.errors import OfflowError

WORD_MAX = 15  # bytes; a key is the word zero-padded to 15, then its length
SLOT_WORDS = 6  # uint32 per slot: state (0 free, 1 being written, 2 set), key[4], count


def word_table(name: str, slots: int) -> Shared:
    """Room for `slots` distinct words and their counts (open addressing)."""
    if not (isinstance(slots, int) and not isinstance(slots, bool) and slots > 0):
        raise OfflowError(f"word table `{name}`: slots={slots!r}: expected a whole number "
                          "of 1 or more")
    return Shared(name, "uint32_t", SLOT_WORDS * slots)


class SplitWords(Element):
    """Each word of the UDP payload goes out as a datagram of its own (the line's headers,
    the word as payload); the line ends here (consumed)."""

    inputs = (Port("inp", "ip"),)  # after CheckIPv4 and ParseL4
    outputs = (Port("out", "ip"),)
    includes = (UDP4_INCLUDE, "offlow/words.h")
    drops = UDP_DROPS
    body = UDP_PAYLOAD + r"""
    uint8_t buf[OFL_MTU];
    memcpy(buf, pkt->data, off);
    struct ofl_pkt made = { .data = buf, .cap = sizeof buf, .ts_ns = pkt->ts_ns };
    uint32_t at = 0, start, n;
    while ((n = ofl_word_next(pkt->data + off, len, &at, &start)) != 0) {
        memcpy(buf + off, pkt->data + off + start, n);
        ofl_udp4_set_payload_len(&made, state->l3_off, state->l4_off, n);
        MAKE(out, &made);
    }
    CONSUME();
    """


class CountWords(Element):
    """Counts the word that is the UDP payload in the table `words` (word_table): a
    slot is claimed atomically and counts are added atomically, so any number of cores
    may count into one table. The packet ends here (consumed)."""

    inputs = (Port("inp", "ip"),)
    outputs = ()
    params = {"slots": "uint32_t"}
    tables = ("words",)
    includes = (UDP4_INCLUDE, "offlow/spin.h")
    drops = {**UDP_DROPS, "not_a_word": f"an empty payload or one over {WORD_MAX} bytes",
             "table_full": "every slot of the table holds another word"}
    body = UDP_PAYLOAD + r"""
    if (len == 0 || len > 15u)
        DROP_WHY(not_a_word);
    uint32_t key[4] = { 0, 0, 0, 0 };
    memcpy(key, pkt->data + off, len);
    ((uint8_t *)key)[15] = (uint8_t)len;  /* "a" and "a\0" are different words */
    uint32_t i = ofl_fmix32(ofl_crc32c(0, key, sizeof key)) % slots;
    for (uint32_t probe = 0; probe < slots; probe++, i = (i + 1u) % slots) {
        uint32_t *s = &words[6u * i];
        uint32_t st = __atomic_load_n(&s[0], __ATOMIC_ACQUIRE), free_ = 0;
        if (st == 0 && __atomic_compare_exchange_n(&s[0], &free_, 1u, 0, __ATOMIC_ACQUIRE,
                                                   __ATOMIC_ACQUIRE)) {
            memcpy(&s[1], key, sizeof key);  /* ours: write the key, then publish it */
            __atomic_store_n(&s[5], 1u, __ATOMIC_RELAXED);
            __atomic_store_n(&s[0], 2u, __ATOMIC_RELEASE);
            CONSUME();
        }
        while ((st = __atomic_load_n(&s[0], __ATOMIC_ACQUIRE)) == 1u)
            ofl_cpu_relax();  /* another core is writing this slot's key */
        if (!memcmp(&s[1], key, sizeof key)) {
            __atomic_add_fetch(&s[5], 1u, __ATOMIC_RELAXED);
            CONSUME();
        }
    }
    DROP_WHY(table_full);
    """

    def __init__(self, name: str | None = None, *, slots: int, words: Shared) -> None:
        name = name or "countwords"
        if not (isinstance(slots, int) and not isinstance(slots, bool) and 0 < slots
                and words.length == SLOT_WORDS * slots):
            raise OfflowError(f"element `{name}`: slots={slots!r}: at least one, and the table "
                              f"`{words.name}` holds {words.length} words "
                              f"(word_table(name, slots) holds {SLOT_WORDS} per slot)")
        super().__init__(name, slots=slots, words=words)
