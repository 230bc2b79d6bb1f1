"""The key-value store with a NIC cache (examples/kvs_cache.py), both policies: memcached
datagrams in a pcap are answered as memcached answers them, and a concurrent mixed
workload over UDP with a tiny cache (evictions, write-backs) passes the consistency
check: every GET returns the value of the latest SET or DELETE of its key completed
before the GET was sent, or of one running at the same time."""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dpkt
import pytest

from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.kvs.capture import memcached_datagram
from offlow.plan import Plan
from offlow.report import format_summary, summarize
from offlow.runner import Run, RunOptions, RunResult
from tests.e2e import ROOT, read_frames, run_example
from tests.test_kvs_program import DELETE, GET, REQUESTS, SET, binary

KVS_CACHE = ROOT / "examples" / "kvs_cache.py"
POLICIES = ["write_through", "write_back"]


def replies_of(out: Path) -> dict[int, bytes]:
    """Request id -> memcached reply payload (frame header stripped), empty replies kept."""
    replies: dict[int, bytes] = {}
    for fr in read_frames(out):
        udp = dpkt.ethernet.Ethernet(fr).data.data
        rid = struct.unpack("!H", udp.data[:2])[0]
        replies[rid] = replies.get(rid, b"") + udp.data[8:]
    return replies


def status(r: bytes) -> tuple[int, bytes]:
    assert r[0] == 0x81
    st, body_len = struct.unpack("!H", r[6:8])[0], struct.unpack("!I", r[8:12])[0]
    return st, r[24 + r[4]:24 + body_len]


@pytest.mark.parametrize("policy", POLICIES)
def test_datagrams_are_answered_like_memcached(policy: str, tmp_path: Path) -> None:
    capture, out = tmp_path / "req.pcap", tmp_path / "rep.pcap"
    with open(capture, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, payload in enumerate(REQUESTS):
            w.writepkt(memcached_datagram(i, payload), ts=i * 1e-6)
        # A key read twice after one SET: the second GET can be a hit.
        for i, payload in enumerate([binary(SET, b"kiwi", b"green", opaque=20),
                                     binary(GET, b"kiwi", opaque=21),
                                     binary(GET, b"kiwi", opaque=22)]):
            w.writepkt(memcached_datagram(20 + i, payload), ts=1 + i * 1e-6)
    s = run_example([f"cache.policy={policy}"], program=KVS_CACHE, input=capture, output=out)
    assert s["ok"], s["errors"]
    replies = replies_of(out)
    assert status(replies[0]) == (0, b"")
    assert status(replies[1]) == (0, b"red")
    assert status(replies[2])[0] == 0x0001
    assert status(replies[3]) == (0, b"")
    assert status(replies[4])[0] == 0x0001
    assert replies[5] == b"END\r\n"
    assert replies[6] == b"STORED\r\n"
    assert replies[7] == b"VALUE plum 7 4\r\nblue\r\nEND\r\n"
    assert status(replies[8])[0] == 0x0081
    assert status(replies[9]) == (0, b"0.1.0-offlow")
    assert replies[10] == b"" and replies[11] == b""  # quiet: the frame header alone
    assert replies[12] == b"VALUE fig 0 1\r\nf\r\nEND\r\n"
    assert status(replies[20]) == (0, b"")
    assert status(replies[21]) == (0, b"green")
    assert status(replies[22]) == (0, b"green")
    hits, misses, made = paths(s["elements"])
    assert hits + misses == len(REQUESTS) + 3 - s["elements"]["cache_lookup"]["drop"]
    if policy == "write_back":
        # SETs, the DELETE of a written key and the GETs of written keys are answered
        # on the NIC. (Write-through answers GETs only once a SET's reply came back,
        # which a pcap replayed at full speed does not wait for.)
        assert (hits, misses) == (10, 6)


@dataclass
class Op:
    key: int
    kind: str  # "set" | "delete" | "get"
    value: bytes | None  # set: the value; get: what came back (None: not found)
    start: float
    end: float  # inf: no answer (it may or may not have happened)


def client(port: int, seed: int, n: int, keys: int, history: list[Op]) -> None:
    rng = random.Random(seed)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2.0)
    rid = 0
    try:
        for i in range(n):
            rid = (rid + 1) & 0xFFFF
            k = rng.randrange(keys)
            key = b"key-%d" % k
            r = rng.random()
            if r < 0.35:
                size = 300 if rng.random() < 0.05 else rng.randrange(1, 60)
                value = (b"%d.%d." % (seed, i) * 64)[:size]
                op = Op(k, "set", value, 0.0, 0.0)
                req = binary(SET, key, value, opaque=i)
            elif r < 0.45:
                op = Op(k, "delete", None, 0.0, 0.0)
                req = binary(DELETE, key, opaque=i)
            else:
                op = Op(k, "get", None, 0.0, 0.0)
                req = binary(GET, key, opaque=i)
            op.start = time.monotonic()
            s.sendto(struct.pack("!HHHH", rid, 0, 1, 0) + req, ("127.0.0.1", port))
            try:
                while True:
                    data, _ = s.recvfrom(4096)
                    if struct.unpack("!H", data[:2])[0] == rid and len(data) > 8:
                        break
            except TimeoutError:
                op.end = float("inf")
                if op.kind != "get":
                    history.append(op)
                continue
            op.end = time.monotonic()
            st, value = status(data[8:])
            if op.kind == "get":
                assert st in (0, 1), f"GET status {st:#x}"
                op.value = value if st == 0 else None
            else:
                assert st == 0 or (op.kind == "delete" and st == 1), f"{op.kind} status {st:#x}"
            history.append(op)
    finally:
        s.close()


def check_history(history: list[Op]) -> int:
    """Every GET returns a value some write may have left at that moment: the last
    writes of its key completed before it started (those no later completed write
    follows), writes running at the same time, or nothing before any write. Returns
    the number of GETs checked; raises AssertionError naming the first violation."""
    writes: dict[int, list[Op]] = {}
    for op in history:
        if op.kind != "get":
            writes.setdefault(op.key, []).append(op)
    checked = 0
    for g in (op for op in history if op.kind == "get"):
        allowed: set[bytes | None] = set()
        ws = writes.get(g.key, [])
        done = [w for w in ws if w.end < g.start]
        if not any(True for _ in done):
            allowed.add(None)
        for w in done:
            if not any(w2.start > w.end and w2.end < g.start for w2 in done):
                allowed.add(w.value)
        for w in ws:
            if w.start < g.end and w.end > g.start:
                allowed.add(w.value)
        assert g.value in allowed, (
            f"GET key-{g.key} at {g.start:.6f}..{g.end:.6f} returned {g.value!r}; allowed "
            f"{sorted(map(repr, allowed))}")
        checked += 1
    return checked


@pytest.mark.parametrize("policy", POLICIES)
def test_concurrent_clients_see_the_latest_completed_write(policy: str) -> None:
    prog = load_program(KVS_CACHE, [f"cache.policy={policy}", "cache.entries=16",
                                    "cache.ways=4"])
    b = build(prog, werror=True)
    r = Run(b, RunOptions(udp_port=0, timeout=120))
    r.start()
    histories: list[list[Op]] = [[] for _ in range(4)]
    try:
        threads = [threading.Thread(target=client, args=(r.udp_port, t, 700, 24, histories[t]))
                   for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        r.stop()
        res = r.wait()
    assert res.ok, res.errors
    history = [op for h in histories for op in h]
    assert len(history) > 2000, "most requests must be answered"
    assert check_history(history) > 1000
    summary = summarize(b.plan, res.stats)
    el = summary["elements"]
    hits, misses, made = paths(el)
    assert hits > 0 and misses > 0
    # Write-back: the tiny cache evicted written entries, which went to the store, and
    # the update element consumed the store's answer to each (not counted as drops).
    assert (made > 0) == (policy == "write_back")
    assert el["cache_update"]["consumed"] == made
    assert el["cache_update"]["drop"] == 0
    # offlow run's table of packets that went no further shows them as consumed.
    rows = [ln.split() for ln in format_summary(summary).splitlines()]
    want = ["cache_update", "consumed", str(made)]
    assert (want in rows) == (policy == "write_back")
    # the lookup counted the packets it made, and every packet is accounted for
    a = summary["accounting"]
    assert (a["made"], a["unaccounted"]) == (made, 0)
    assert el["cache_lookup"]["made"] == made


def paths(el: dict[str, dict[str, int]]) -> tuple[int, int, int]:
    """Requests answered on the NIC, requests sent on to the store, and packets the
    cache made (write-backs), from the element counters."""
    up = el["cache_update"]
    replies = up["in"] - up["drop"] - up["consumed"]
    hits = el["tx"]["in"] - replies
    misses = el["cache_lookup"]["in"] - el["cache_lookup"]["drop"] - hits
    return hits, misses, el["serve"]["in"] - misses


def test_the_checker_catches_a_stale_read() -> None:
    """The consistency check itself can fail: a GET after a completed SET that returns
    the older value is reported."""
    h = [Op(1, "set", b"a", 0.0, 1.0), Op(1, "set", b"b", 2.0, 3.0),
         Op(1, "get", b"a", 4.0, 5.0)]
    with pytest.raises(AssertionError, match="returned b'a'"):
        check_history(h)
    ok = [Op(1, "set", b"a", 0.0, 1.0), Op(1, "set", b"b", 2.0, 4.5),
          Op(1, "get", b"a", 4.0, 5.0), Op(1, "delete", None, 6.0, 7.0),
          Op(1, "get", None, 8.0, 9.0)]
    assert check_history(ok) == 2


def _reply(s: socket.socket, port: int, rid: int, req: bytes) -> bytes:
    """Send one request datagram; its reply (frame headers stripped, the datagrams of a
    longer one put together in sequence order)."""
    s.sendto(struct.pack("!HHHH", rid, 0, 1, 0) + req, ("127.0.0.1", port))
    parts: dict[int, bytes] = {}
    while True:
        data, _ = s.recvfrom(4096)
        r, seq, count = struct.unpack("!HHH", data[:6])
        if r != rid:
            continue
        parts[seq] = data[8:]
        if len(parts) >= max(count, 1):
            return b"".join(parts[i] for i in sorted(parts))


def _ask(s: socket.socket, port: int, rid: int, req: bytes) -> tuple[int, bytes]:
    return status(_reply(s, port, rid, req))


@dataclass
class Live:
    """The cache program running with a UDP port, a client socket, and (once the
    block ends) the run's result."""
    plan: Plan
    run: Run
    sock: socket.socket
    result: RunResult | None = None

    def ask(self, rid: int, req: bytes) -> tuple[int, bytes]:
        return _ask(self.sock, self.run.udp_port, rid, req)

    def reply(self, rid: int, req: bytes) -> bytes:
        return _reply(self.sock, self.run.udp_port, rid, req)


@contextlib.contextmanager
def live(policy: str) -> Iterator[Live]:
    b = build(load_program(KVS_CACHE, [f"cache.policy={policy}"]), werror=True)
    r = Run(b, RunOptions(udp_port=0, timeout=60))
    r.start()
    lv = Live(b.plan, r, socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    lv.sock.settimeout(5.0)
    try:
        yield lv
    finally:
        lv.sock.close()
        r.stop()
        lv.result = r.wait()


@pytest.mark.parametrize("policy", POLICIES)
def test_an_item_with_an_expiry_is_never_served_from_the_cache(policy: str) -> None:
    """memcached's GET replies carry no expiry, so a cached copy could outlive its item:
    the store marks such replies (KvServe's kv_expiring, set on the host and read by
    the update element on the NIC) and the cache does not keep them. A key without an
    expiry, read the same way, is answered on the NIC."""
    with live(policy) as lv:
        expiring = struct.pack("!BBHBBHIIQII", 0x80, SET, 3, 8, 0, 0, 8 + 3 + 4, 1, 0,
                               7, 3600) + b"eggsoon"
        assert lv.ask(1, expiring) == (0, b"")
        for rid in (2, 3, 4):
            assert lv.ask(rid, binary(GET, b"egg")) == (0, b"soon")
        assert lv.ask(5, binary(SET, b"ham", b"kept")) == (0, b"")
        for rid in (6, 7, 8):
            assert lv.ask(rid, binary(GET, b"ham")) == (0, b"kept")
    assert lv.result is not None and lv.result.ok, lv.result
    el = summarize(lv.plan, lv.result.stats)["elements"]
    hits, misses, _ = paths(el)
    # egg: the SET (an expiry: not cacheable) and its three GETs reach the store. ham:
    # its three GETs are hits; write-through sends its SET on (the store's answer
    # makes the entry valid), write-back answers it on the NIC.
    assert (hits, misses) == ((3, 5) if policy == "write_through" else (4, 4))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_cas_from_the_cache_still_matches_after_the_write_back(policy: str) -> None:
    """Write-back answers a SET on the NIC with a CAS of the cache's. A CAS compare is
    not cacheable: the cache writes the item back ahead of it, and the write-back's
    SETQ carries that CAS, which the store keeps (the made packet's kv_from_cache, set
    on the NIC and read by KvServe on the host). So the compare matches, once; it was
    EXISTS. Write-through: the store's CAS, as memcached."""
    with live(policy) as lv:
        rep = lv.reply(1, binary(SET, b"pear", b"ripe"))
        cas = struct.unpack("!Q", rep[16:24])[0]
        assert status(rep) == (0, b"") and cas != 0
        assert (cas >> 63) == (policy == "write_back")   # the cache's CAS has the top bit
        assert lv.ask(2, binary(SET, b"pear", b"soft", cas=cas)) == (0, b"")
        assert lv.ask(3, binary(SET, b"pear", b"mush", cas=cas))[0] == 0x02
        assert lv.ask(4, binary(GET, b"pear")) == (0, b"soft")
    assert lv.result is not None and lv.result.ok, lv.result


def test_written_entries_are_in_the_store_after_stop() -> None:
    """Write-back keeps SETs on the NIC; when the run stops, what is still written goes
    to the store before its queue closes: the store's item count at exit is the keys
    set, and the report says how many were written back."""
    with live("write_back") as lv:
        for i in range(40):
            assert lv.ask(i + 1, binary(SET, b"wb:%d" % i, b"v%d" % i)) == (0, b"")
    assert lv.result is not None and lv.result.ok, lv.result
    summary = summarize(lv.plan, lv.result.stats)
    store, cache = summary["tables"]["store"], summary["tables"]["cache"]
    assert cache["written_back_at_stop"] == 40 and cache["wb_in_flight_at_stop"] == 0
    assert store["items"] == 40 and store["stores"] == 40
    assert "written_back_at_stop 40" in format_summary(summary)
    assert cache["hits"] == 40 and cache["misses"] == 0


def test_writing_back_more_than_the_rings_hold_at_stop_ends(tmp_path: Path) -> None:
    """The lookup (parse) and update (reply) segments share the NIC's one thread. At the
    end, the lookup writes back every written entry into the queue to the store; the
    store's answers come back to the update segment on that thread. With more written
    entries than both rings hold (rings of 64 here, as the bench's 4096-entry cache
    against rings of 1024 under load), the write-backs wait for room that only the
    update's turns make: they take them while waiting (ofl_assist_...). Before, the
    run hung (`run timed out`); every entry now reaches the store."""
    n, capture, out = 1000, tmp_path / "sets.pcap", tmp_path / "rep.pcap"
    with open(capture, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i in range(n):
            req = binary(SET, b"user:%05d" % i, b"value of %d" % i, opaque=i)
            w.writepkt(memcached_datagram(i, req), ts=i * 1e-6)
    s = run_example(["cache.policy=write_back", "ring_size=64"], program=KVS_CACHE,
                    input=capture, output=out, timeout=30)
    assert s["ok"], s["errors"]
    store, cache = s["tables"]["store"], s["tables"]["cache"]
    assert cache["written_back_at_stop"] == n and cache["wb_in_flight_at_stop"] == 0
    assert store["items"] == n and store["stores"] == n
    assert len(replies_of(out)) == n   # each SET answered on the NIC


def test_write_through_writes_nothing_back_at_stop() -> None:
    with live("write_through") as lv:
        for i in range(10):
            assert lv.ask(i + 1, binary(SET, b"wt:%d" % i, b"v")) == (0, b"")
    assert lv.result is not None and lv.result.ok, lv.result
    tables = summarize(lv.plan, lv.result.stats)["tables"]
    assert tables["cache"]["written_back_at_stop"] == 0 and tables["store"]["items"] == 10


def test_a_multi_key_request_never_passes_a_write_back() -> None:
    """Write-back with the store on two host cores: a multi-get steered by its first
    key's core must not reach the store before the write-back of another of its keys
    (on that key's core). Naming a key whose write-back is on its way, it is answered
    memcached's temporary failure; once the write-back's reply came back, a retry gets
    the written value."""
    b = build(load_program(KVS_CACHE, ["cache.policy=write_back", "store.cores=0,1"]),
              werror=True)
    r = Run(b, RunOptions(udp_port=0, timeout=60))
    r.start()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5.0)
    try:
        keys = [b"mk:%d" % i for i in range(8)]
        for i, k in enumerate(keys):
            assert _ask(s, r.udp_port, i + 1, binary(SET, k, b"val-%d" % i)) == (0, b"")
        multi = b"get " + b" ".join(keys) + b"\r\n"
        first = _reply(s, r.udp_port, 100, multi)
        assert first == b"SERVER_ERROR a key of this request is being written back; retry\r\n"
        want = b"".join(b"VALUE %s 0 %d\r\nval-%d\r\n" % (k, len(b"val-%d" % i), i)
                        for i, k in enumerate(keys)) + b"END\r\n"
        for attempt in range(200):
            got = _reply(s, r.udp_port, 101 + attempt, multi)
            if not got.startswith(b"SERVER_ERROR"):
                break
            time.sleep(0.01)
        assert got == want
    finally:
        s.close()
        r.stop()
        res = r.wait()
    assert res.ok, res.errors
    cache = summarize(b.plan, res.stats)["tables"]["cache"]
    assert cache["refused_multi_key"] >= 1 and cache["wb_in_flight_at_stop"] == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_stats_carries_the_nic_caches_counters(policy: str) -> None:
    """`stats` over UDP through a cache design: the store's counters, with the NIC
    cache's added by its update side (text and binary)."""
    with live(policy) as lv:
        for i in range(5):
            assert lv.ask(i + 1, binary(SET, b"st:%d" % i, b"v")) == (0, b"")
        for i in range(5):
            assert lv.ask(10 + i, binary(GET, b"st:%d" % i)) == (0, b"v")
        text = lv.reply(20, b"stats\r\n")
        lines = dict(ln.split(b" ")[1:3] for ln in text.split(b"\r\n") if ln.startswith(b"STAT"))
        assert text.endswith(b"END\r\n") and int(lines[b"cmd_get"]) >= 0
        hits = int(lines[b"nic_cache_hits"])
        assert hits >= 5 and int(lines[b"nic_cache_misses"]) >= 0
        assert b"nic_cache_writebacks" in lines and b"nic_cache_evictions" in lines
        stat = struct.pack("!BBHBBHIIQ", 0x80, 0x10, 0, 0, 0, 0, 0, 77, 0)
        got = lv.reply(21, stat)
        names = []
        while got:
            kl, bl = struct.unpack("!H", got[2:4])[0], struct.unpack("!I", got[8:12])[0]
            assert got[1] == 0x10 and struct.unpack("!I", got[12:16])[0] == 77
            names.append(got[24 + got[4]:24 + got[4] + kl])
            got = got[24 + bl:]
        assert names[-1] == b"" and b"nic_cache_hits" in names and b"cmd_get" in names
