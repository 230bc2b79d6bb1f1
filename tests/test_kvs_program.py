"""The key-value store written as an offlow program (examples/kvs.py): memcached
datagrams in a pcap are answered like memcached answers them, in both designs
(CPU-only, and split with the NIC parsing and steering by key)."""

from __future__ import annotations

import struct
from pathlib import Path

import dpkt
import pytest

from offlow.kvs.capture import memcached_datagram
from tests.e2e import ROOT, read_frames, run_example

KVS = ROOT / "examples" / "kvs.py"
GET, SET, DELETE, GETQ, VERSION = 0x00, 0x01, 0x04, 0x09, 0x0B


def binary(opcode: int, key: bytes = b"", value: bytes = b"", opaque: int = 0,
           cas: int = 0) -> bytes:
    extras = struct.pack("!II", 0, 0) if opcode == SET else b""
    body = extras + key + value
    return struct.pack("!BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, len(body),
                       opaque, cas) + body


REQUESTS = [
    binary(SET, b"apple", b"red", opaque=1),
    binary(GET, b"apple", opaque=2),
    binary(GET, b"pear", opaque=3),
    binary(DELETE, b"apple", opaque=4),
    binary(GET, b"apple", opaque=5),
    b"get apple\r\n",
    b"set plum 7 0 4\r\nblue\r\n",
    b"get plum\r\n",
    binary(0x7E, b"k", opaque=9),        # unknown opcode
    binary(VERSION, opaque=10),
    binary(GETQ, b"pear", opaque=11),    # quiet miss: the frame header alone (count 0)
    b"set fig 0 0 1 noreply\r\nf\r\n",  # noreply: the frame header alone as well
    b"get fig\r\n",
]


@pytest.mark.parametrize("design", [[], ["parse.device=nic"]], ids=["cpu-only", "split"])
def test_memcached_datagrams_are_answered(design: list[str], tmp_path: Path) -> None:
    capture, out = tmp_path / "req.pcap", tmp_path / "rep.pcap"
    with open(capture, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, payload in enumerate(REQUESTS):
            w.writepkt(memcached_datagram(i, payload), ts=i * 1e-6)
        w.writepkt(memcached_datagram(99, b"\x01\x02"), ts=1.0)  # ends inside its request: dropped
    s = run_example(design, program=KVS, input=capture, output=out)
    assert s["ok"], s["errors"]
    replies, headers = {}, {}
    for fr in read_frames(out):
        ip = dpkt.ethernet.Ethernet(fr).data
        assert ip.dst == bytes([10, 0, 0, 2]) and ip.src == bytes([10, 0, 0, 1])
        hdr = fr[14:34]
        assert sum(struct.unpack("!10H", hdr)) % 0xFFFF == 0
        udp = ip.data
        assert udp.sport == 11211
        rid = struct.unpack("!H", udp.data[:2])[0]
        assert udp.dport == 40000 + rid
        replies[rid] = udp.data[8:]
        headers[rid] = struct.unpack("!HHHH", udp.data[:8])

    def status(rid: int) -> tuple[int, bytes]:
        r = replies[rid]
        assert r[0] == 0x81
        st, body_len = struct.unpack("!H", r[6:8])[0], struct.unpack("!I", r[8:12])[0]
        return st, r[24 + r[4]:24 + body_len]

    assert status(0) == (0, b"")
    assert status(1) == (0, b"red")
    assert status(2)[0] == 0x0001
    assert status(3) == (0, b"")
    assert status(4)[0] == 0x0001
    assert replies[5] == b"END\r\n"
    assert replies[6] == b"STORED\r\n"
    assert replies[7] == b"VALUE plum 7 4\r\nblue\r\nEND\r\n"
    assert status(8)[0] == 0x0081
    assert status(9) == (0, b"0.1.0-offlow")
    # every datagram whose requests ran is answered, quiet ones by a bare frame header
    assert replies[10] == b"" and headers[10] == (10, 0, 0, 0)
    assert replies[11] == b"" and headers[11] == (11, 0, 0, 0)
    assert replies[12] == b"VALUE fig 0 1\r\nf\r\nEND\r\n"
    assert all(headers[r] == (r, 0, 1, 0) for r in range(10))
    assert 99 not in replies
    assert s["elements"]["serve"]["drop"] == 1


def test_udp_clients_are_served(tmp_path: Path) -> None:
    import socket

    from offlow.build import build
    from offlow.dsl.loader import load_program
    from offlow.runner import Run, RunOptions

    r = Run(build(load_program(KVS)), RunOptions(udp_port=0, timeout=60))
    r.start()
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.settimeout(5)
    try:
        def ask(rid: int, payload: bytes) -> bytes:
            client.sendto(struct.pack("!HHHH", rid, 0, 1, 0) + payload,
                          ("127.0.0.1", r.udp_port))
            data, _ = client.recvfrom(2048)
            assert struct.unpack("!HHHH", data[:8]) == (rid, 0, 1, 0)
            return data[8:]

        assert ask(1, b"set fig 0 0 5\r\ngreen\r\n") == b"STORED\r\n"
        assert ask(2, b"get fig\r\n") == b"VALUE fig 0 5\r\ngreen\r\nEND\r\n"
        assert ask(3, binary(GET, b"fig", opaque=7))[24 + 4:] == b"green"
    finally:
        r.stop()
        res = r.wait()
    assert res.ok, res.errors


def test_the_udp_interop_replay_matches_memcached() -> None:
    """Every UDP step of `offlow kvs interop` (several requests in one datagram among
    them: a set after a get, requests after an error, a NOOP, an unknown opcode) gets
    the program's answers as memcached 1.6 answers them: every request of a datagram
    run, in order (it ran none after a text get, a NOOP or an error: a set pipelined
    behind a get was silently not run)."""
    from offlow.build import build
    from offlow.dsl.loader import load_program
    from offlow.kvs.interop import compare
    from offlow.kvs.steps import sequences
    from offlow.kvs.tools import memcached, setup_memcached
    from offlow.runner import Run, RunOptions

    path, why = setup_memcached()
    if not path:
        pytest.skip(f"memcached unavailable: {why}")
    udp = [s for s in sequences() if s.transport == "udp"]
    # (an mtu that holds the 2,000-byte value's request and reply, as memcached's does)
    r = Run(build(load_program(KVS, ["mtu=9016"])), RunOptions(udp_port=0, timeout=120))
    r.start()
    try:
        with memcached(threads=1) as theirs:
            result = compare(theirs.port, r.udp_port, udp)
    finally:
        r.stop()
        res = r.wait()
    assert res.ok, res.errors
    assert result.ok and not result.documented, result.report()
    assert result.answered > 25, result.report()
