"""The key-value store case study (Floem's memcached-compatible store): the C server and
load generator (`tools`), and the interoperability check against a real memcached
(`interop`).

The request path is C: runtime/src/mcproto.c (memcached binary / text / UDP framing),
runtime/src/kvstore.c (the host store), runtime/src/kvexec.c (requests against the
store), runtime/bench/kvs_server.c and runtime/bench/kvs_loadgen.c.
"""

from offlow.kvs.interop import Difference, InteropResult, compare
from offlow.kvs.tools import (
    build_loadgen,
    build_server,
    free_port,
    kvs_server,
    memcached,
    run_loadgen,
    setup_memaslap,
    setup_memcached,
)

__all__ = [
    "Difference",
    "InteropResult",
    "build_loadgen",
    "build_server",
    "compare",
    "free_port",
    "kvs_server",
    "memcached",
    "run_loadgen",
    "setup_memaslap",
    "setup_memcached",
]
