"""memcached over TCP for the key-value store program (examples/kvs.py under
`offlow run --tcp`): the store's own TCP threads (runtime/lib/kvs/src/kvs_tcp.c, started by the
table, kvs_table.c) cut each connection into requests and run them against the store.
pymemcache (1 MB values, its default noreply flush_all), the interop replay beside a
real memcached (every command, quiet form and error), memcaslap (text and binary,
verified), a pipelined client checked against a model, the -I-style value limit,
malformed input, 256 connections at once, the connection limit and a slow reader; a
TCP run of a design with a cache in front of the store is refused before it starts.
The same engine serves kvs_server's TCP (tests/test_kvs_interop.py); out of memory
while serving is swept in tests/c/test_oom.c."""

from __future__ import annotations

import random
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.kvs.interop import compare
from offlow.kvs.steps import BLOCK_SKIPPED, sequences
from offlow.kvs.tools import HOST, memcached, setup_memcached
from offlow.runner import Run, RunOptions, RunResult
from tests.e2e import ROOT, kvs_over_tcp
from tests.memaslap import run_verified

KVS = ROOT / "examples" / "kvs.py"
KVS_CACHE = ROOT / "examples" / "kvs_cache.py"
HDR = struct.Struct(">BBHBBHIIQ")


@pytest.fixture(scope="module")
def served() -> Iterator[Run]:
    def tcp_counted(res: RunResult) -> None:
        assert res.tcp is not None and res.tcp["requests"] > 0 and res.tcp["accepted"] > 0
        assert res.tcp["oom"] == 0 and res.tcp["open"] == 0

    with kvs_over_tcp(tcp_counted) as r:
        yield r


def test_a_design_with_a_cache_is_refused_over_tcp() -> None:
    b = build(load_program(KVS_CACHE))
    r = Run(b, RunOptions(tcp_port=0, timeout=60))
    with pytest.raises(OfflowError, match="sits behind the cache `cache`.*serve this design "
                                          "over UDP"):
        r.start()
    assert not r.window.exists() and not r.procs


def test_a_taken_tcp_port_is_a_clear_error_and_leaves_no_window() -> None:
    from offlow.errors import OfflowError

    b = build(load_program(KVS))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((HOST, 0))
        taken.listen(1)
        r = Run(b, RunOptions(tcp_port=taken.getsockname()[1], timeout=60))
        with pytest.raises(OfflowError, match=f"cannot listen on TCP port "
                                              f"{taken.getsockname()[1]} on 127.0.0.1"):
            r.start()
        assert not r.window.exists()


def _client(port: int):  # noqa: ANN202 (pymemcache is optional: typed at run time)
    base = pytest.importorskip("pymemcache.client.base",
                               reason="pymemcache is not installed (pip install pymemcache)")
    return base.Client((HOST, port), default_noreply=False, connect_timeout=5, timeout=10)


def _recv_until(s: socket.socket, want: int) -> bytes:
    got = b""
    while len(got) < want:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _recv_to_eof(s: socket.socket) -> bytes:
    got = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return got
        got += chunk


def _ask(port: int, data: bytes, want: bytes) -> None:
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(data)
        assert _recv_until(s, len(want)) == want


# ---- against the program ------------------------------------------------------------


def test_pymemcache_over_tcp(served: Run) -> None:
    assert served.tcp_port and served.udp_port and served.tcp_port != 0
    c = _client(served.tcp_port)
    try:
        assert c.get("tcp:absent") is None
        assert c.set("tcp:a", b"alpha") is True
        assert c.get("tcp:a") == b"alpha"
        assert c.set("tcp:a", b"alpha-2") is True
        assert c.set("tcp:b", b"beta", expire=3600) is True
        value = bytes(range(256)) * 3 + bytes(232)   # 1000 bytes
        assert c.set("tcp:k1000", value) is True
        assert c.get("tcp:k1000") == value
        assert c.get_many(["tcp:a", "tcp:b", "tcp:absent"]) == {"tcp:a": b"alpha-2",
                                                                "tcp:b": b"beta"}
        assert c.add("tcp:a", b"x") is False
        assert c.replace("tcp:c", b"x") is False
        v, cas = c.gets("tcp:a")
        assert v == b"alpha-2"
        assert c.cas("tcp:a", b"alpha-3", cas) is True
        assert c.cas("tcp:a", b"stale", cas) is False
        c.set("tcp:q", b"quiet", noreply=True)   # no reply: the next request still works
        assert c.get("tcp:q") == b"quiet"
        assert c.delete("tcp:a") is True
        assert c.delete("tcp:a") is False
        assert c.get("tcp:a") is None
        assert c.incr("tcp:n", 1) is None
        assert c.set("tcp:n", b"10") is True and c.incr("tcp:n", 5) == 15
        assert c.decr("tcp:n", 20) == 0
        assert c.append("tcp:b", b"-more") is True and c.get("tcp:b") == b"beta-more"
        assert c.prepend("tcp:b", b"pre-") is True and c.get("tcp:b") == b"pre-beta-more"
        assert c.touch("tcp:b", 100) is True and c.touch("tcp:absent", 100) is False
        assert c.version() == b"0.1.0-offlow"
        stats = c.stats()
        assert stats[b"curr_connections"] >= 1 and stats[b"cmd_get"] > 0
    finally:
        c.close()


def test_a_1mb_value_through_pymemcache(served: Run) -> None:
    c = _client(served.tcp_port)
    try:
        value = bytes(random.Random(3).randrange(256) for _ in range(1 << 16)) * 16  # 1 MiB
        assert c.set("tcp:1mb", value) is True
        assert c.get("tcp:1mb") == value
        assert c.get_many(["tcp:1mb", "tcp:absent"]) == {"tcp:1mb": value}
        with pytest.raises(Exception, match="object too large for cache"):
            c.set("tcp:1mb+1", value + b"x")   # memcached's -I: 1 MiB by default
        assert c.get("tcp:1mb+1") is None and c.get("tcp:1mb") == value
    finally:
        c.close()


def test_pymemcaches_default_noreply_flush_all_keeps_the_replies_in_step(served: Run) -> None:
    base = pytest.importorskip("pymemcache.client.base")
    c = base.Client((HOST, served.tcp_port), connect_timeout=5, timeout=10)  # noreply default
    try:
        assert c.set("tcp:f1", b"1", noreply=False) is True
        assert c.flush_all() is True   # "flush_all noreply": no answer comes
        assert c.get("tcp:f1") is None   # the next reply is this get's, not flush's
        assert c.set("tcp:f2", b"2", noreply=False) is True
        assert c.get("tcp:f2") == b"2"
        assert c.flush_all(noreply=False) is True
        assert c.get("tcp:f2") is None
    finally:
        c.close()


def test_a_pipelined_client_is_answered_in_order(served: Run) -> None:
    """2,000 mixed requests written before any reply is read; every reply checked, in
    order, against a model of the store (a Python dict)."""
    rng = random.Random(7)
    model: dict[bytes, bytes] = {}
    reqs, want = [], []
    for _ in range(2000):
        k = b"tcp:p%d" % rng.randrange(50)
        op = rng.choice(["set", "get", "get", "delete", "append", "incr", "multi"])
        if op == "set":
            v = (b"%d" % rng.randrange(10**6) if rng.random() < 0.5
                 else b"v" * rng.randrange(1, 3000))
            reqs.append(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(v), v))
            want.append(b"STORED\r\n")
            model[k] = v
        elif op == "get":
            reqs.append(b"get %s\r\n" % k)
            want.append((b"VALUE %s 0 %d\r\n%s\r\n" % (k, len(model[k]), model[k])
                         if k in model else b"") + b"END\r\n")
        elif op == "multi":
            ks = [b"tcp:p%d" % rng.randrange(50) for _ in range(3)]
            reqs.append(b"get " + b" ".join(ks) + b"\r\n")
            want.append(b"".join(b"VALUE %s 0 %d\r\n%s\r\n" % (x, len(model[x]), model[x])
                                 for x in ks if x in model) + b"END\r\n")
        elif op == "delete":
            reqs.append(b"delete %s\r\n" % k)
            want.append(b"DELETED\r\n" if model.pop(k, None) is not None else b"NOT_FOUND\r\n")
        elif op == "append":
            reqs.append(b"append %s 0 0 1\r\n!\r\n" % k)
            if k in model:
                model[k] += b"!"
            want.append(b"STORED\r\n" if k in model else b"NOT_STORED\r\n")
        else:
            reqs.append(b"incr %s 3\r\n" % k)
            if k not in model:
                want.append(b"NOT_FOUND\r\n")
            elif not model[k].rstrip(b" ").isdigit():
                want.append(b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
            else:
                n = int(model[k]) + 3
                old = model[k]
                model[k] = b"%d" % n if len(b"%d" % n) > len(old) else (b"%d" % n).ljust(len(old))
                want.append(b"%d\r\n" % n)
    blob, expected = b"".join(reqs), b"".join(want)
    with socket.create_connection((HOST, served.tcp_port), timeout=30) as s:
        sender = threading.Thread(target=s.sendall, args=(blob,))
        sender.start()   # the whole stream is written before (and while) replies come
        got = _recv_until(s, len(expected))
        sender.join(30)
    assert got == expected


def test_the_value_limit_is_an_option(tmp_path: object) -> None:
    """--opt store.value_max=N is memcached's -I: larger values are refused (text and
    binary), the connection goes on."""
    r = Run(build(load_program(KVS)), RunOptions(tcp_port=0, timeout=120,
                                                 opts=("store.value_max=2000",)))
    r.start()
    try:
        _ask(r.tcp_port, b"set a 0 0 2000\r\n" + b"x" * 2000 + b"\r\nset b 0 0 2001\r\n"
             + b"y" * 2001 + b"\r\nget b\r\n",
             b"STORED\r\nSERVER_ERROR object too large for cache\r\nEND\r\n")
        ex = struct.pack(">II", 0, 0)
        big = HDR.pack(0x80, 0x01, 1, 8, 0, 0, 8 + 1 + 2001, 0x77, 0) + ex + b"c" + b"v" * 2001
        noop = HDR.pack(0x80, 0x0A, 0, 0, 0, 0, 0, 5, 0)
        with socket.create_connection((HOST, r.tcp_port), timeout=10) as s:
            s.sendall(big + noop)
            e2big = HDR.size + len(b"Too large.")
            data = _recv_until(s, e2big + 24)
        h = HDR.unpack(data[:24])
        assert (h[0], h[1], h[5], h[7]) == (0x81, 0x01, 0x0003, 0x77)   # E2BIG, opaque kept
        assert HDR.unpack(data[e2big:e2big + 24])[7] == 5 and len(data) == e2big + 24
    finally:
        r.stop()
        assert r.wait().ok


def test_connections_over_the_limit_are_closed_at_once() -> None:
    r = Run(build(load_program(KVS)), RunOptions(tcp_port=0, timeout=120, tcp_max_conns=4))
    r.start()
    socks = []
    try:
        socks = [socket.create_connection((HOST, r.tcp_port), timeout=10) for _ in range(4)]
        for s in socks:
            s.sendall(b"get k\r\n")
            assert _recv_until(s, 5) == b"END\r\n"
        with socket.create_connection((HOST, r.tcp_port), timeout=10) as extra:
            assert _recv_to_eof(extra) == b""   # closed at once
        socks[0].sendall(b"version\r\n")   # the others are still served
        assert _recv_until(socks[0], 21) == b"VERSION 0.1.0-offlow\r\n"
    finally:
        for s in socks:
            s.close()
        r.stop()
        res = r.wait()
    assert res.ok and res.tcp is not None and res.tcp["refused"] == 1


def test_binary_quiet_requests_over_tcp(served: Run) -> None:
    """GETQ misses and SETQ say nothing; the NOOP behind them answers in order."""
    key = b"tcp:bq"
    ex = struct.pack(">II", 0, 0)
    setq = HDR.pack(0x80, 0x11, len(key), 8, 0, 0, 8 + len(key) + 2, 1, 0) + ex + key + b"vv"
    getq_miss = HDR.pack(0x80, 0x09, 6, 0, 0, 0, 6, 2, 0) + b"tcp:no"
    getk = HDR.pack(0x80, 0x0C, len(key), 0, 0, 0, len(key), 3, 0) + key
    noop = HDR.pack(0x80, 0x0A, 0, 0, 0, 0, 0, 4, 0)
    with socket.create_connection((HOST, served.tcp_port), timeout=10) as s:
        s.sendall(setq + getq_miss + getk + noop)
        first = _recv_until(s, 24)
        body = HDR.unpack(first[:24])[6]
        rest = _recv_until(s, body + 24 - (len(first) - 24))
        data = first + rest
    h1 = HDR.unpack(data[:24])
    assert (h1[1], h1[5], h1[7]) == (0x0C, 0, 3)   # GETK hit, opaque 3
    assert data[24 + 4:24 + h1[6]] == key + b"vv"
    h2 = HDR.unpack(data[24 + h1[6]:48 + h1[6]])
    assert (h2[1], h2[7]) == (0x0A, 4) and len(data) == 48 + h1[6]


def test_interop_replay_over_tcp_matches_memcached(served: Run) -> None:
    path, why = setup_memcached()
    if not path:
        pytest.skip(f"memcached unavailable: {why}")
    tcp = [s for s in sequences() if s.transport == "tcp"]
    with memcached(threads=1) as theirs:
        result = compare(theirs.port, served.tcp_port, tcp)
    assert result.ok, result.report()
    assert all(d.known == BLOCK_SKIPPED for d in result.documented), result.report()
    assert result.steps > 180 and result.answered > 170, result.report()


@pytest.mark.parametrize("mode", [[], ["-B"]], ids=["text", "binary"])
def test_memcaslap_over_tcp_verifies(mode: list[str], served: Run) -> None:
    assert served.tcp_port is not None
    run_verified(served.tcp_port, mode, 2, ("verify_failed", "verify_misses", "get_misses"),
                 120)


def test_a_line_longer_than_the_limit_closes(served: Run) -> None:
    with socket.create_connection((HOST, served.tcp_port), timeout=10) as s:
        s.sendall(b"set k" + b"k" * 20000 + b" 0 0 1\r\n")
        assert _recv_to_eof(s) == b"CLIENT_ERROR line too long\r\n"


def test_malformed_input_is_answered_without_harm(served: Run) -> None:
    port = served.tcp_port
    rng = random.Random(11)
    for i in range(40):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600)))
        if i % 3 == 0:
            blob = b"\x80" + blob
        with socket.create_connection((HOST, port), timeout=10) as s:
            s.sendall(blob)
            s.shutdown(socket.SHUT_WR)
            _recv_to_eof(s)   # answered as far as it goes, then closed: no hang
    # a truncated request, then close (both ways, and with a reset)
    for linger in (False, True):
        for _ in range(10):
            s = socket.create_connection((HOST, port), timeout=10)
            s.sendall(b"set tcp:trunc 0 0 100\r\nonly part")
            if linger:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
    # a request, and the connection gone before its reply
    for _ in range(20):
        s = socket.create_connection((HOST, port), timeout=10)
        s.sendall(b"get tcp:a\r\n")
        s.close()
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(b"set tcp:trunc 0 0 3\r\nabc\r\nbogus\r\nquit\r\n")
        assert _recv_to_eof(s) == b"STORED\r\nERROR\r\n"
    _ask(port, b"get tcp:trunc\r\n", b"VALUE tcp:trunc 0 3\r\nabc\r\nEND\r\n")


def test_256_connections_at_once(served: Run) -> None:
    n = 256
    socks = [socket.create_connection((HOST, served.tcp_port), timeout=30) for _ in range(n)]
    try:
        for i, s in enumerate(socks):
            v = b"%d" % (i * 7919)
            s.sendall(b"set tcp:c%d 0 0 %d\r\n%s\r\nget tcp:c%d\r\n" % (i, len(v), v, i))
        for i, s in enumerate(socks):
            v = b"%d" % (i * 7919)
            want = b"STORED\r\nVALUE tcp:c%d 0 %d\r\n%s\r\nEND\r\n" % (i, len(v), v)
            assert _recv_until(s, len(want)) == want
    finally:
        for s in socks:
            s.close()


def test_slow_reader_holds_up_only_itself(served: Run) -> None:
    port = served.tcp_port
    value = b"s" * 1000
    _ask(port, b"set tcp:slow 0 0 1000\r\n" + value + b"\r\n", b"STORED\r\n")
    one = b"VALUE tcp:slow 0 1000\r\n" + value + b"\r\nEND\r\n"
    # 8 MB of replies the reader does not read for a while: more than the kernel
    # buffers on loopback (the store's send buffer grows to a few MB), so the store
    # holds the rest. (A small SO_RCVBUF would force that with less, but then the
    # reader drains it at a few tens of KB/s.)
    count = 8000
    slow = socket.create_connection((HOST, port), timeout=30)
    try:
        sender = threading.Thread(target=slow.sendall, args=(b"get tcp:slow\r\n" * count,))
        sender.start()
        _ask(port, b"get tcp:slow\r\n", one)   # others are served meanwhile
        got = _recv_until(slow, len(one) * count)
        sender.join(30)
        assert got == one * count
    finally:
        slow.close()


# ---- UDP replies longer than a datagram ----------------------------------------------

UDP_HDR = struct.Struct(">HHHH")


def _udp_ask(port: int, rid: int, payload: bytes) -> tuple[bytes, list[tuple[int, int]]]:
    """One request datagram; its reply reassembled from its datagrams in sequence order
    (as a client does), and the (seq, count) of each datagram as it came."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(UDP_HDR.pack(rid, 0, 1, 0) + payload, (HOST, port))
        parts: dict[int, bytes] = {}
        seen: list[tuple[int, int]] = []
        while True:
            d = s.recv(65536)
            r, seq, count, _ = UDP_HDR.unpack_from(d)
            assert r == rid and len(d) <= 1400
            seen.append((seq, count))
            parts[seq] = d[UDP_HDR.size:]
            if len(parts) == max(count, 1):
                return b"".join(parts[i] for i in sorted(parts)), seen


def test_a_udp_reply_spans_several_datagrams(served: Run) -> None:
    """A reply longer than 1400 bytes comes in memcached's datagrams (frame header:
    request id, sequence, count); a client reassembles them. Set over TCP, read over
    UDP: text and binary, one value and a multi-get."""
    assert served.udp_port and served.tcp_port
    v1, v2 = bytes(range(256)) * 7, b"q" * 50   # 1792 and 50 bytes
    _ask(served.tcp_port, b"set udp:a 1 0 %d\r\n%s\r\nset udp:b 2 0 %d\r\n%s\r\n"
         % (len(v1), v1, len(v2), v2), b"STORED\r\nSTORED\r\n")
    got, seen = _udp_ask(served.udp_port, 0x4242, b"get udp:a\r\n")
    assert got == b"VALUE udp:a 1 %d\r\n%s\r\nEND\r\n" % (len(v1), v1)
    assert sorted(seen) == [(0, 2), (1, 2)]
    key = b"udp:a"
    get = HDR.pack(0x80, 0x0C, len(key), 0, 0, 0, len(key), 77, 0) + key   # GETK
    got, seen = _udp_ask(served.udp_port, 0x4343, get)
    h = HDR.unpack(got[:24])
    assert (h[1], h[5], h[7]) == (0x0C, 0, 77) and got[24 + 4:] == key + v1
    assert len(seen) == 2
    got, _ = _udp_ask(served.udp_port, 0x4444, b"gets udp:b udp:a\r\n")
    assert got.startswith(b"VALUE udp:b 2 50 ") and got.endswith(v1 + b"\r\nEND\r\n")
    # longer than the packet (the program's mtu, 2048 bytes): memcached's answer
    big = b"z" * 5000
    _ask(served.tcp_port, b"set udp:big 0 0 5000\r\n" + big + b"\r\n", b"STORED\r\n")
    got, seen = _udp_ask(served.udp_port, 0x4545, b"get udp:big\r\n")
    assert got == b"SERVER_ERROR out of memory writing get response\r\n" and seen == [(0, 1)]


def test_a_larger_mtu_carries_longer_udp_replies() -> None:
    r = Run(build(load_program(KVS, ["mtu=9016"])), RunOptions(udp_port=0, timeout=120))
    r.start()
    try:
        assert r.udp_port
        v = bytes(range(200)) * 40   # 8000 bytes: six datagrams
        got, _ = _udp_ask(r.udp_port, 1, b"set u:8k 0 0 %d\r\n%s\r\n" % (len(v), v))
        assert got == b"STORED\r\n"
        got, seen = _udp_ask(r.udp_port, 2, b"get u:8k\r\n")
        assert got == b"VALUE u:8k 0 8000\r\n%s\r\nEND\r\n" % v
        assert sorted(seen) == [(i, 6) for i in range(6)]
    finally:
        r.stop()
        assert r.wait().ok
