"""The key-value store case study (Floem's memcached-compatible store): the C server and
load generator (`offlow.kvs.tools`), the interoperability check against a real
memcached (`offlow.kvs.interop`, also `python -m offlow.kvs.interop`) and a quick
side-by-side with memcached (`python -m offlow.kvs.quick`).

The request path is C: runtime/src/mcproto.c (memcached binary / text / UDP framing),
runtime/src/kvstore.c (the host store), runtime/src/kvexec.c (requests against the
store), runtime/bench/kvs_server.c and runtime/bench/kvs_loadgen.c; docs/kvs.md
describes them.
"""
