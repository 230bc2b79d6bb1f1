"""A NIC program with an `echo` channel: each message comes back reversed, except
ones starting with `quiet` (no answer: the handler returns early) and `toolong`
(a 57-byte REPLY: the error ends the handler and closes the channel); `count` is
how many messages arrived."""

from offlow import Handler, Program, Shared, Sink, Source


class Echo(Handler):
    tables = ("seen",)
    body = r"""
    uint8_t out[57] = {0};
    __atomic_add_fetch(&seen[0], 1, __ATOMIC_RELAXED);
    if (len >= 5 && !memcmp(msg, "quiet", 5))
        return;
    if (len >= 7 && !memcmp(msg, "toolong", 7))
        REPLY(out, sizeof out);
    for (size_t i = 0; i < len; i++)
        out[i] = msg[len - 1 - i];
    REPLY(out, len);
    """


def program() -> Program:
    p = Program("echo")
    src, out = Source("rx"), Sink("tx")
    src >> out
    p.segment("rx", [src, out], device="nic")
    p.channel("echo", Echo("echo", seen=Shared("seen", "uint64_t", 1)), device="nic")
    return p
