"""A user's memcached request mix as a capture, and the same requests replayed one by
one against a real memcached over UDP: the oracle for the key-value store program's
answers wherever its store runs (tests/test_remote_kvs.py)."""

from __future__ import annotations

import random
import socket
import struct
from pathlib import Path

import dpkt
import pytest

from offlow.kvs.capture import memcached_datagram
from offlow.kvs.tools import HOST, memcached, setup_memcached
from tests.e2e import read_frames

GET, SET, DELETE = 0x00, 0x01, 0x04
FRAME = struct.Struct("!HHHH")  # memcached's UDP frame header: id, seq, count, 0


def _binary(op: int, key: bytes, value: bytes = b"", opaque: int = 0) -> bytes:
    extras = struct.pack("!II", 7, 0) if op == SET else b""
    body = extras + key + value
    return struct.pack("!BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0, len(body),
                       opaque, 0) + body


def request_mix(n: int, keys: int, seed: int) -> list[bytes]:
    """`n` requests over `keys` keys of odd lengths: binary GET/SET/DELETE and text
    get/set/add/replace/append/delete with values of 0..900 bytes (appends of 3 at
    most, so every reply fits one datagram). One key each, no quiet forms and no CAS
    reads: every request has exactly one answer."""
    rng = random.Random(seed)
    names = [b"user:%d/%s" % (k, b"x" * (k % 7)) for k in range(keys)]
    out = []
    for i in range(n):
        key = rng.choice(names)
        value = bytes(rng.randrange(33, 127) for _ in range(rng.choice([0, 3, 40, 900])))
        kind = rng.randrange(9)
        if kind == 0:
            out.append(_binary(SET, key, value, opaque=i))
        elif kind == 1:
            out.append(_binary(GET, key, opaque=i))
        elif kind == 2:
            out.append(_binary(DELETE, key, opaque=i))
        elif kind in (3, 4):
            out.append(b"get " + key + b"\r\n")
        elif kind == 8:
            out.append(b"delete " + key + b"\r\n")
        else:
            verb = {5: b"set", 6: rng.choice([b"add", b"replace"]), 7: b"append"}[kind]
            value = value[:3] if kind == 7 else value  # (a reply stays one datagram)
            out.append(b"%s %s %d 0 %d\r\n%s\r\n" % (verb, key, i % 5, len(value), value))
    return out


def write_capture(path: Path, requests: list[bytes]) -> None:
    """The requests as memcached datagrams, request id = index."""
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, payload in enumerate(requests):
            w.writepkt(memcached_datagram(i, payload), ts=i * 1e-6)


def normalized(reply: bytes) -> bytes:
    """A reply with the CAS of each binary message zeroed (each server numbers its own)."""
    if not reply or reply[0] != 0x81:
        return reply
    out, at = bytearray(reply), 0
    while at + 24 <= len(out) and out[at] == 0x81:
        out[at + 16:at + 24] = bytes(8)
        at += 24 + struct.unpack_from("!I", out, at + 8)[0]
    return bytes(out)


def replies_in(capture: Path) -> dict[int, bytes]:
    """Request id -> the reply's payload (frame headers stripped, datagrams joined)."""
    replies: dict[int, bytes] = {}
    for fr in read_frames(capture):
        udp = dpkt.ethernet.Ethernet(fr).data.data
        rid = FRAME.unpack_from(udp.data)[0]
        replies[rid] = replies.get(rid, b"") + udp.data[FRAME.size:]
    return {rid: normalized(r) for rid, r in replies.items()}


def memcached_replies(port: int, requests: list[bytes]) -> dict[int, bytes]:
    """Each request sent to memcached on HOST:`port` over UDP in turn, its answer
    (every datagram of it) awaited before the next."""
    out: dict[int, bytes] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        for rid, payload in enumerate(requests):
            s.sendto(FRAME.pack(rid, 0, 1, 0) + payload, (HOST, port))
            parts: dict[int, bytes] = {}
            total = 1
            while len(parts) < total:
                data = s.recv(65536)
                got, seq, total, _ = FRAME.unpack_from(data)
                assert got == rid, f"memcached answered request {got} while {rid} was asked"
                parts[seq] = data[FRAME.size:]
            out[rid] = normalized(b"".join(parts[i] for i in range(total)))
    return out


def memcached_answers(requests: list[bytes]) -> dict[int, bytes]:
    """What a real memcached (one thread) answers to `requests` over UDP, request id ->
    reply (memcached_replies); the test is skipped where memcached is unavailable."""
    path, why = setup_memcached()
    if not path:
        pytest.skip(f"memcached unavailable: {why}")
    with memcached(threads=1) as m:
        return memcached_replies(m.port, requests)
