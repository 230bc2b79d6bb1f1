"""memcached over TCP for the key-value store program (examples/kvs.py under
`offlow run --tcp`): the gateway (runtime/src/tcp_gw.c) cuts each connection into
requests, sends each as one datagram to the program's UDP port and writes the replies
back. pymemcache, the interop replay beside a real memcached, memcaslap (text and
binary, verified), malformed input, 256 connections at once and a slow reader against
the program; the gateway alone against scripted UDP servers (reassembly out of order,
stray datagrams, a server that never answers) and kvs_server (a 100 KB reply in ~75
datagrams); the framing's C unit test (tests/c/test_tcp_gw.c) plain and under
ASan+UBSan."""

from __future__ import annotations

import random
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offlow.build import build
from offlow.cli import load_program
from offlow.kvs.interop import compare, sequences
from offlow.kvs.tools import HOST, kvs_server, memcached, setup_memcached
from offlow.runner import Run, RunOptions, build_tcp_gateway
from tests.ctools import RUNTIME, SANITIZE, build_c, run_c
from tests.e2e import ROOT
from tests.memaslap import run_verified

KVS = ROOT / "examples" / "kvs.py"
HDR = struct.Struct(">BBHBBHIIQ")
UDP_HDR = struct.Struct(">HHHH")

# Steps of the interop replay (binary and text over TCP) where ours answers otherwise
# than memcached, and why: a request must fit one memcached datagram (1392 bytes after
# the frame header) to reach the program, and the program's store keeps values of at
# most 1400 bytes (kv_store's value_max).
TCP_KNOWN = {
    ("binary-tcp", "100 KB value"): "longer than a datagram: E2BIG from the gateway",
    ("binary-tcp", "get 100 KB value"): "so it was not stored: a miss",
    # CAS values are renumbered by first appearance: memcached's stored 100 KB value
    # took a number, so the next new CAS is one higher there (the bytes are otherwise equal)
    ("binary-tcp", "key of 250 bytes"): "CAS numbering one behind after the refused value",
    ("binary-tcp", "getk key of 250 bytes"): "CAS numbering one behind after the refused value",
}


@pytest.fixture(scope="module")
def served() -> Iterator[Run]:
    r = Run(build(load_program(KVS)), RunOptions(tcp_port=0, timeout=600))
    r.start()
    try:
        yield r
    finally:
        r.stop()
        res = r.wait()
        assert res.ok, res.errors
        assert res.tcp is not None and res.tcp["requests"] > 0
        assert res.tcp["requests"] == res.tcp["replies"] + res.tcp["timeouts"]


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
        assert c.version() == b"0.1.0-offlow"
    finally:
        c.close()


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
    assert not result.timed_out, result.report()
    found = {(d.sequence, d.step) for d in result.differences}
    assert found == set(TCP_KNOWN), result.report()
    assert result.steps > 90 and result.answered > 90, result.report()


@pytest.mark.parametrize("mode", [[], ["-B"]], ids=["text", "binary"])
def test_memcaslap_over_tcp_verifies(mode: list[str], served: Run) -> None:
    assert served.tcp_port is not None
    run_verified(served.tcp_port, mode, 2, ("verify_failed", "verify_misses", "get_misses"),
                 120)


def test_oversized_requests_are_refused_and_the_connection_goes_on(served: Run) -> None:
    port = served.tcp_port
    ex = struct.pack(">II", 0, 0)
    big = HDR.pack(0x80, 0x01, 3, 8, 0, 0, 8 + 3 + 5000, 0x77, 0) + ex + b"big" + b"v" * 5000
    noop = HDR.pack(0x80, 0x0A, 0, 0, 0, 0, 0, 5, 0)
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(big + noop)
        e2big = HDR.size + len(b"Too large.")
        data = _recv_until(s, e2big + 24)
    h = HDR.unpack(data[:24])
    assert (h[0], h[1], h[5], h[7]) == (0x81, 0x01, 0x0003, 0x77)   # E2BIG, opaque kept
    assert HDR.unpack(data[e2big:e2big + 24])[7] == 5 and len(data) == e2big + 24
    _ask(port, b"set tcp:big 0 0 3000\r\n" + b"x" * 3000 + b"\r\nget tcp:big\r\n",
         b"SERVER_ERROR object too large for cache\r\nEND\r\n")
    # a value that fits a datagram but not the store (value_max 1400 < 1380 + ...): the
    # program itself refuses it; one that fits both is stored
    _ask(port, b"set tcp:fits 0 0 1300\r\n" + b"y" * 1300 + b"\r\nget tcp:fits\r\n",
         b"STORED\r\nVALUE tcp:fits 0 1300\r\n" + b"y" * 1300 + b"\r\nEND\r\n")
    # a reply longer than a datagram (three 1300-byte values): the program's error
    _ask(port, b"set tcp:f2 0 0 1300\r\n" + b"z" * 1300 + b"\r\nget tcp:fits tcp:f2\r\n",
         b"STORED\r\nSERVER_ERROR out of memory writing get response\r\n")
    # a text line longer than a datagram: memcached's answer, then the close
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(b"get " + b"k" * 3000 + b"\r\n")
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
    count = 3000   # ~3 MB of replies the reader does not read for a while
    slow = socket.create_connection((HOST, port), timeout=30)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sender = threading.Thread(target=slow.sendall, args=(b"get tcp:slow\r\n" * count,))
        sender.start()
        _ask(port, b"get tcp:slow\r\n", one)   # others are served meanwhile
        got = _recv_until(slow, len(one) * count)
        sender.join(30)
        assert got == one * count
    finally:
        slow.close()


# ---- the gateway alone ---------------------------------------------------------------


class Gateway:
    """The gateway binary on a free TCP port, forwarding to UDP `server_port`."""

    def __init__(self, server_port: int, *extra: str, exe: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [str(exe or build_tcp_gateway()), "--port", "0", "--udp-port", str(server_port),
             *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.startswith("ready tcp="), line
        self.port = int(line.split("=")[1])

    def stop(self) -> dict[str, Any]:
        """SIGTERM; the counters it printed."""
        import json

        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        assert self.proc.returncode == 0, out
        return dict(json.loads(out.strip().splitlines()[-1]))


def _scripted_udp(handler: Any) -> tuple[socket.socket, threading.Thread]:
    """A UDP server on a free port calling handler(sock, datagram, addr) until closed."""
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((HOST, 0))

    def loop() -> None:
        while True:
            try:
                d, addr = u.recvfrom(65536)
            except OSError:
                return
            handler(u, d, addr)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return u, t


def test_gateway_reassembles_out_of_order_and_ignores_strays() -> None:
    def handler(u: socket.socket, d: bytes, addr: Any) -> None:
        rid = UDP_HDR.unpack_from(d)[0]
        req = d[8:]
        parts = [b"VALUE k 0 6\r\n", b"abcdef\r\n", b"END\r\n"] if req.startswith(b"get") \
            else [b""]
        u.sendto(UDP_HDR.pack(rid ^ 0x5555, 0, 1, 0) + b"stray", addr)
        if parts == [b""]:
            u.sendto(UDP_HDR.pack(rid, 0, 0, 0), addr)   # header only: an empty reply
            return
        for seq in (2, 0, 0, 1):   # out of order, with a duplicate
            u.sendto(UDP_HDR.pack(rid, seq, 3, 0) + parts[seq], addr)

    u, _ = _scripted_udp(handler)
    gw = Gateway(u.getsockname()[1])
    try:
        _ask(gw.port, b"set k 0 0 1 noreply\r\nx\r\nget k\r\nget k\r\n",
             b"VALUE k 0 6\r\nabcdef\r\nEND\r\n" * 2)
    finally:
        st = gw.stop()
        u.close()
    assert st["requests"] == 3 and st["replies"] == 3 and st["multi_datagram_replies"] == 2
    assert st["stray_datagrams"] >= 3 and st["bad_datagrams"] >= 2   # duplicates


def test_gateway_closes_a_connection_whose_reply_never_comes() -> None:
    u, _ = _scripted_udp(lambda u, d, addr: None)   # never answers
    gw = Gateway(u.getsockname()[1], "--timeout-ms", "300")
    try:
        with socket.create_connection((HOST, gw.port), timeout=10) as s:
            s.sendall(b"get k\r\n")
            assert _recv_to_eof(s) == b""   # closed, not hung
        with socket.create_connection((HOST, gw.port), timeout=10) as s:
            s.sendall(b"bogus\r\n")   # answered by the gateway itself: still served
            assert _recv_until(s, 7) == b"ERROR\r\n"
    finally:
        st = gw.stop()
        u.close()
    assert st["timeouts"] == 1 and st["answered_here"] == 1


def test_gateway_refuses_connections_over_its_limit() -> None:
    u, _ = _scripted_udp(lambda u, d, addr: u.sendto(d[:8] + b"END\r\n", addr))
    gw = Gateway(u.getsockname()[1], "--max-conns", "4")
    socks = []
    try:
        socks = [socket.create_connection((HOST, gw.port), timeout=10) for _ in range(4)]
        for s in socks:
            s.sendall(b"get k\r\n")
            assert _recv_until(s, 5) == b"END\r\n"
        with socket.create_connection((HOST, gw.port), timeout=10) as extra:
            assert _recv_to_eof(extra) == b""   # closed at once
    finally:
        for s in socks:
            s.close()
        st = gw.stop()
        u.close()
    assert st["refused"] == 1 and st["replies"] == 4


def test_gateway_in_front_of_kvs_server_reassembles_a_100kb_reply() -> None:
    value = bytes(range(256)) * 400
    with kvs_server() as ks:
        _ask(ks.port, b"set big 3 0 %d\r\n%s\r\n" % (len(value), value), b"STORED\r\n")
        gw = Gateway(ks.port)
        try:
            want = b"VALUE big 3 %d\r\n%s\r\nEND\r\n" % (len(value), value)
            _ask(gw.port, b"get big\r\n", want)
        finally:
            st = gw.stop()
    assert st["multi_datagram_replies"] == 1 and st["bad_datagrams"] == 0


def test_gateway_is_clean_under_asan_and_ubsan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole gateway (event loop, connections, reassembly) built with the
    sanitizers, against a scripted server: replies in pieces out of order, strays,
    header-only replies; clients sending garbage, truncated requests, closing early
    and past the connection limit. Any bad access, undefined behaviour or leak makes
    it exit non-zero."""
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    monkeypatch.setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    exe = build_tcp_gateway(SANITIZE)

    def handler(u: socket.socket, d: bytes, addr: Any) -> None:
        rid, req = UDP_HDR.unpack_from(d)[0], d[8:]
        u.sendto(UDP_HDR.pack(rid ^ 0x5555, 0, 1, 0) + b"stray", addr)
        if req.startswith(b"get"):
            parts = [b"VALUE k 0 6\r\n", b"abcdef\r\n", b"END\r\n"]
            for seq in (2, 0, 0, 1):   # out of order, with a duplicate
                u.sendto(UDP_HDR.pack(rid, seq, 3, 0) + parts[seq], addr)
        elif not req.startswith(b"delete"):   # a delete gets no reply (timeout)
            u.sendto(UDP_HDR.pack(rid, 0, 0, 0), addr)   # header only: an empty reply

    u, _ = _scripted_udp(handler)
    gw = Gateway(u.getsockname()[1], "--max-conns", "8", "--timeout-ms", "300", exe=exe)
    try:
        _ask(gw.port, b"get k\r\n", b"VALUE k 0 6\r\nabcdef\r\nEND\r\n")
        rng = random.Random(5)
        for i in range(30):
            blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
            with socket.create_connection((HOST, gw.port), timeout=10) as s:
                s.sendall((b"\x80" if i % 3 == 0 else b"") + blob)
                s.shutdown(socket.SHUT_WR)
                _recv_to_eof(s)
        for msg in (b"set k 0 0 100\r\nonly part", b"get k\r\n", b"delete k\r\n"):
            s = socket.create_connection((HOST, gw.port), timeout=10)
            s.sendall(msg)
            s.close()   # gone before the rest of the request, or before its reply
        with socket.create_connection((HOST, gw.port), timeout=10) as s:
            s.sendall(b"delete k\r\n")
            assert _recv_to_eof(s) == b""   # its reply never comes: closed
        socks = [socket.create_connection((HOST, gw.port), timeout=10) for _ in range(12)]
        for s in socks:
            s.close()
    finally:
        st = gw.stop()   # asserts a clean exit (0)
        u.close()
    assert st["multi_datagram_replies"] >= 1 and st["timeouts"] >= 1


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_gateway_framing_c(sanitize: bool, tmp_path: Path) -> None:
    sources = [Path(__file__).parent / "c" / "test_tcp_gw.c",
               *(RUNTIME / "src" / f"{m}.c" for m in ("err", "mcproto", "tcp_gw"))]
    exe = build_c(sources, tmp_path, "test_tcp_gw", sanitize=sanitize, libs=())
    res = run_c(exe, timeout=60)
    assert res.returncode == 0, f"{res.stdout[-20000:]}\n{res.stderr}"
    assert "0 failure(s)" in res.stdout

