"""Multi-key requests (`get a b c`, a datagram of several binary gets) to a store sharded
over two remote devices (docs/remote.md, "Scale-out"): a request whose keys all fall on
the shard it is steered to is answered in full, as memcached answers it; one that names a
key of the other shard gets memcached's SERVER_ERROR (binary: ETMPFAIL), counted as the
store's `spans_shards` drop, never a partial answer."""

from __future__ import annotations

import random
import socket
import struct
import subprocess
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from offlow.kvs.tools import HOST, memcached, setup_memcached
from offlow.sketch.countmin import M64, fmix64
from tests.kvs_replay import FRAME, memcached_replies, normalized, replies_in, write_capture
from tests.remote_served import Servers
from tests.test_remote import run, secret_file, serve
from tests.test_remote_kvs import SHARDS, SPREAD
from tests.test_remote_kvs_sockets import remote_run  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not Path("/usr/include/ucp/api/ucp.h").exists(),
                                reason="remote: UCX (libucx-dev) is not installed")

INSTANCES, DEVICES = 4, 2  # examples/kvs_shards.py: instance i on device i % 2
REFUSED = b"SERVER_ERROR multi-key request spans shards; use TCP or one key per request\r\n"
GETK, GETKQ, NOOP, SET = 0x0C, 0x0D, 0x0A, 0x01


def instance(key: bytes) -> int:
    """The queue instance `key` is steered to: the store's hash (kvstore.c,
    ofl_kv_hash), its upper 32 bits (KeyHash's kv_hash) modulo the instances."""
    h = 0x9E3779B97F4A7C15 ^ (len(key) * 0x100000001B3 & M64)
    at = 0
    while len(key) - at >= 8:
        w = int.from_bytes(key[at:at + 8], "little") * 0x87C37B91114253D5 & M64
        w = (w << 31 | w >> 33) & M64
        h ^= w * 0x4CF5AD432745937F & M64
        h = (((h << 27 | h >> 37) & M64) * 5 + 0x52DCE729) & M64
        at += 8
    h = fmix64(h ^ fmix64(int.from_bytes(key[at:], "little") ^ 0x2545F4914F6CDD1D))
    return (h >> 32) % INSTANCES


def shard(key: bytes) -> int:
    """The device holding `key`: instance i runs on device i % 2."""
    return instance(key) % DEVICES


def _binary(op: int, key: bytes, value: bytes = b"", opaque: int = 0) -> bytes:
    extras = struct.pack("!II", 3, 0) if op == SET else b""
    body = extras + key + value
    return struct.pack("!BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0, len(body),
                       opaque, 0) + body


def refused_binary(opcode: int, opaque: int) -> bytes:
    text = b"Temporary failure"
    return struct.pack("!BBHBBHIIQ", 0x81, opcode, 0, 0, 0, 0x86, len(text), opaque, 0) + text


def _complete(req: bytes, reply: bytes) -> bool:
    """Has memcached sent all of its answer to `req`? (Over UDP it answers a multi-key
    get, gets, gat or gats with a datagram per key, each numbered 0 of 1: an END per
    get, each binary GETK's answer or the NOOP's, tells the end.)"""
    if req[0] != 0x80:
        gets = sum(line.startswith(b"g") for line in req.split(b"\r\n"))
        return bool(reply) and reply.count(b"END\r\n") >= gets
    if b"\x80" + bytes([NOOP]) in req:
        return b"\x81" + bytes([NOOP]) in reply
    return reply.count(b"\x81" + bytes([GETK])) >= req.count(b"\x80" + bytes([GETK]))


def memcached_udp(reqs: list[bytes]) -> dict[int, bytes]:
    """Each request's answer from a real memcached over UDP, its datagrams joined."""
    path, why = setup_memcached()
    if not path:
        pytest.skip(f"memcached unavailable: {why}")
    out: dict[int, bytes] = {}
    with memcached(threads=1) as m, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        for rid, req in enumerate(reqs):
            s.sendto(FRAME.pack(rid, 0, 1, 0) + req, (HOST, m.port))
            got = b""
            while not got or not _complete(req, got):
                data = s.recv(65536)
                assert FRAME.unpack_from(data)[0] == rid
                got += data[FRAME.size:]
            out[rid] = normalized(got)
    return out


def mix(together: Callable[[bytes], int]) -> tuple[list[bytes], dict[int, bytes]]:
    """Sets of keys of odd lengths (1 to 250 bytes), then multi-key gets over them and a
    missing key, with repeats; the largest ones fill a datagram. The gets answered in
    full name keys of one `together` group (shard, or instance: see the capture test),
    the others keys of both shards. Returns the requests and, for those that name keys
    of both shards, the refusal expected."""
    rng = random.Random(28)
    keys = [b"k", b"user:%d/%s" % (3, b"x" * 3), b"z" * 250, b"session.\xc3\xa9t\xc3\xa9"]
    keys += [b"u%d:%s" % (i, b"y" * (i % 11)) for i in range(60)]
    z = keys[2]  # the longest key memcached takes
    missing = next(k for k in (b"never-set:%d" % i for i in range(99)) if together(k) == 0)
    # groups 0 and 1 (shards 0 and 1, or instances 0 and 1): on different devices
    by = [[k for k in keys if together(k) == g] for g in range(2)]
    assert all(len(b) >= 4 for b in by), "both groups hold keys"
    reqs = [b"set %s %d 0 %d\r\n%s\r\n" % (k, i, i % 5, b"v" * (i % 5))
            for i, k in enumerate(keys)]
    gets: list[list[bytes]] = [
        [by[0][0], by[1][0]], [by[1][1], by[0][1], by[1][1]], [by[0][2]] * 3,
        [*by[0][:4], missing], by[1][:4], [missing, by[1][3]],
        [z, next(k for k in keys if k != z and together(k) == together(z)), z],
        [next(k for k in keys if shard(k) != shard(z)), z]]
    for _ in range(30):  # (a capture: no get of keys of one device but several instances)
        ks = rng.sample(keys, rng.randrange(2, 7))
        if len({together(k) for k in ks}) == 1 or len({shard(k) for k in ks}) > 1:
            gets.append(ks)
    short = [b"s%d" % i for i in range(3000)]  # the most keys one datagram takes
    for g in range(2):
        gets.append([k for k in short if together(k) == g][:1400 // 6])
    gets.append(short[:1400 // 6])
    # gat (exptime 0: the item is kept) answered, or refused; gets and gats (whose CAS
    # each server numbers its own way) refused
    verbs = [(b"get", ks) for ks in gets] + [
        (b"gat 0", [by[0][1], by[0][2], by[0][1]]), (b"gat 0", [by[1][0], by[0][0]]),
        (b"gets", [by[0][0], by[1][0]]), (b"gats 0", [by[1][1], by[0][1]])]
    refused: dict[int, bytes] = {}
    for verb, ks in verbs:
        if len({shard(k) for k in ks}) > 1:
            refused[len(reqs)] = REFUSED
        reqs.append(verb + b" " + b" ".join(ks) + b"\r\n")
    # datagrams of several requests: refused, each request answered with the error (as
    # memcached answers every request of a datagram; a quiet one's error too)
    for a, b in ((by[0][0], by[1][0]), (by[1][1], by[1][2])):
        if shard(a) != shard(b):
            refused[len(reqs)] = refused_binary(GETK, 1) + refused_binary(GETK, 2)
        reqs.append(_binary(GETK, a, opaque=1) + _binary(GETK, b, opaque=2))
    for a, b in ((by[1][3], by[0][3]), (by[0][1], by[0][2])):
        if shard(a) != shard(b):
            refused[len(reqs)] = (refused_binary(GETKQ, 1) + refused_binary(GETKQ, 2)
                                  + refused_binary(NOOP, 3))
        reqs.append(_binary(GETKQ, a, opaque=1) + _binary(GETKQ, b, opaque=2)
                    + _binary(NOOP, b"", opaque=3))
        if len({shard(k) for k in (missing, a, b)}) > 1:
            refused[len(reqs)] = REFUSED * 2  # (the delete is not run either)
        reqs.append(b"delete %s\r\nget %s %s\r\n" % (missing, a, b))
    multi = [i for i, r in enumerate(reqs) if r.startswith(b"g") or r[0] == 0x80]
    assert 0 < len(refused) < len(multi) - 5, "some refused, some multi-key gets answered"
    return reqs, refused


def spans_counted(stats: dict[str, Any]) -> int:
    """The store's spans_shards drops, summed over every core of every device."""
    return sum(c.get("elements", {}).get("serve", {}).get("why", {}).get("spans_shards", 0)
               for dev in stats.values() for c in dev.get("cores", []))


def test_multi_key_gets_over_two_shards_are_answered_or_refused_never_partly(
        remote_run: object) -> None:  # noqa: F811 (the fixture)
    """A UDP client that waits for each answer: keys of one device answered together."""
    reqs, refused = mix(shard)
    expected = memcached_udp(reqs) | refused  # (a refused get changes nothing)
    r = remote_run(["a", "b"], udp_port=0)  # type: ignore[operator]
    got = memcached_replies(r.udp_port, reqs)
    assert got == expected, [(i, got.get(i), expected[i]) for i in expected
                             if got.get(i) != expected[i]][:3]
    r.stop()
    res = r.wait()
    assert res.ok, res.errors
    assert spans_counted(res.stats) == len(refused)


@pytest.mark.parametrize("where", ["loopback", "namespaces"])
def test_a_capture_of_multi_key_gets_is_answered_or_refused_never_partly(
        tmp_path: Path, procs: list[subprocess.Popen[str]], served: Servers,
        where: str) -> None:
    """In a capture the requests do not wait for each other: a get may overtake an earlier
    set of one of its keys queued to another instance of the same device
    (docs/remote.md), so the gets answered name keys of one instance. The shards on
    127.0.0.1 (the module's shared serve-devices), or each in a namespace of its own
    behind a bridge in the host's."""
    from benchmarks.common.netns import star_namespaces

    reqs, refused = mix(instance)
    expected = memcached_udp(reqs) | refused
    capture = tmp_path / "req.pcap"
    write_capture(capture, reqs)
    with ExitStack() as stack:
        if where == "namespaces":
            secret = secret_file(tmp_path)
            host, stores = stack.enter_context(star_namespaces("ofl-mk", 2))
            ports = {n: (addr, serve(procs, secret, addr, ns)[1])
                     for n, (ns, addr) in zip("ab", stores, strict=True)}
        else:
            host, secret = "", served.secret
            ports = {n: ("127.0.0.1", port) for n, port in zip("ab", served.ports(2),
                                                               strict=True)}
        remotes = [x for n, (a, port) in ports.items() for x in ("--remote", f"{n}={a}:{port}")]
        rc, s, err = run(procs, [str(SHARDS), "--input", str(capture), "--output",
                                 str(tmp_path / "out.pcap"), "--set", SPREAD, *remotes,
                                 "--secret-file", str(secret)], host)
    assert rc == 0 and s["ok"], err
    got = replies_in(tmp_path / "out.pcap")
    assert got == expected, [(i, got.get(i), expected[i]) for i in expected
                             if got.get(i) != expected[i]][:3]
    assert s["elements"]["serve"]["why"].get("spans_shards") == len(refused)


def _user_shards(relay: bool) -> object:
    """A user's sharded store: the key hashed in `front`, then (relay) a segment of
    their own before the queue spread over remote:a, remote:b and remote:c."""
    from offlow import Element, Port, Program, Sink, Source
    from offlow.elements import CheckIPv4, Discard, ParseEth
    from offlow.elements.kvs import KeyHash, KvServe, kv_store

    class Mark(Element):
        inputs = (Port("inp", "ip.v4"),)
        outputs = (Port("out", "ip.v4"),)
        body = r"""
        /* the user's own step: only UDP goes on to the store */
        if (state->ip_proto != 17) DROP();
        """

    p = Program("my_shards")
    rx, eth, ip4, h = Source("rx"), ParseEth("eth"), CheckIPv4("v4"), KeyHash("kh")
    mid, kv, out = Mark("mark"), KvServe("kv", store=kv_store("data")), Sink("out")
    junk = Discard("junk")
    rx >> eth
    eth["ipv4"] >> ip4 >> h >> mid >> kv >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    front = [rx, eth, ip4, h, junk] + ([] if relay else [mid])
    p.segment("front", front, device="host", cores=[0])
    if relay:
        p.segment("relay", [mid], device="host", cores=[1])
    p.segment("kvs", [kv], device="host", cores=[0])
    p.segment("back", [out], device="host", cores=[1])
    p.queue("relay" if relay else "front", "kvs", instances=6, steer="kv_hash",
            devices=["remote:a", "remote:b", "remote:c"])
    return p


@pytest.mark.parametrize("relay", [False, True], ids=["hashed_before", "hashed_earlier"])
def test_the_spread_queue_checks_the_keys_where_the_key_was_hashed_earlier(relay: bool) -> None:
    """The check runs in the enqueue of the spread queue, with each instance's device,
    also when the hash was computed a segment before it."""
    from offlow.build import generate, plan_program

    src = generate(plan_program(_user_shards(relay)))  # type: ignore[arg-type]
    host = src["host.c"]
    assert "spread over remote:a, remote:b, remote:c: kh's spread check" in host
    assert "static const uint8_t shard_of[6] = {0, 1, 2, 0, 1, 2};" in host
    assert "ofl_kvs_keys_span(" in host
    assert not any("ofl_kvs_keys_span(" in c for d, c in src.items() if d != "host.c")


def test_a_table_copied_on_each_device_of_a_spread_segment_has_no_control_channel() -> None:
    """A user's per-shard request count (a shared array) beside the store: each device
    holds its own copy, so one control channel would change one copy only (it was served
    by the first device: `offlow ctl` set remote:a's copy and left remote:b's). None is
    made; explain says why; a table of a segment that is not spread keeps its channel."""
    from offlow import Element, Port, Program, Shared, Sink, Source
    from offlow.build import plan_program
    from offlow.elements import CheckIPv4, Discard, ParseEth
    from offlow.elements.kvs import KeyHash, KvServe, kv_store
    from offlow.explain import explain

    class Tally(Element):
        inputs = (Port("inp", "ip.v4"),)
        outputs = (Port("out", "ip.v4"),)
        tables = ("asked",)
        body = "__atomic_fetch_add(&asked[0], 1, __ATOMIC_RELAXED);   /* per shard */"

    def program(devices: list[str]) -> Program:
        p = Program("tallied")
        rx, eth, ip4, h = Source("rx"), ParseEth("eth"), CheckIPv4("v4"), KeyHash("kh")
        t = Tally("tally", asked=Shared("asked", "uint64_t", 1))
        kv, out, junk = KvServe("kv", store=kv_store("data")), Sink("out"), Discard("junk")
        rx >> eth
        eth["ipv4"] >> ip4 >> h >> t >> kv >> out
        eth["ipv6"] >> junk
        eth["other"] >> junk
        p.segment("front", [rx, eth, ip4, h, junk], device="host", cores=[0])
        p.segment("kvs", [t, kv], device="host", cores=[0])
        p.segment("back", [out], device="host", cores=[1])
        p.queue("front", "kvs", instances=4, steer="kv_hash", devices=devices)
        return p

    plan = plan_program(program(["remote:a", "remote:b"]))
    assert "ctl.asked" not in plan.window_channels
    assert ("  asked: none: a copy on each of remote:a, remote:b (its segment is spread over "
            "them); a channel would change one copy only") in explain(plan)
    one = plan_program(program(["remote:a"]))
    assert "ctl.asked" in one.window_channels
