"""Key-value store elements: memcached's binary and text protocols over UDP (with the
memcached frame header), served from a hash table that lives in the memory of the
device running KvServe (runtime/lib/kvs/include/offlow/kvs_pkt.h, kvstore.h)."""

from __future__ import annotations

from offlow.dsl import CacheOps, Element, Port, Table

# The NIC cache of memcached requests (runtime/lib/kvs/include/offlow/kvcache.h), for
# Program.cache(name, around=KvServe(...), ops=MEMCACHED_CACHE): a datagram holding one
# GET, SET or DELETE is cached, anything else goes through (the keys it names are
# written back first). Made packets (write-backs) are steered by `kv_hash`, as KeyHash
# sets it; KvServe's `kv_expiring` keeps replies whose item expires out of the cache,
# and made packets carry `kv_from_cache`, so that the store keeps the CAS a write-back
# carries (the one the cache gave clients). When the run stops, write-back entries
# still written are written back (ofl_kvc_finish) and counted in the stats file.
MEMCACHED_CACHE = CacheOps(
    ctype="struct ofl_kvc", open_fn="ofl_kvc_open_opts", close_fn="ofl_kvc_destroy",
    request_fn="ofl_kvc_request", reply_fn="ofl_kvc_reply",
    args="state->l3_off, state->l4_off",
    reply_args="state->l3_off, state->l4_off, state->kv_expiring", steer="kv_hash",
    steer_expr="(uint32_t)(hash >> 32)", internal="OFL_KVC_INTERNAL", made="kv_from_cache",
    source="memcached NIC cache (kvcache.c), empty at start-up",
    # kvcache.h's OFL_KVC_WAYS_MAX, OFL_KVC_ENTRIES_MAX, OFL_KVC_VALUE_MAX (a test
    # compares them)
    limits=(("ways", 1, 64), ("entries", 1, 1 << 30), ("value_max", 1, 1024)),
    stats_fn="ofl_kvc_stats_json", finish_fn="ofl_kvc_finish", includes=("offlow/kvcache.h",),
    keys=("entries", "eviction", "policy", "value_max", "ways"))


def kv_store(name: str, capacity: int = 1_000_000, value_max: int = 1 << 20) -> Table:
    """A memcached-compatible store: `capacity` items, CLOCK eviction, CAS; run-time
    options NAME.capacity=, NAME.mem= (bytes), NAME.value_max= (memcached's -I: 1 MiB by
    default), NAME.tcp_threads=. It serves memcached over TCP itself when the run has a
    TCP port (offlow run --tcp): runtime/lib/kvs/include/offlow/kvs_table.h."""
    return Table(name, "struct ofl_kvs", "ofl_kvs_open_opts", "ofl_kvs_close",
                 options=(("capacity", str(capacity)), ("value_max", str(value_max))),
                 source="memcached-compatible hash table (kvstore.c), empty at start-up",
                 stats_fn="ofl_kvs_stats_json", tcp=True, includes=("offlow/kvs_table.h",),
                 # (tcp_fd= and tcp_conns= are the runner's own: --tcp, --tcp-max-conns)
                 keys=("capacity", "mem", "tcp_threads", "value_max"))


class KeyHash(Element):
    """The store's hash of the first key in a memcached UDP datagram (0 for requests
    without a key, and for what is not a request: the store answers those); non-UDP
    packets are dropped."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"kv_hash": "uint32_t", "kv_spans": "uint8_t"}
    work = "hash"
    field_docs = {"kv_hash": "the upper 32 bits of the store's 64-bit hash of the first key "
                             "(0: no key)",
                  "kv_spans": "1 when the queue steering by kv_hash is spread over devices "
                              "and the datagram names a key another device holds (a "
                              "multi-key get): KvServe answers it with an error"}
    drops = {"not_udp": "not a UDP datagram"}
    includes = ("offlow/kvs_pkt.h",)
    body = r"""
    uint64_t h = 0;
    if (state->ip_proto != 17)
        DROP_WHY(not_udp);
    if (ofl_kvs_key_hash(pkt, state->l4_off, &h) < 0)
        h = 0;
    state->kv_hash = (uint32_t)(h >> 32);
    state->kv_spans = 0;
    """
    spread_check = r"""
    state->kv_spans = ofl_kvs_keys_span(pkt, state->l4_off, state->kv_hash, shard_of,
                                        instances) > 0;
    """


class KvServe(Element):
    """Runs the memcached requests of the datagram against `store` and turns the packet
    into the reply (addresses swapped; quiet requests get the frame header alone, as
    memcached sends); datagrams that are not memcached, or end inside their first
    request, are dropped here (counted). `kv_expiring` tells a cache after it that the
    reply holds an item with an expiry time, which it must not keep; `kv_from_cache`
    (set only by a write-back cache around it, on the packets it makes) runs a
    write-back as a trusted writer's: the item keeps the CAS the cache gave it. The
    body clears it once used, which also makes it a field it writes."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("store",)
    fields = {"kv_expiring": "uint8_t", "kv_from_cache": "uint8_t", "kv_spans": "uint8_t"}
    field_docs = {"kv_expiring": "1 when the reply holds an item with an expiry time",
                  "kv_from_cache": "1 on the packets a write-back cache makes (0 on clients' "
                                   "requests); cleared here once used",
                  "kv_spans": "set by KeyHash (a datagram needing several shards): "
                              "answered with an error, not run"}
    drops = {"not_udp": "not a UDP datagram",
             "spans_shards": "a datagram naming keys of several shards (a multi-key get to "
                             "a store spread over devices, KeyHash's kv_spans): answered "
                             "with memcached's SERVER_ERROR (binary: ETMPFAIL), not run",
             "no_reply": "no request to answer (none in the datagram, or it ends inside "
                         "the first), not a memcached datagram, or a reply the packet "
                         "cannot hold"}
    includes = ("offlow/kvs_pkt.h",)
    body = r"""
    int rc;
    if (state->ip_proto != 17)
        DROP_WHY(not_udp);
    if (state->kv_spans) {
        if (ofl_kvs_refuse_span(pkt, state->l3_off, state->l4_off) == 0)
            MAKE(out, pkt);
        DROP_WHY(spans_shards);
    }
    rc = ofl_kvs_reply(store, pkt, state->l3_off, state->l4_off, state->kv_from_cache);
    state->kv_from_cache = 0;
    if (!ofl_kvs_sends(rc))
        DROP_WHY(no_reply);
    state->kv_expiring = rc == OFL_KVS_SEND_EXPIRING;
    """
