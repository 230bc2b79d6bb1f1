"""The word count's ranker: the counts a CountWords table holds after a run, and the
top k of them (offlow.elements.words)."""

from __future__ import annotations

from collections.abc import Sequence

from offlow.elements.words import SLOT_WORDS


def word_counts(table: Sequence[int]) -> dict[bytes, int]:
    """Every word a word_table holds, with its count."""
    out = {}
    for i in range(0, len(table), SLOT_WORDS):
        state, *key, count = table[i:i + SLOT_WORDS]
        if state:
            raw = b"".join(k.to_bytes(4, "little") for k in key)
            out[raw[:raw[15]]] = count
    return out


def top_k(counts: dict[bytes, int], k: int) -> list[tuple[bytes, int]]:
    """The k most frequent words, most first; equal counts in byte order of the word."""
    return sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:k]
