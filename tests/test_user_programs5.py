"""The key-value store (examples/kvs.py, the drop-in memcached of docs/kvs.md) and the
router (examples/router.py, docs/router.md) used as a new user uses them from the docs.

The store, served over TCP and UDP by one run: pymemcache with odd sizes (a 250-byte
key, a 0-byte value, a value near the item limit), noreply, cas, incr past 2^64,
expiry, flush_all, many clients at once; and hostile input (a line over the limit, a
data block whose length lies, a binary header with a bogus body length, a non-ASCII
key, a client that leaves in the middle of a value), each answered as Debian's
memcached 1.6.18 answers it (the answers pinned here were read from one) or counted.
The router: a user's own prefix file (comments, blank lines, /0, /32 and /128 routes,
a duplicate, malformed lines) and frames to it, each output checked against a
longest-prefix match over Python's `ipaddress` written here, with docs/router.md's
next-hop rule, never offlow's helpers."""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import dpkt
import pytest

from offlow.report import summarize
from offlow.runner import Run, RunResult
from tests.e2e import ROOT, kvs_over_tcp, offlow_cli, read_frames, run_example

HOST = "127.0.0.1"
HDR = struct.Struct(">BBHBBHIIQ")
ROUTER = ROOT / "examples" / "router.py"


# ---- the store ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def counted() -> dict[str, int]:
    """What the tests that ran on `served` expect its end to count (they add to it:
    with -k or on another worker a test that did not run expects nothing)."""
    return {"dropped": 0, "cut": 0}


@pytest.fixture(scope="module")
def served(counted: dict[str, int]) -> Iterator[Run]:
    seen: dict[str, RunResult] = {}

    def keep(res: RunResult) -> None:
        seen["res"] = res

    with kvs_over_tcp(keep) as r:
        yield r
    res = seen["res"]
    assert res.tcp is not None and res.tcp["oom"] == 0 and res.tcp["open"] == 0
    # each datagram longer than the mtu (below) is a counted drop at the source
    assert (summarize(r.build.plan, res.stats)["sources"]["rx"]["dropped"]
            == counted["dropped"])
    # each client that left in the middle of a value (below) is counted
    assert res.tcp["cut"] >= counted["cut"], res.tcp


def _client(port: int):  # noqa: ANN202 (pymemcache is optional: typed at run time)
    base = pytest.importorskip("pymemcache.client.base")
    return base.Client((HOST, port), default_noreply=False, connect_timeout=5, timeout=10)


def _exchange(port: int, data: bytes, want: int) -> bytes:
    """Send `data`, read until `want` bytes came back or the server closed."""
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(data)
        got = b""
        while len(got) < want:
            chunk = s.recv(65536)
            if not chunk:
                return got + b"<EOF>"
            got += chunk
        return got


def _text(port: int, data: bytes, want: bytes) -> None:
    assert _exchange(port, data, len(want)) == want


def test_odd_sizes_through_pymemcache(served: Run) -> None:
    c = _client(served.tcp_port)
    try:
        key = "k" * 250
        assert c.set(key, b"v250") is True and c.get(key) == b"v250"
        assert c.set("u5:empty", b"") is True and c.get("u5:empty") == b""
        near = bytes(range(256)) * (1024 * 1024 // 256 - 1)  # 1 MiB less 256 bytes
        assert c.set("u5:near", near) is True and c.get("u5:near") == near
        assert c.set("u5:nr", b"quiet", noreply=True) is True
        assert c.get("u5:nr") == b"quiet"
    finally:
        c.close()


def test_cas_incr_past_2_64_expiry_and_flush(served: Run) -> None:
    c = _client(served.tcp_port)
    try:
        c.set("u5:c", b"one")
        value, token = c.gets("u5:c")
        assert value == b"one"
        assert c.cas("u5:c", b"two", token) is True
        assert c.cas("u5:c", b"three", token) is False  # the token is stale now
        assert c.get("u5:c") == b"two"
        c.set("u5:n", str(2**64 - 1).encode())
        assert c.incr("u5:n", 1) == 0  # memcached's 64-bit wrap
        assert c.decr("u5:n", 5) == 0  # floored at 0
        c.set("u5:gone", b"x", expire=-1)
        assert c.get("u5:gone") is None
        assert c.flush_all() is True
        assert c.get("u5:c") is None
    finally:
        c.close()


# memcached 1.6.18's answers to the same bytes (read from Debian's memcached)
MEMCACHED_TEXT = [
    (b"incr u5:wide 18446744073709551616\r\n",
     b"CLIENT_ERROR invalid numeric delta argument\r\n"),
    (b"set u5:num 0 0 1\r\nx\r\nincr u5:num 1\r\n",
     b"STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
    (b"set " + b"k" * 251 + b" 0 0 1\r\nx\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    ("set u5:k\u00e9 0 0 1\r\nx\r\nget u5:k\u00e9\r\n".encode(),
     "STORED\r\nVALUE u5:k\u00e9 0 1\r\nx\r\nEND\r\n".encode()),
    # a data block longer than its length says: the line after it is read as a command
    (b"set u5:lie 0 0 2\r\nabcdef\r\nget u5:lie\r\n",
     b"CLIENT_ERROR bad data chunk\r\nERROR\r\nEND\r\n"),
    (b"\r\n", b"ERROR\r\n"),
]


@pytest.mark.parametrize("ask,want", MEMCACHED_TEXT)
def test_hostile_text_is_answered_as_memcached_answers(served: Run, ask: bytes,
                                                      want: bytes) -> None:
    _text(served.tcp_port, ask, want)


def test_a_text_key_with_a_nul_byte_is_the_documented_difference(served: Run) -> None:
    # docs/kvs.md's known differences: kept whole (memcached ends the token at the NUL)
    _text(served.tcp_port, b"set u5:h\x00x 0 0 1\r\nx\r\nget u5:h\x00x\r\nget u5:h\r\n",
          b"STORED\r\nVALUE u5:h\x00x 0 1\r\nx\r\nEND\r\nEND\r\n")
    assert "a text key may hold a NUL byte" in (ROOT / "docs" / "kvs.md").read_text()


def test_a_line_over_the_limit_is_one_error_then_close(served: Run) -> None:
    want = b"CLIENT_ERROR line too long\r\n<EOF>"
    assert _exchange(served.tcp_port, b"get " + b"x" * 20000, len(want)) == want


def test_a_binary_header_whose_key_outruns_its_body_is_one_error_then_close(
        served: Run) -> None:
    bogus = HDR.pack(0x80, 0x00, 10, 0, 0, 0, 3, 0, 0) + b"abc"
    got = _exchange(served.tcp_port, bogus, 24 + 15 + 5)
    assert got.endswith(b"Unknown command<EOF>") and got[0] == 0x81, got


def test_a_client_that_leaves_mid_value_stores_nothing(served: Run,
                                                       counted: dict[str, int]) -> None:
    with socket.create_connection((HOST, served.tcp_port), timeout=10) as s:
        s.sendall(b"set u5:cut 0 0 100\r\nabc")
    counted["cut"] += 1  # (the store's end counts it: the fixture checks)
    _text(served.tcp_port, b"get u5:cut\r\n", b"END\r\n")


def test_udp_requests_a_bogus_binary_length_and_a_datagram_over_the_mtu(
        served: Run, counted: dict[str, int]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(10)
        s.sendto(struct.pack(">HHHH", 9, 0, 1, 0) + b"set u5:udp 0 0 2\r\nhi\r\nget u5:udp\r\n",
                 (HOST, served.udp_port))
        got = s.recv(2048)
        assert got == (struct.pack(">HHHH", 9, 0, 1, 0)
                       + b"STORED\r\nVALUE u5:udp 0 2\r\nhi\r\nEND\r\n")
        # a bogus binary body length inside a datagram: memcached's Invalid arguments
        s.sendto(struct.pack(">HHHH", 10, 0, 1, 0) + HDR.pack(0x80, 0, 3, 0, 0, 0, 100, 0, 0)
                 + b"abc", (HOST, served.udp_port))
        got = s.recv(2048)
        assert got[:8] == struct.pack(">HHHH", 10, 0, 1, 0) and got.endswith(b"Invalid arguments")
        # a request longer than the mtu (2048 B) less 42 B of headers: dropped, counted
        # (the fixture checks the count); the next request is answered as usual
        big = b"v" * 3000
        s.sendto(struct.pack(">HHHH", 11, 0, 1, 0) + b"set u5:big 0 0 3000\r\n" + big
                 + b"\r\n", (HOST, served.udp_port))
        counted["dropped"] += 1
        s.sendto(struct.pack(">HHHH", 12, 0, 1, 0) + b"get u5:big\r\n", (HOST, served.udp_port))
        assert s.recv(2048) == struct.pack(">HHHH", 12, 0, 1, 0) + b"END\r\n"


def test_many_clients_at_once_each_read_their_own_writes(served: Run) -> None:
    errors: list[str] = []

    def one(n: int) -> None:
        c = _client(served.tcp_port)
        try:
            for i in range(20):
                v = f"{n}:{i}".encode() * (n + 1)
                c.set(f"u5:m{n}", v)
                if c.get(f"u5:m{n}") != v:
                    errors.append(f"client {n} step {i}")
        finally:
            c.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---- the router --------------------------------------------------------------------

MY_ROUTES = """# my routes: comments, blank lines, a default, hosts, a duplicate, junk

0.0.0.0/0
10.0.0.0/8
10.1.0.0/16 , core
10.1.2.3/32
10.1.2.0/24 ; listed twice
10.1.2.0/24
192.168.1.77/24
not-a-prefix
10.0.0.0/33
2001:db8::/32
2001:db8::1/128
2001:db8:0:1::/64 | a column
2001:db8::zz/48
"""
GOOD = ["0.0.0.0/0", "10.0.0.0/8", "10.1.0.0/16", "10.1.2.3/32", "10.1.2.0/24",
        "192.168.1.0/24", "2001:db8::/32", "2001:db8::1/128", "2001:db8:0:1::/64"]


def _hop(net: ipaddress.IPv4Network | ipaddress.IPv6Network, nports: int = 16) -> int:
    """docs/router.md's rule: FNV-1a-32 over the network address, then the length."""
    h = 2166136261
    for b in net.network_address.packed + bytes([net.prefixlen]):
        h = ((h ^ b) * 16777619) % 2**32
    return h % nports + 1


def _lpm(dst: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int:
    nets = [ipaddress.ip_network(p) for p in GOOD]
    best = max((n for n in nets if n.version == dst.version and dst in n),
               key=lambda n: n.prefixlen, default=None)
    return 0 if best is None else _hop(best)


def _frame(dst: str) -> bytes:
    a = ipaddress.ip_address(dst)
    u = dpkt.udp.UDP(sport=1, dport=2, data=b"x" * 20)
    u.ulen = len(u)
    if a.version == 4:
        ip4 = dpkt.ip.IP(src=bytes(4), dst=a.packed, p=17, ttl=64, data=u)
        ip4.len = len(ip4)
        return b"\x04" * 6 + b"\x02" * 6 + b"\x08\x00" + bytes(ip4)
    ip6 = dpkt.ip6.IP6(src=bytes(16), dst=a.packed, nxt=17, hlim=64, data=u)
    ip6.plen = len(u)
    return b"\x04" * 6 + b"\x02" * 6 + b"\x86\xdd" + bytes(ip6)


DESTS = ["10.1.2.3", "10.1.2.4", "10.1.3.1", "10.9.9.9", "192.168.1.1", "8.8.8.8",
         "0.0.0.1", "255.255.255.255", "2001:db8::1", "2001:db8::2", "2001:db8:0:1::5",
         "2001:db9::1", "::1"]


def test_the_router_on_my_prefix_file_matches_ipaddress(tmp_path: Path) -> None:
    routes, pcap, out = tmp_path / "routes.txt", tmp_path / "in.pcap", tmp_path / "out.pcap"
    routes.write_text(MY_ROUTES)
    with open(pcap, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for k, d in enumerate(DESTS):
            w.writepkt(_frame(d), ts=k * 1e-3)
    s = run_example(program=ROUTER, input=pcap, output=out,
                    opts=(f"routes4.path={routes}", f"routes6.path={routes}"))
    assert s["ok"], s["errors"]
    want = {"kind": "lpm", "path": str(routes), "lines": 15, "not_prefixes": 3,
            "first_not_prefix": 10}
    assert s["tables"] == {"routes4": want, "routes6": want}
    routed = [d for d in DESTS if _lpm(ipaddress.ip_address(d)) != 0]
    got = {}
    for fr in read_frames(out):
        eth = dpkt.ethernet.Ethernet(fr)
        got[str(ipaddress.ip_address(eth.data.dst))] = int.from_bytes(eth.dst[4:6], "big")
    assert got == {d: _lpm(ipaddress.ip_address(d)) for d in routed}
    assert "2001:db9::1" not in got and "::1" not in got  # no IPv6 default: dropped


# ---- the docs, as a user reads them ---------------------------------------------------


def test_the_interop_step_count_in_the_docs_is_the_replays() -> None:
    from offlow.kvs.steps import sequences

    total = sum(len(s.steps) for s in sequences())
    text = (ROOT / "docs" / "kvs.md").read_text()
    assert f"binary with some text and meta over UDP; {total} steps:" in text


def test_the_router_check_sample_in_the_docs_has_the_lines_the_check_prints(
        tmp_path: Path) -> None:
    routes = tmp_path / "routes.txt"
    routes.write_text(MY_ROUTES)
    p = offlow_cli("router", "check", "--prefixes", str(routes), "--random", "100")
    assert p.returncode == 0, p.stderr
    doc = (ROOT / "docs" / "router.md").read_text()
    sample = doc[doc.index("offlow router check: /work/shared/data/"):]
    sample = sample[:sample.index("```")]
    labels = [ln.split(":")[0] for ln in p.stdout.splitlines()]
    assert [ln.split(":")[0] for ln in sample.splitlines()] == labels
    # each line's parts in parentheses name the same things (numbers aside)
    for got, shown in zip(p.stdout.splitlines(), sample.splitlines(), strict=True):
        assert ([w for w in got.split() if w.isalpha()]
                == [w for w in shown.split() if w.isalpha()]), (got, shown)


def test_an_octet_with_a_leading_zero_is_garbage_as_ipaddress_says(tmp_path: Path) -> None:
    # `015` is 13 to inet_aton (octal) and 15 to a decimal reader; Python's ipaddress
    # refuses it. The C reader took it as 15: the readers disagreed and the check failed.
    routes = tmp_path / "routes.txt"
    routes.write_text("11.0.0.0/8\n015.0.0.0/8\n10.01.0.0/16\n14.0.0.0/08\n")
    with pytest.raises(ValueError):
        ipaddress.ip_network("015.0.0.0/8")
    p = offlow_cli("router", "check", "--prefixes", str(routes), "--random", "200")
    assert p.returncode == 0, p.stdout
    assert "prefixes: 2 IPv4 + 0 IPv6, 2 garbage lines (C reader: 2 + 0, 2)" in p.stdout
