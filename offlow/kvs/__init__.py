"""The key-value store case study (Floem's memcached-compatible store): the C server and
load generator (`offlow.kvs.tools`), the interoperability check against a real
memcached (`offlow.kvs.interop`, also `python -m offlow.kvs.interop`) and a quick
side-by-side with memcached (`python -m offlow.kvs.quick`).

The request path is C: runtime/lib/kvs/src/mcproto.c (memcached binary / text / UDP framing),
runtime/lib/kvs/src/kvstore.c (the host store), runtime/lib/kvs/src/kvexec.c (requests against the
store), runtime/lib/kvs/tools/kvs_server.c and runtime/lib/kvs/tools/kvs_loadgen.c; docs/kvs.md
describes them.
"""
