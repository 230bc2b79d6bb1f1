"""A stored value never runs as commands: every text and meta storage command, right
or wrong in each way whose data length can still be read, followed by a data block
that is itself a command ("delete victim", or "set victim ..." for the overwrite),
leaves the other keys as they were. Over TCP and UDP, against the hand-written server
(kvs_server) and the key-value store program (examples/kvs.py, served over UDP and
TCP); the parser's own test is runtime/lib/kvs/tests/test_mcproto.c
(test_data_blocks_are_never_commands) and the fuzz target's injection mode."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest

from offlow.kvs.tools import HOST, kvs_server
from offlow.runner import Run
from tests.e2e import ROOT, kvs_over_tcp

KVS = ROOT / "examples" / "kvs.py"
UDP_HDR = struct.Struct(">HHHH")

# What the data blocks do if they run: delete the victim, or overwrite it.
DELETE_BLOCK = b"delete victim"
SET_BLOCK = b"set victim 0 0 5\r\nPWNED"

# A storage command line for a block of `n` bytes: every command, the right form and
# the wrong ones whose length is readable (wrong argument count, bad numbers, a long
# key, noreply, meta flag errors).
LINES = [
    "set k 0 0 {n}", "add k 0 0 {n}", "replace k 0 0 {n}", "append k 0 0 {n}",
    "prepend k 0 0 {n}", "cas k 0 0 {n} 1", "append k 0 0 {n} noreply",
    "prepend k 0 0 {n} noreply", "set k 0 0 {n} noreply extra", "append k 0 0 {n} a b",
    "cas k 0 0 {n}", "set k x 0 {n}", "prepend k 0 x {n}", "cas k 0 0 {n} x",
    "append k x 0 {n} noreply", "set " + "k" * 251 + " 0 0 {n}",
    "ms k {n}", "ms k {n} MA", "ms k {n} MP q", "ms k {n} Z", "ms k {n} Mx", "ms k {n} F1 F1",
    "ms k {n} Tx", "ms k {n} O" + "9" * 40, "ms " + "k" * 251 + " {n}",
]


def _block_cases() -> list[tuple[str, bytes]]:
    return [(line, block) for line in LINES for block in (DELETE_BLOCK, SET_BLOCK)]


def _request(line: str, block: bytes) -> bytes:
    return line.format(n=len(block)).encode() + b"\r\n" + block + b"\r\n"


def _tcp(port: int, data: bytes, until: bytes) -> bytes:
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(data)
        got = b""
        deadline = time.monotonic() + 10
        while not got.endswith(until) and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def _udp(port: int, payload: bytes, rid: int) -> bytes:
    """Send one datagram; return its reply's payloads (frame headers stripped)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(UDP_HDR.pack(rid, 0, 1, 0) + payload, (HOST, port))
        out = b""
        while True:
            d = s.recv(65536)
            r, seq, count, _ = UDP_HDR.unpack_from(d)
            assert r == rid
            out += d[UDP_HDR.size:]
            if count == 0 or seq + 1 >= count:
                return out


def _check_tcp(port: int, line: str, block: bytes) -> None:
    victim = b"VALUE victim 0 1\r\nV\r\nEND\r\n"
    assert _tcp(port, b"set victim 0 0 1\r\nV\r\n", b"\r\n") == b"STORED\r\n"
    got = _tcp(port, _request(line, block) + b"get victim\r\n", victim)
    assert got.endswith(victim), (line, got)
    assert b"DELETED" not in got and b"PWNED" not in got
    assert _tcp(port, b"get victim\r\n", b"END\r\n") == victim


def _check_udp(port: int, line: str, block: bytes, rid: int) -> None:
    victim = b"VALUE victim 0 1\r\nV\r\nEND\r\n"
    assert _udp(port, b"set victim 0 0 1\r\nV\r\n", rid) == b"STORED\r\n"
    got = _udp(port, _request(line, block) + b"get victim\r\n", rid + 1)
    assert got.endswith(victim), (line, got)
    assert b"DELETED" not in got and b"PWNED" not in got
    assert _udp(port, b"get victim\r\n", rid + 2) == victim


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    with kvs_server() as s:
        yield s.port


@pytest.fixture(scope="module")
def program() -> Iterator[Run]:
    with kvs_over_tcp() as r:
        yield r


@pytest.mark.parametrize(("line", "block"), _block_cases())
def test_kvs_server_never_runs_a_data_block_over_tcp(server: int, line: str,
                                                     block: bytes) -> None:
    _check_tcp(server, line, block)


@pytest.mark.parametrize(("line", "block"), _block_cases())
def test_kvs_server_never_runs_a_data_block_over_udp(server: int, line: str,
                                                     block: bytes) -> None:
    _check_udp(server, line, block, 0x100 + 4 * LINES.index(line))


@pytest.mark.parametrize("line", LINES)
def test_the_program_never_runs_a_data_block_over_udp(program: Run, line: str) -> None:
    assert program.udp_port
    for k, block in enumerate((DELETE_BLOCK, SET_BLOCK)):
        _check_udp(program.udp_port, line, block, 0x2000 + 8 * LINES.index(line) + 4 * k)


@pytest.mark.parametrize("line", LINES)
def test_the_program_never_runs_a_data_block_over_tcp(program: Run, line: str) -> None:
    assert program.tcp_port
    for block in (DELETE_BLOCK, SET_BLOCK):
        _check_tcp(program.tcp_port, line, block)
