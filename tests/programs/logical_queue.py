"""A logical queue with three channels (Floem's GET/SET example): the NIC numbers
each packet (`seq`), derives a key and a kind, and sends it down `get` or `put`
(different elements of the host segment `app`) plus a copy down `count` (state
only, no packet bytes). All three edges from rx to app are channels of one queue
`rx->app`, steered by `key`. Get and Put write into the packet what the test checks
in the output pcap: bytes 50..57 the sequence number, 58 the host core, 59 the
channel (0 get, 1 put), 60 the key, 61 the low byte of `val` (put only).
`counts[key]` counts the copies that came down `count`; `spin` slows Get and Put
down (for enqueue=drop)."""

from offlow import Element, Port, Program, Shared, Sink, Source

KEYS = 16


class Number(Element):
    """seq: the packet's number on this NIC core; key and kind from it."""

    fields = {"seq": "uint64_t", "key": "uint32_t", "kind": "uint8_t", "val": "uint64_t"}
    tables = ("next",)
    body = r"""
    if (pkt->len < 64)
        DROP();
    uint64_t s = next[0]++;
    state->seq = s;
    state->key = (uint32_t)((s * 2654435761u) >> 7) % 16u;
    state->kind = (uint8_t)((s / 3u + s / 7u) & 1u);
    state->val = s * 3u + 1u;
    """


class Classify(Element):
    """Every packet down `count` (a copy) and down `get` or `put` by its kind."""

    outputs = (Port("count"), Port("get"), Port("put"))
    body = r"""
    SEND(count);
    if (state->kind)
        EMIT(put);
    EMIT(get);
    """


def _mark(channel: int, with_val: bool) -> str:
    return "\n".join([
        "    for (volatile uint32_t i = 0; i < spin; i++) { }",
        "    for (int i = 0; i < 8; i++)",
        "        pkt->data[50 + i] = (uint8_t)(state->seq >> (56 - 8 * i));",
        "    pkt->data[58] = (uint8_t)ctx->core.idx;",
        f"    pkt->data[59] = {channel};",
        "    pkt->data[60] = (uint8_t)state->key;",
        "    pkt->data[61] = " + ("(uint8_t)state->val;" if with_val else "0;"),
    ])


class Get(Element):
    params = {"spin": "uint32_t"}
    body = _mark(0, False)


class Put(Element):
    params = {"spin": "uint32_t"}
    body = _mark(1, True)


class Count(Element):
    """counts[key] += 1 from the state alone (its channel carries no packet bytes)."""

    outputs = ()
    tables = ("counts",)
    body = "__atomic_fetch_add(&counts[state->key], 1, __ATOMIC_RELAXED);"


def program(spin: int = 0) -> Program:
    p = Program("logical_queue")
    src, num, cls = Source("rx"), Number("num", next=Shared("next", "uint64_t", 1)), Classify("cls")
    get, put = Get("get", spin=spin), Put("put", spin=spin)
    cnt, out = Count("cnt", counts=Shared("counts", "uint64_t", KEYS)), Sink("tx")
    src >> num >> cls
    cls["count"] >> cnt
    cls["get"] >> get >> out
    cls["put"] >> put >> out
    p.segment("rx", [src, num, cls], device="nic", cores=[0])
    p.segment("app", [get, put, cnt, out], device="host", cores=[0, 1])
    p.queue("rx", "app", steer="key")
    return p
