"""A user's per-length-bucket statistics: 13 buckets, each a row of 3 words (frames,
bytes, the last frame's length). `program()` declares the rows as a user first writes
them, `Shared("bucket_rows", "uint32_t[3]", 13)`, which offlow refuses (a shared table's
elements are scalars); `flat_program()` declares them as the error says, 39 scalars
indexed `rows[3 * b + k]`."""

from offlow import Element, Program, Shared, Sink, Source

BUCKETS, WORDS = 13, 3


class RowStats(Element):
    """Counts each frame in the row of its length's bucket."""

    tables = ("rows",)
    body = r"""
    uint32_t b = pkt->len % 13u;          /* the bucket: 13 rows */
    rows[3 * b + 0] += 1;                 // frames
    rows[3 * b + 1] += pkt->len;          // bytes
    rows[3 * b + 2] = pkt->len;           /* the last frame's length */
    """


def _program(rows: Shared) -> Program:
    p = Program("bucket_rows")
    src, stats, out = Source("wire"), RowStats("per_len", rows=rows), Sink("out")
    src >> stats >> out
    p.segment("edge", [src, stats, out], device="nic", cores=[0])
    return p


def program() -> Program:
    return _program(Shared("bucket_rows", f"uint32_t[{WORDS}]", BUCKETS))


def flat_program() -> Program:
    return _program(Shared("bucket_rows", "uint32_t", BUCKETS * WORDS))
