"""A user's key-value store written for scale-out: the host parses and hashes each
request's key, the store segment is spread by that hash over the remote devices the
queue into it names (`--set 'parse->store.devices=remote:a,remote:b'`), and the
replies come back to a segment of their own on the host, whose sink writes them
(a sink in the spread segment would run on every device). Where each instance runs:

    offlow explain examples/kvs_shards.py --set parse->store.devices=remote:a,remote:b

`offlow run` takes the same --set, a `--remote NAME=ADDR:PORT` per device and the
shared secret (docs/remote.md)."""

from offlow import Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.elements.kvs import KeyHash, KvServe, kv_store


def program() -> Program:
    p = Program("kv_shards")
    shard = kv_store("shard")  # each device holds its own: the keys steered to it
    rx, eth, ip4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4")
    key, serve, tx = KeyHash("key"), KvServe("serve", store=shard), Sink("tx")
    v6, other = Discard("v6"), Discard("other")
    rx >> eth
    eth["ipv4"] >> ip4 >> key >> serve >> tx
    eth["ipv6"] >> v6
    eth["other"] >> other
    p.segment("parse", [rx, eth, ip4, key, v6, other], device="host", cores=[0])
    p.segment("store", [serve], device="host", cores=[0])
    # reply on a core of its own: sharing parse's thread, it would not drain the store's
    # replies while parse waits for room towards the store (a cycle through the store)
    p.segment("reply", [tx], device="host", cores=[1])
    p.queue("parse", "store", instances=4, steer="kv_hash")
    return p
