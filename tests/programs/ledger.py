"""A user's program with a channel of its own (not the examples' names): `ledger`
keeps a running sum of signed 32-bit amounts sent to it and answers each message of
odd size with its own layout; `dump` followed by a byte k answers in bulk with the
table `pages` (131,071 bytes, an odd size: byte i = (i * 13 + k) mod 251). The
device is `nic` here; the remote tests move it with a text change, as a user would."""

from offlow import Handler, Program, Shared, Sink, Source

PAGES = 131_071


class Ledger(Handler):
    tables = ("total", "pages")
    params = {"npages": "uint32_t"}
    body = r"""
    /* "dump" + k: the pages, in bulk (they stay unchanged until the host has them) */
    if (len == 5 && msg[0] == 'd' && !memcmp(msg, "dump", 4)) {
        for (uint32_t i = 0; i < npages; i++)
            pages[i] = (uint8_t)((i * 13u + msg[4]) % 251u);
        BULK_REPLY(pages, npages);
        return;
    }
    /* else: amounts of 4 bytes each (a tail of 1..3 bytes is ignored), the answer is
       the running total (8 bytes), the count of amounts, and the tail echoed */
    uint8_t answer[8 + 4 + 3];
    int64_t t = total[0];
    size_t n = len / 4;
    for (size_t i = 0; i < n; i++) {
        int32_t a;
        memcpy(&a, msg + 4 * i, 4);
        t += a;
    }
    total[0] = t;
    uint32_t cnt = (uint32_t)n;
    memcpy(answer, &t, 8);
    memcpy(answer + 8, &cnt, 4);
    memcpy(answer + 12, msg + 4 * n, len - 4 * n);   // the tail
    REPLY(answer, 12 + (len - 4 * n));
    """


def program() -> Program:
    p = Program("ledger")
    src, out = Source("wire"), Sink("drain")
    src >> out
    p.segment("front", [src, out], device="nic")
    p.channel("ledger", Ledger("keeper", total=Shared("total", "int64_t", 1),
                               pages=Shared("pages", "uint8_t", PAGES), npages=PAGES),
              device="nic")
    return p
