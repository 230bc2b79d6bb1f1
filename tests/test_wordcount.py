"""Storm-style word count in two offload designs (examples/wordcount.py: bolts on the
host; examples/wordcount_nic.py: bolts on the NIC): the counts and the top k read back
from the count table are exactly a Python reference's (bytes.split() and Counter) on a
Zipf text stream with odd lines (tabs, newlines, NUL bytes, over-long words, empty
payloads, TCP); counting on two cores loses and duplicates nothing; the two designs
differ in the lines docs/streams.md says."""

from __future__ import annotations

import difflib
import random
from collections import Counter
from pathlib import Path

import pytest

from offlow.dsl.loader import load_program
from offlow.elements.words import WORD_MAX, CountWords, word_table
from offlow.errors import OfflowError
from offlow.streams.words import top_k, word_counts
from tests.e2e import ROOT
from tests.test_crypto_elements import dropped, run_program, udp_frame

HOST, NIC = ROOT / "examples" / "wordcount.py", ROOT / "examples" / "wordcount_nic.py"
SEPARATORS = [b" ", b"  ", b"\t", b"\n", b"\r\n", b" \x0b", b"\x0c"]


def text_stream(seed: int, lines: int) -> list[bytes]:
    """Lines of Zipf-chosen words, some odd ones among them."""
    rng = random.Random(seed)
    vocab = [rng.randbytes(rng.randrange(1, 8)).hex().encode()[:rng.randrange(1, 16)]
             for _ in range(2000)]
    vocab += [b"a\0", b"a", b"\0", b"\xff\xfe", b"x" * WORD_MAX, b"y" * (WORD_MAX + 1)]
    weights = [1 / (k + 1) for k in range(len(vocab))]
    out = []
    for _ in range(lines):
        words = rng.choices(vocab, weights, k=rng.randrange(0, 25))
        line = b"".join(w + rng.choice(SEPARATORS) for w in words)
        out.append(rng.choice([b"", b" ", b"\t"]) + line)
    return out


def reference(lines: list[bytes]) -> Counter[bytes]:
    return Counter(w for line in lines for w in line.split() if len(w) <= WORD_MAX)


def frames_of(lines: list[bytes]) -> list[bytes]:
    frames = [udp_frame("10.1.0.1", 4000, "10.1.0.2", 5000, line) for line in lines]
    frames.insert(len(frames) // 2, udp_frame("10.1.0.1", 4000, "10.1.0.2", 80, b"tcp", 6))
    return frames


@pytest.mark.parametrize("example, settings", [(HOST, []), (NIC, []),
                                               (NIC, ["spout.cores=0,1"])],
                         ids=["bolts-on-host", "bolts-on-nic", "bolts-on-two-nic-cores"])
def test_counts_and_top_k_are_the_references(example: Path, settings: list[str],
                                             tmp_path: Path) -> None:
    lines = text_stream(7, 40_000 if settings else 8_000)
    s, _ = run_program(load_program(example, settings), frames_of(lines), tmp_path)
    want = reference(lines)
    got = word_counts(s["tables"]["counts"])
    assert got == want
    assert top_k(got, 10) == sorted(want.items(), key=lambda wc: (-wc[1], wc[0]))[:10]
    assert top_k(got, 3) == [(w, n) for w, n in want.most_common(3)]  # no ties at the top
    long_words = sum(len(w) > WORD_MAX for line in lines for w in line.split())
    assert long_words > 0
    assert dropped(s) == {("split", "not_udp"): 1, ("count", "not_a_word"): long_words}


def test_a_full_table_drops_and_counts_the_words_it_has_no_slot_for(tmp_path: Path) -> None:
    from offlow import Program, Source
    from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
    from offlow.elements.words import SplitWords
    p = Program("tiny")
    t = word_table("counts", 3)
    src, e, v4, l4, junk = Source("in"), ParseEth("e"), CheckIPv4("v4"), ParseL4("l4"), \
        Discard("junk")
    sp, c = SplitWords("sp"), CountWords("c", slots=3, words=t)
    src >> e
    e["ipv4"] >> v4 >> l4 >> sp >> c
    e["ipv6"] >> junk
    e["other"] >> junk
    p.segment("all", [src, e, v4, l4, junk, sp, c], device="nic")
    lines = [b"a b c d", b"a e", b"c"]
    s, _ = run_program(p, frames_of(lines)[:-1] + [udp_frame("1.1.1.1", 1, "2.2.2.2", 2, b"c")],
                       tmp_path)
    assert word_counts(s["tables"]["counts"]) == {b"a": 2, b"b": 1, b"c": 2}
    assert dropped(s) == {("c", "table_full"): 2, ("sp", "not_udp"): 1}


def test_a_table_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(OfflowError, match="element `c`: slots=4"):
        CountWords("c", slots=4, words=word_table("t", 3))


def test_the_two_designs_differ_in_the_lines_the_docs_state() -> None:
    a, b = HOST.read_text().splitlines(), NIC.read_text().splitlines()
    diff = [d for d in difflib.ndiff(a, b) if d[:1] in "+-"]
    removed, added = sum(d[0] == "-" for d in diff), sum(d[0] == "+" for d in diff)
    code = [d for d in difflib.ndiff(a[a.index('"""', 1):], b[b.index('"""', 1):])
            if d[:1] in "+-"]
    code_removed, code_added = sum(d[0] == "-" for d in code), sum(d[0] == "+" for d in code)
    docs = " ".join((ROOT / "docs" / "streams.md").read_text().split())
    assert (f"{code_removed} lines of code of the first replaced by {code_added}" in docs
            and f"{removed} lines replaced by {added} with the docstrings" in docs), \
        (code_removed, code_added, removed, added)
