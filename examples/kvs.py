"""A memcached-compatible key-value store (binary and text protocols over UDP with the
memcached frame header), Floem's case study.

Designs, one setting each:
  CPU-only (default)     everything on host core 0: both segments share its thread
                         (--set parse.cores=0,1 --set store.cores=0,1 spreads them
                         over two cores, the store steered by key)
  split                  --set parse.device=nic: the NIC parses, hashes the key and
                         steers each request to the host core that owns its key
                         (`steer="kv_hash"`: a key always meets the same core)

    offlow run examples/kvs.py --input requests.pcap --output replies.pcap
"""

from offlow import Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.elements.kvs import KeyHash, KvServe, kv_store


def program() -> Program:
    p = Program("kvs")
    store = kv_store("store")

    src, eth, ip4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4")
    key, serve, out = KeyHash("key"), KvServe("serve", store=store), Sink("tx")
    ipv6, other = Discard("ipv6"), Discard("non_ip")
    src >> eth
    eth["ipv4"] >> ip4 >> key >> serve >> out
    eth["ipv6"] >> ipv6
    eth["other"] >> other

    p.segment("parse", [src, eth, ip4, key, ipv6, other], device="host", cores=[0])
    p.segment("store", [serve, out], device="host", cores=[0], steer="kv_hash")
    return p
