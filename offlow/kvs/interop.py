"""Interoperability check: one request sequence replayed against a real memcached and
against kvs_server, answers compared byte for byte after explicit normalization.

Three sequences, each on its own keys: the binary protocol over TCP, the text protocol
over TCP and the binary protocol over UDP (with the 8-byte frame header; a few text
requests too). They cover GET hits and misses (and GETK/GETQ/GETKQ), SET and SET
overwrite, ADD/REPLACE, CAS matches and mismatches, DELETE of present and absent keys,
quiet opcodes and noreply, keys of 250 and 251 bytes, an empty, a 100 KB and a 2 MB
(over the limit) value, unknown opcodes and commands, malformed headers and lines,
garbage, and requests after which the server must close the connection.

Every step is followed by a sentinel (binary: a NOOP with a fixed opaque; text: a get
of a sentinel key set up at the start; UDP: a NOOP in its own datagram) whose answer
marks where the step's answer ends; a step the server answers by closing the
connection is read to end-of-file, and the next step reconnects.

Normalization, the only liberties taken, applied to both servers alike:
- CAS values: each distinct non-zero CAS is replaced by its order of first appearance
  in that server's answers to the sequence (so equal CAS stay equal, and a CAS read
  back after a SET must be the one the SET returned);
- VERSION: the version text is replaced by "<version>";
- UDP: all datagrams answering one request datagram are reassembled into one byte
  stream (memcached sends the answers of a datagram holding several requests in
  separate datagrams, kvs_server in one message split at 1400 bytes); the frame
  headers are checked (request id, sequence numbers, count) and a bad one reported;
- UDP: an empty datagram (a frame header with count 0 and nothing after it) is
  dropped: memcached 1.6 sends one for each quiet binary request it does not answer
  (a GETQ miss, a successful SETQ), and so does the offlow program (examples/kvs.py,
  for text noreply too: its TCP gateway waits for an answer to every request);
  kvs_server sends nothing.

A step may be marked `known` with the reason its answers are allowed to differ; a
difference there is listed apart, not as a failure: the bad storage lines whose data
block memcached runs as a command and offlow skips (BLOCK_SKIPPED).

Left out of the sequences on purpose (memcached's behaviour is a quirk, not protocol):
an unknown binary opcode carrying a key (memcached skips key + extras bytes too many
after it, desynchronizing the stream), a value of exactly 1 MiB (memcached's limit
counts its item header: it refuses values somewhat under 1 MiB, kvs_server takes up
to the limit itself), flags above 2^32 - 1 (memcached wraps them), and a bad key
inside a text multi-get pipelined behind other requests (memcached drops the answers
queued before the error).
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from offlow.kvs.tools import HOST, kvs_server, memcached

HDR = struct.Struct(">BBHBBHIIQ")
UDP_HDR = struct.Struct(">HHHH")
SENTINEL_OPAQUE = 0x5E471E01
SENTINEL_KEY = b"__offlow_interop_sentinel__"
SENTINEL_VALUE = b"S3NT1N3L-0ffl0w!"
STEP_TIMEOUT = 5.0

OP_GET, OP_SET, OP_ADD, OP_REPLACE, OP_DELETE = 0x00, 0x01, 0x02, 0x03, 0x04
OP_QUIT, OP_GETQ, OP_NOOP, OP_VERSION, OP_GETK, OP_GETKQ = 0x07, 0x09, 0x0A, 0x0B, 0x0C, 0x0D
OP_SETQ, OP_ADDQ, OP_REPLACEQ, OP_DELETEQ, OP_QUITQ = 0x11, 0x12, 0x13, 0x14, 0x17

Payload = bytes | Callable[[dict[str, int]], bytes]

# Why offlow answers a bad storage line without memcached's second line: memcached
# reads the data block after some bad lines as a command (so a stored value can run
# commands: "ERROR" here, "DELETED" for a block reading "delete ..."); offlow skips
# the block whenever the line gives its length (mcproto.h).
BLOCK_SKIPPED = "the data block is skipped, not run as a command (memcached runs it)"


def bin_req(op: int, key: bytes = b"", extras: bytes = b"", value: bytes = b"", *,
            opaque: int = 0, cas: int = 0, magic: int = 0x80, key_len: int | None = None,
            ext_len: int | None = None, body_len: int | None = None, datatype: int = 0,
            vbucket: int = 0) -> bytes:
    """A binary request; the length fields can be overridden to make malformed ones."""
    kl = len(key) if key_len is None else key_len
    el = len(extras) if ext_len is None else ext_len
    bl = len(extras) + len(key) + len(value) if body_len is None else body_len
    return HDR.pack(magic, op, kl, el, datatype, vbucket, bl, opaque, cas) + extras + key + value


def store_extras(flags: int = 0, exptime: int = 0) -> bytes:
    """SET/ADD/REPLACE extras: flags and expiry."""
    return struct.pack(">Ii", flags, exptime)


@dataclass(frozen=True)
class Step:
    """One request (or a few) and the answer it gets.

    data: the bytes to send, or a function of the CAS values captured so far;
    capture: remember the CAS of this step's first answer under this name;
    known: why memcached and kvs_server may answer differently here (documented)."""

    name: str
    data: Payload
    capture: str = ""
    known: str = ""


@dataclass(frozen=True)
class Script:
    """A named list of steps over one transport and protocol."""

    name: str
    transport: str  # "tcp" or "udp"
    text: bool      # TCP: the text protocol (sentinel is a text get)
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Reply:
    """A step's answer: normalized bytes, whether the server closed the connection, and
    for UDP whether the frame headers were consistent."""

    data: bytes
    closed: bool = False
    timed_out: bool = False
    framing: str = ""   # UDP: "" when consistent, else what was wrong

    def short(self, limit: int = 160) -> str:
        """A one-line rendering for reports."""
        d = self.data if len(self.data) <= limit else self.data[:limit] + b"..."
        flags = [f for f, on in (("closed", self.closed), ("timed out", self.timed_out))
                 if on]
        if self.framing:
            flags.append(self.framing)
        return f"{d!r}" + (f" [{', '.join(flags)}]" if flags else "")


@dataclass(frozen=True)
class Difference:
    """A step where the two servers' normalized answers differ."""

    sequence: str
    step: str
    memcached: Reply
    ours: Reply
    known: str = ""


@dataclass
class InteropResult:
    """What compare() found."""

    steps: int
    differences: list[Difference] = field(default_factory=list)   # undocumented
    documented: list[Difference] = field(default_factory=list)    # at steps marked known
    timed_out: list[str] = field(default_factory=list)   # "server: sequence / step"
    answered: int = 0   # steps where both servers said something or closed

    @property
    def ok(self) -> bool:
        """True when there is no undocumented difference and no step timed out."""
        return not self.differences and not self.timed_out

    def report(self) -> str:
        """A readable summary."""
        out = [f"{self.steps} steps replayed ({self.answered} answered); "
               f"{len(self.differences)} difference(s), "
               f"{len(self.documented)} documented difference(s), "
               f"{len(self.timed_out)} timed out"]
        out += [f"TIMED OUT: {t}" for t in self.timed_out]
        for title, diffs in (("DIFFERENCE", self.differences), ("documented", self.documented)):
            for d in diffs:
                out.append(f"{title}: {d.sequence} / {d.step}" +
                           (f" ({d.known})" if d.known else ""))
                out.append(f"  memcached:  {d.memcached.short()}")
                out.append(f"  kvs_server: {d.ours.short()}")
        return "\n".join(out)


# ---- the sequences ------------------------------------------------------------------


def _k(prefix: bytes, name: bytes) -> bytes:
    return prefix + name


def binary_steps(prefix: bytes = b"ib:") -> list[Step]:
    """The binary-protocol steps (used over TCP)."""
    a, b, c, d, e, f, g, h = (_k(prefix, x) for x in (b"a", b"b", b"c", b"d", b"e", b"f",
                                                       b"g", b"h"))
    k250 = prefix + b"K" * (250 - len(prefix))
    k251 = prefix + b"L" * (251 - len(prefix))
    ex = store_extras
    return [
        Step("version", bin_req(OP_VERSION, opaque=11)),
        Step("noop", bin_req(OP_NOOP, opaque=12)),
        Step("get miss", bin_req(OP_GET, a, opaque=13)),
        Step("getk miss carries the key", bin_req(OP_GETK, a, opaque=14)),
        Step("getq miss is silent", bin_req(OP_GETQ, a)),
        Step("getkq miss is silent", bin_req(OP_GETKQ, a)),
        Step("set", bin_req(OP_SET, a, ex(0xDEADBEEF), b"hello", opaque=15)),
        Step("get hit", bin_req(OP_GET, a, opaque=16), capture="a1"),
        Step("getk hit", bin_req(OP_GETK, a, opaque=17)),
        Step("getq hit", bin_req(OP_GETQ, a, opaque=18)),
        Step("getkq hit", bin_req(OP_GETKQ, a, opaque=19)),
        Step("set overwrite", bin_req(OP_SET, a, ex(7), b"overwritten value")),
        Step("get after overwrite", bin_req(OP_GET, a), capture="a2"),
        Step("set with the current cas",
             lambda v: bin_req(OP_SET, a, ex(8), b"cas value", cas=v["a2"])),
        Step("set with a stale cas",
             lambda v: bin_req(OP_SET, a, ex(9), b"stale", cas=v["a2"])),
        Step("get after cas", bin_req(OP_GET, a)),
        Step("add of a present key", bin_req(OP_ADD, a, ex(), b"x")),
        Step("add of an absent key", bin_req(OP_ADD, b, ex(1), b"added")),
        Step("replace of an absent key", bin_req(OP_REPLACE, c, ex(), b"x")),
        Step("replace of a present key", bin_req(OP_REPLACE, b, ex(2), b"replaced")),
        Step("get replaced", bin_req(OP_GET, b)),
        Step("set with a cas on an absent key", bin_req(OP_SET, d, ex(), b"x", cas=12345)),
        Step("setq is silent", bin_req(OP_SETQ, e, ex(3), b"quiet")),
        Step("get the setq value", bin_req(OP_GET, e)),
        Step("addq of a present key answers", bin_req(OP_ADDQ, e, ex(), b"x")),
        Step("replaceq of an absent key answers", bin_req(OP_REPLACEQ, f, ex(), b"x")),
        Step("delete with a stale cas", lambda v: bin_req(OP_DELETE, a, cas=v["a2"])),
        Step("delete present", bin_req(OP_DELETE, b)),
        Step("delete absent", bin_req(OP_DELETE, b)),
        Step("deleteq absent answers", bin_req(OP_DELETEQ, b)),
        Step("deleteq present is silent", bin_req(OP_DELETEQ, e)),
        Step("get deleted", bin_req(OP_GET, e)),
        Step("empty value", bin_req(OP_SET, g, ex(), b"")),
        Step("get empty value", bin_req(OP_GET, g)),
        Step("100 KB value", bin_req(OP_SET, h, ex(5), bytes(range(256)) * 400)),
        Step("get 100 KB value", bin_req(OP_GET, h)),
        Step("key of 250 bytes", bin_req(OP_SET, k250, ex(), b"long key")),
        Step("getk key of 250 bytes", bin_req(OP_GETK, k250)),
        Step("pipelined quiet gets and a noop",
             bin_req(OP_GETQ, c) + bin_req(OP_GETKQ, a, opaque=21) + bin_req(OP_GETQ, g)
             + bin_req(OP_NOOP, opaque=22)),
        Step("datatype and vbucket are ignored", bin_req(OP_NOOP, datatype=0, vbucket=7)),
        Step("value over the limit (2 MB)",
             bin_req(OP_SET, _k(prefix, b"big"), ex(), b"v" * (2 << 20))),
        Step("get after the refused value", bin_req(OP_GET, _k(prefix, b"big"))),
        Step("unknown opcode 0x5f (its body is skipped)", bin_req(0x5F, value=b"zz")),
        Step("unknown opcode 0xfe, no body", bin_req(0xFE, opaque=23)),
        Step("set without extras closes", bin_req(OP_SET, a, b"", b"v")),
        Step("get with extras closes", bin_req(OP_GET, a, b"abcd")),
        Step("noop with a key closes", bin_req(OP_NOOP, b"k")),
        Step("get of a 251-byte key closes", bin_req(OP_GET, k251)),
        Step("set of a 251-byte key closes", bin_req(OP_SET, k251, ex(), b"v")),
        Step("extras and key longer than the body close",
             bin_req(OP_GET, key_len=5, body_len=0) + b"xxxxx"),
        Step("bad magic after a request closes", bin_req(OP_NOOP) + b"\x42" * 24),
        Step("quit answers and closes", bin_req(OP_QUIT, opaque=24)),
        Step("quitq closes silently", bin_req(OP_QUITQ)),
        Step("get after reconnecting", bin_req(OP_GET, a)),
    ]


def text_steps(prefix: bytes = b"it:") -> list[Step]:
    """The text-protocol steps (used over TCP)."""
    def k(x: bytes) -> bytes:
        return prefix + x
    k250 = prefix + b"K" * (250 - len(prefix))
    k251 = prefix + b"L" * (251 - len(prefix))
    many = b" ".join(k(b"m%d" % i) for i in range(100))
    return [
        Step("version", b"version\r\n"),
        Step("get miss", b"get " + k(b"a") + b"\r\n"),
        Step("set", b"set " + k(b"a") + b" 5 0 3\r\nbar\r\n"),
        Step("get hit", b"get " + k(b"a") + b"\r\n"),
        Step("gets hit", b"gets " + k(b"a") + b"\r\n", capture="a1"),
        Step("multi-get of hits and misses",
             b"get " + k(b"a") + b" " + k(b"nope") + b" " + k(b"a") + b"\r\n"),
        Step("set overwrite", b"set " + k(b"a") + b" 6 0 11\r\noverwritten\r\n"),
        Step("gets after overwrite", b"gets " + k(b"a") + b"\r\n", capture="a2"),
        Step("cas with the current cas",
             lambda v: b"cas " + k(b"a") + b" 0 0 3 %d\r\ncas\r\n" % v["a2"]),
        Step("cas with a stale cas",
             lambda v: b"cas " + k(b"a") + b" 0 0 3 %d\r\nold\r\n" % v["a2"]),
        Step("cas of an absent key", b"cas " + k(b"zz") + b" 0 0 1 1\r\nx\r\n"),
        Step("gets after cas", b"gets " + k(b"a") + b"\r\n"),
        Step("add of a present key", b"add " + k(b"a") + b" 0 0 1\r\nx\r\n"),
        Step("add of an absent key", b"add " + k(b"b") + b" 1 0 5\r\nadded\r\n"),
        Step("replace of an absent key", b"replace " + k(b"c") + b" 0 0 1\r\nx\r\n"),
        Step("replace of a present key", b"replace " + k(b"b") + b" 2 0 8\r\nreplaced\r\n"),
        Step("set noreply is silent", b"set " + k(b"q") + b" 0 0 5 noreply\r\nquiet\r\n"),
        Step("get the noreply value", b"get " + k(b"q") + b" " + k(b"b") + b"\r\n"),
        Step("delete present", b"delete " + k(b"b") + b"\r\n"),
        Step("delete absent", b"delete " + k(b"b") + b"\r\n"),
        Step("delete noreply is silent", b"delete " + k(b"q") + b" noreply\r\n"),
        Step("delete with a zero hold time", b"delete " + k(b"a") + b" 0\r\n"),
        Step("delete with a hold time is refused", b"delete " + k(b"a") + b" 5\r\n"),
        Step("empty value", b"set " + k(b"e") + b" 0 0 0\r\n\r\nget " + k(b"e") + b"\r\n"),
        Step("key of 250 bytes", b"set " + k250 + b" 0 0 2\r\nok\r\nget " + k250 + b"\r\n"),
        Step("get of a 251-byte key", b"get " + k251 + b"\r\n"),
        Step("set of a 251-byte key (its data block is skipped)",
             b"set " + k251 + b" 0 0 1\r\nx\r\n", known=BLOCK_SKIPPED),
        Step("value over the limit (2 MB) is skipped",
             b"set " + k(b"big") + b" 0 0 2097152\r\n" + b"v" * (2 << 20) + b"\r\n"),
        Step("get after the refused value", b"get " + k(b"big") + b"\r\n"),
        Step("data block without CRLF", b"set " + k(b"f") + b" 0 0 3\r\nbarXX\r\n"),
        Step("flags not a number", b"set " + k(b"f") + b" abc 0 1\r\nx\r\n", known=BLOCK_SKIPPED),
        Step("negative length", b"set " + k(b"f") + b" 0 0 -1\r\n"),
        Step("set with too few arguments", b"set " + k(b"f") + b" 0\r\n"),
        Step("set with too many arguments",
             b"set " + k(b"f") + b" 0 0 1 noreply x\r\nx\r\n", known=BLOCK_SKIPPED),
        Step("unknown command", b"flurb " + k(b"a") + b"\r\n"),
        Step("empty line", b"\r\n"),
        Step("garbage bytes", b"\x00\x01\x02\xff\r\n"),
        Step("commands are case sensitive", b"GET " + k(b"a") + b"\r\n"),
        Step("get without a key", b"get\r\n"),
        Step("tab is not a separator", b"get\t" + k(b"a") + b"\r\n"),
        Step("LF-only line endings", b"set " + k(b"l") + b" 1 0 2\nab\r\nget " + k(b"l")
             + b"\n"),
        Step("largest flags", b"set " + k(b"fl") + b" 4294967295 0 1\r\nx\r\nget " + k(b"fl")
             + b"\r\n"),
        Step("negative expiry stores an expired item",
             b"set " + k(b"x") + b" 0 -1 1\r\nx\r\nget " + k(b"x") + b"\r\n"),
        Step("multi-get of 100 keys (3 present)",
             b"set " + k(b"m7") + b" 0 0 1\r\n7\r\nset " + k(b"m42") + b" 0 0 2\r\n42\r\nset "
             + k(b"m99") + b" 0 0 2\r\n99\r\nget " + many + b"\r\n"),
        Step("version ignores arguments", b"version now\r\n"),
        Step("quit closes", b"quit\r\n"),
        Step("get after reconnecting", b"get " + k(b"a") + b" " + k(b"e") + b"\r\n"),
    ]


def _udp(rid: int, payload: bytes, seq: int = 0, count: int = 1) -> bytes:
    return UDP_HDR.pack(rid, seq, count, 0) + payload


def udp_steps(prefix: bytes = b"iu:") -> list[Step]:
    """The UDP steps; each is one datagram, its request id 0x1000 + its index (the frame
    header is part of the step: a few steps break it on purpose)."""
    a, b, big = _k(prefix, b"a"), _k(prefix, b"b"), _k(prefix, b"big")
    k250 = prefix + b"K" * (250 - len(prefix))
    k251 = prefix + b"L" * (251 - len(prefix))
    ex = store_extras
    plain: list[tuple[str, bytes, str, str]] = [
        ("version", bin_req(OP_VERSION, opaque=1), "", ""),
        ("noop", bin_req(OP_NOOP, opaque=2), "", ""),
        ("get miss", bin_req(OP_GET, a, opaque=3), "", ""),
        ("getk miss", bin_req(OP_GETK, a, opaque=4), "", ""),
        ("set", bin_req(OP_SET, a, ex(77), b"udp value", opaque=5), "", ""),
        ("get hit", bin_req(OP_GET, a, opaque=6), "a1", ""),
        ("getk hit", bin_req(OP_GETK, a, opaque=7), "", ""),
        ("set overwrite", bin_req(OP_SET, a, ex(78), b"second udp value"), "", ""),
        ("get after overwrite", bin_req(OP_GET, a), "", ""),
        ("add of a present key", bin_req(OP_ADD, a, ex(), b"x"), "", ""),
        ("set and get in one datagram",
         bin_req(OP_SET, b, ex(), b"two in one", opaque=8) + bin_req(OP_GET, b, opaque=9), "",
         ""),
        ("delete present", bin_req(OP_DELETE, b), "", ""),
        ("delete absent", bin_req(OP_DELETE, b), "", ""),
        ("getq miss and noop", bin_req(OP_GETQ, b) + bin_req(OP_NOOP, opaque=10), "", ""),
        ("value of 2000 bytes", bin_req(OP_SET, big, ex(), b"0123456789" * 200), "", ""),
        ("answer in two datagrams", bin_req(OP_GET, big), "", ""),
        ("key of 250 bytes", bin_req(OP_SET, k250, ex(), b"v") + bin_req(OP_GETK, k250), "",
         ""),
        ("key of 251 bytes", bin_req(OP_GET, k251), "", ""),
        ("text get", b"get " + a + b" " + b + b"\r\n", "", ""),
        ("text set and get", b"set " + b + b" 3 0 4\r\ntext\r\nget " + b + b"\r\n", "", ""),
        ("truncated request is dropped", bin_req(OP_GET, a)[:-1], "", ""),
        ("unknown opcode", bin_req(0x5F, value=b"zz", opaque=11), "", ""),
        ("setq is silent", bin_req(OP_SETQ, b, ex(), b"q") + bin_req(OP_GETQ, b, opaque=12),
         "", ""),
    ]
    steps = [Step(name, _udp(0x1000 + i, data), capture=cap, known=known)
             for i, (name, data, cap, known) in enumerate(plain)]
    steps += [
        Step("multi-datagram request is dropped", _udp(0x2001, bin_req(OP_GET, a), 0, 2)),
        Step("datagram shorter than the frame header is dropped", b"\x00\x01\x00"),
        Step("frame header alone gets nothing", _udp(0x2002, b"")),
        Step("sequence and reserved fields are ignored",
             UDP_HDR.pack(0x2003, 5, 1, 9) + bin_req(OP_GET, a)),
    ]
    return steps


def sequences() -> list[Script]:
    """The three sequences compare() replays."""
    return [Script("binary-tcp", "tcp", False, tuple(binary_steps())),
            Script("text-tcp", "tcp", True, tuple(text_steps())),
            Script("binary-udp", "udp", False, tuple(udp_steps()))]


# ---- transports ---------------------------------------------------------------------


def _bin_messages(data: bytes) -> tuple[list[tuple[int, int, bytes]], bytes]:
    """Split binary responses: [(opcode, opaque, bytes)], unparsed rest."""
    out = []
    off = 0
    while len(data) - off >= HDR.size:
        magic, op, _kl, _el, _dt, _st, body, opaque, _cas = HDR.unpack_from(data, off)
        if magic != 0x81 or len(data) - off < HDR.size + body:
            break
        out.append((op, opaque, data[off:off + HDR.size + body]))
        off += HDR.size + body
    return out, data[off:]


class _TcpSession:
    """One TCP connection at a time; reconnects after the server closed one."""

    def __init__(self, port: int, text: bool) -> None:
        self.port = port
        self.text = text
        self.sock: socket.socket | None = None
        self.sentinel_reply = (b"VALUE " + SENTINEL_KEY + b" 0 %d\r\n" % len(SENTINEL_VALUE)
                               + SENTINEL_VALUE + b"\r\nEND\r\n")

    def _connect(self) -> socket.socket:
        s = socket.create_connection((HOST, self.port), timeout=STEP_TIMEOUT)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = s
        if self.text:
            s.sendall(b"set " + SENTINEL_KEY + b" 0 0 %d\r\n" % len(SENTINEL_VALUE)
                      + SENTINEL_VALUE + b"\r\n")
            got = b""
            while not got.endswith(b"\r\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            if got != b"STORED\r\n":
                raise ConnectionError(f"sentinel set answered {got!r}")
        return s

    def _done(self, buf: bytes) -> int | None:
        """Where the step's answer ends if the sentinel's answer is complete in buf."""
        if self.text:
            return len(buf) - len(self.sentinel_reply) if buf.endswith(self.sentinel_reply) \
                else None
        msgs, _ = _bin_messages(buf)
        off = 0
        for op, opaque, raw in msgs:
            if op == OP_NOOP and opaque == SENTINEL_OPAQUE:
                return off
            off += len(raw)
        return None

    def step(self, data: bytes) -> tuple[bytes, bool, bool]:
        """Send a step and its sentinel; return (answer, closed, timed_out)."""
        s = self.sock or self._connect()
        sentinel = (b"get " + SENTINEL_KEY + b"\r\n" if self.text
                    else bin_req(OP_NOOP, opaque=SENTINEL_OPAQUE))
        buf = b""
        try:
            s.sendall(data)
            s.sendall(sentinel)
        except OSError:
            pass   # the server may close mid-way; read what it said
        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline:
            end = self._done(buf)
            if end is not None:
                return buf[:end], False, False
            ready, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            try:
                chunk = s.recv(1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                self.close()
                return buf, True, False
            buf += chunk
        self.close()
        return buf, False, True

    def close(self) -> None:
        """Drop the connection (the next step reconnects)."""
        if self.sock:
            self.sock.close()
            self.sock = None


class _UdpSession:
    """One UDP socket; a NOOP datagram with its own request id ends every step."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect((HOST, port))
        self.rid = 0x7000

    def step(self, datagram: bytes) -> tuple[list[bytes], bool]:
        """Send a datagram and the sentinel; return (datagrams before the sentinel's
        answer, timed_out)."""
        self.rid += 1
        sentinel_rid = self.rid
        self.sock.send(datagram)
        self.sock.send(_udp(sentinel_rid, bin_req(OP_NOOP, opaque=SENTINEL_OPAQUE)))
        got: list[bytes] = []
        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.sock], [], [], deadline - time.monotonic())
            if not ready:
                break
            d = self.sock.recv(65536)
            if len(d) >= UDP_HDR.size and UDP_HDR.unpack_from(d)[0] == sentinel_rid:
                return got, False
            got.append(d)
        return got, True

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def _reassemble(datagrams: Sequence[bytes], rid: int | None) -> tuple[bytes, str]:
    """Concatenate the payloads of whole messages; say what is wrong with the framing."""
    out = b""
    problems = []
    expect_seq, count = 0, None
    for d in datagrams:
        if len(d) < UDP_HDR.size:
            problems.append("short datagram")
            continue
        r, seq, cnt, _ = UDP_HDR.unpack_from(d)
        if cnt == 0 and len(d) == UDP_HDR.size:
            continue   # memcached's empty datagram for an unanswered quiet request
        if rid is not None and r != rid:
            problems.append(f"request id {r:#x} instead of {rid:#x}")
        if count is None:
            count, expect_seq = cnt, 0
        if cnt != count or seq != expect_seq:
            problems.append(f"datagram {seq}/{cnt} where {expect_seq}/{count} was due")
        out += d[UDP_HDR.size:]
        expect_seq += 1
        if expect_seq == count:
            count = None
    if count is not None:
        problems.append("message incomplete")
    return out, "; ".join(dict.fromkeys(problems))


# ---- normalization ------------------------------------------------------------------


class _Normalizer:
    """CAS values -> order of first appearance; version text -> "<version>"."""

    def __init__(self) -> None:
        self.cas: dict[int, int] = {}

    def _cas(self, v: int) -> int:
        if v == 0:
            return 0
        return self.cas.setdefault(v, len(self.cas) + 1)

    def binary(self, data: bytes) -> bytes:
        msgs, rest = _bin_messages(data)
        out = b""
        for op, _opaque, raw in msgs:
            magic, _op, kl, el, dt, st, body, opaque, cas = HDR.unpack_from(raw)
            payload = raw[HDR.size:]
            if op == OP_VERSION and st == 0:
                payload = b"<version>"
                body = len(payload)
            out += HDR.pack(magic, op, kl, el, dt, st, body, opaque, self._cas(cas)) + payload
        return out + rest

    def text(self, data: bytes) -> bytes:
        out = b""
        off = 0
        while off < len(data):
            nl = data.find(b"\n", off)
            if nl < 0:
                return out + data[off:]
            line = data[off:nl + 1]
            off = nl + 1
            if line.startswith(b"VERSION "):
                out += b"VERSION <version>\r\n"
                continue
            if line.startswith(b"VALUE "):
                parts = line.rstrip(b"\r\n").split(b" ")
                if len(parts) == 5 and parts[4].isdigit():
                    parts[4] = b"%d" % self._cas(int(parts[4]))
                if len(parts) in (4, 5) and parts[3].isdigit():
                    n = int(parts[3])
                    out += b" ".join(parts) + b"\r\n" + data[off:off + n + 2]
                    off += n + 2
                    continue
            out += line
        return out


def _capture(raw: bytes, text: bool) -> int | None:
    """The CAS in a step's first answer (binary header, or a gets VALUE line)."""
    if text:
        for line in raw.split(b"\r\n"):
            parts = line.split(b" ")
            if parts[0] == b"VALUE" and len(parts) == 5 and parts[4].isdigit():
                return int(parts[4])
        return None
    msgs, _ = _bin_messages(raw)
    return HDR.unpack_from(msgs[0][2])[8] if msgs else None


# ---- replay and compare -------------------------------------------------------------


def replay(port: int, seq: Script) -> list[Reply]:
    """Replay one sequence against the server on HOST:port; one normalized Reply per
    step."""
    norm = _Normalizer()
    captured: dict[str, int] = {}
    replies: list[Reply] = []
    session: _TcpSession | _UdpSession
    session = _UdpSession(port) if seq.transport == "udp" else _TcpSession(port, seq.text)
    try:
        for step in seq.steps:
            data = step.data(captured) if callable(step.data) else step.data
            if isinstance(session, _UdpSession):
                dgrams, timed_out = session.step(data)
                rid = UDP_HDR.unpack_from(data)[0] if len(data) >= UDP_HDR.size else None
                raw, framing = _reassemble(dgrams, rid)
                text = len(data) > UDP_HDR.size and data[UDP_HDR.size] != 0x80
                reply = Reply(norm.text(raw) if text else norm.binary(raw), False, timed_out,
                              framing)
            else:
                raw, closed, timed_out = session.step(data)
                text = seq.text
                reply = Reply(norm.text(raw) if text else norm.binary(raw), closed, timed_out)
            if step.capture:
                cas = _capture(raw, text)
                if cas is not None:
                    captured[step.capture] = cas
            replies.append(reply)
    finally:
        session.close()
    return replies


def compare(memcached_port: int, our_port: int,
            seqs: Sequence[Script] | None = None) -> InteropResult:
    """Replay every sequence against both servers and collect the steps whose
    normalized answers differ."""
    result = InteropResult(steps=0)
    for seq in seqs if seqs is not None else sequences():
        theirs = replay(memcached_port, seq)
        ours = replay(our_port, seq)
        result.steps += len(seq.steps)
        for step, m, o in zip(seq.steps, theirs, ours, strict=True):
            for who, r in (("memcached", m), ("kvs_server", o)):
                if r.timed_out:
                    result.timed_out.append(f"{who}: {seq.name} / {step.name}")
            if (m.data or m.closed) and (o.data or o.closed):
                result.answered += 1
            if m == o:
                continue
            d = Difference(seq.name, step.name, m, o, step.known)
            (result.documented if step.known else result.differences).append(d)
    return result


def check_against_memcached(threads: int = 1) -> InteropResult:
    """Start a real memcached (installing it if needed) and kvs_server on free ports,
    compare them, stop both."""
    with memcached(threads=1) as theirs, kvs_server(threads=threads) as ours:
        return compare(theirs.port, ours.port)


def main() -> int:
    """`python -m offlow.kvs.interop`: print the comparison; exit 1 on a difference."""
    result = check_against_memcached()
    print(result.report())
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
