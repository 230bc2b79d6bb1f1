"""A memcached-compatible key-value store (binary and text protocols over UDP with the
memcached frame header) with a cache on the NIC, Floem's case study.

The program of examples/kvs.py plus a cache around the store: the NIC parses each
request and answers it from its cache when it can; misses go to the store on the host,
steered by key, and its replies come back through the NIC, which fills the cache.
Designs, one setting each:
  NIC cache, write-through (default)   writes go to the store; the NIC keeps a copy
  NIC cache, write-back                --set cache.policy=write_back: writes stay on
                                       the NIC; evicted written entries go to the store

    offlow run examples/kvs_cache.py --udp 11211
"""

from offlow import Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.elements.kvs import MEMCACHED_CACHE, KeyHash, KvServe, kv_store


def program() -> Program:
    p = Program("kvs_cache")
    store = kv_store("store")

    src, eth, ip4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4")
    key, serve, out = KeyHash("key"), KvServe("serve", store=store), Sink("tx")
    ipv6, other = Discard("ipv6"), Discard("non_ip")
    src >> eth
    eth["ipv4"] >> ip4 >> key >> serve >> out
    eth["ipv6"] >> ipv6
    eth["other"] >> other
    p.cache("cache", around=serve, ops=MEMCACHED_CACHE, policy="write_through")

    p.segment("parse", [src, eth, ip4, key, ipv6, other], device="nic", cores=[0])
    p.segment("store", [serve], device="host", cores=[0], steer="kv_hash")
    p.segment("reply", [out], device="nic", cores=[0])
    return p
