"""Key-based steering: the NIC derives a key from each synthetic packet's sequence
number; the host segment on three cores is steered by it. `owner[k]` records which
core (1-based) saw key k, `bad[0]` counts keys seen on two cores, `bad[1]` packets
of a key that arrived out of order."""

from offlow import Element, Program, Shared, Sink, Source


class SetKey(Element):
    fields = {"key": "uint32_t", "seq": "uint64_t"}
    body = r"""
    uint64_t q = 0;
    if (pkt->len < 50)
        DROP();
    for (int i = 0; i < 8; i++)
        q = q << 8 | pkt->data[42 + i];
    state->seq = q;
    state->key = (uint32_t)((q * 2654435761u) >> 7) % 16;
    """


class Record(Element):
    tables = ("owner", "last", "bad")
    body = r"""
    uint64_t me = ctx->core.idx + 1;
    if (owner[state->key] == 0)
        owner[state->key] = me;
    else if (owner[state->key] != me)
        __atomic_fetch_add(&bad[0], 1, __ATOMIC_RELAXED);   /* three cores add */
    if (state->seq < last[state->key])
        __atomic_fetch_add(&bad[1], 1, __ATOMIC_RELAXED);
    last[state->key] = state->seq + 1;
    """


def program() -> Program:
    p = Program("steer")
    src, key, out = Source("rx"), SetKey("key"), Sink("tx")
    rec = Record("rec", owner=Shared("owner", "uint64_t", 16),
                 last=Shared("last", "uint64_t", 16), bad=Shared("bad", "uint64_t", 2))
    src >> key >> rec >> out
    p.segment("rx", [src, key], device="nic")
    p.segment("app", [rec, out], device="host", cores=[0, 1, 2], steer="key")
    return p
