"""A NIC program with an `echo` channel: each message comes back reversed, except
ones starting with `quiet` (no answer: the handler returns early), `toolong`
(a REPLY of 57 bytes or more, its size
known only as it runs: the error ends the handler and closes the channel) and `bulk`
followed by a byte k (the answer is the table `blob` in bulk, byte i = (i * 7 + k)
mod 256); `seen` counts the messages that arrived."""

from offlow import Handler, Program, Shared, Sink, Source

BLOB = 300_000


class Echo(Handler):
    tables = ("seen", "blob")
    params = {"blob_len": "uint32_t"}
    body = r"""
    uint8_t out[57] = {0};
    __atomic_add_fetch(&seen[0], 1, __ATOMIC_RELAXED);
    if (len >= 5 && !memcmp(msg, "quiet", 5))
        return;
    if (len == 5 && !memcmp(msg, "bulk", 4)) {
        for (size_t i = 0; i < blob_len; i++)
            blob[i] = (uint8_t)(i * 7 + msg[4]);
        BULK_REPLY(blob, blob_len);
        return;
    }
    if (len >= 7 && !memcmp(msg, "toolong", 7))
        REPLY(out, len + 50);   /* 57 bytes or more (a constant one would not compile) */
    for (size_t i = 0; i < len; i++)
        out[i] = msg[len - 1 - i];
    REPLY(out, len);
    """


def program() -> Program:
    p = Program("echo")
    src, out = Source("rx"), Sink("tx")
    src >> out
    p.segment("rx", [src, out], device="nic")
    echo = Echo("echo", seen=Shared("seen", "uint64_t", 1), blob=Shared("blob", "uint8_t", BLOB),
                blob_len=BLOB)
    p.channel("echo", echo, device="nic")
    return p
