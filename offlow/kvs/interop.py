"""Interoperability check: the request sequences of offlow/kvs/steps.py replayed
against a real memcached and against one of offlow's servers (kvs_server, or the
key-value store program over TCP), answers compared byte for byte after explicit
normalization.

Every step is followed by a sentinel (binary: a NOOP with a fixed opaque; text and
meta: a get of a sentinel key set up at the start; UDP: a NOOP in its own datagram)
whose answer marks where the step's answer ends; a step the server answers by closing
the connection is read to end-of-file, and the next step reconnects.

Normalization, the only liberties taken, applied to both servers alike:
- CAS values: each distinct non-zero CAS is replaced by its order of first appearance
  in that server's answers to the sequence (so equal CAS stay equal, and a CAS read
  back after a SET must be the one the SET returned); the meta flag c too;
- VERSION: the version text is replaced by "<version>";
- meta flags t (TTL left) and l (seconds since the last access): a positive number is
  replaced by "+" (a second may tick between the two servers); -1 and 0 stay;
- stats: only the statistics offlow reports (STATS_KEPT) are kept, in order, their
  values replaced by "<v>" except the command counters (STATS_EXACT), which a step
  that begins with "stats reset" makes deterministic;
- UDP: all datagrams answering one request datagram are reassembled into one byte
  stream (memcached sends the answers of a datagram holding several requests in
  separate datagrams, kvs_server in one message split at 1400 bytes); the frame
  headers are checked (request id, sequence numbers, count) and a bad one reported;
- UDP: an empty datagram (a frame header with count 0 and nothing after it) is
  dropped: memcached 1.6 sends one for each quiet binary request it does not answer
  (a GETQ miss, a successful SETQ), and so does the offlow program (examples/kvs.py,
  for text noreply too); kvs_server sends nothing.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from offlow.kvs.steps import (
    HDR,
    OP_NOOP,
    OP_STAT,
    OP_VERSION,
    SENTINEL_KEY,
    SENTINEL_VALUE,
    UDP_HDR,
    Script,
    bin_req,
    sequences,
    udp_dgram,
)
from offlow.kvs.tools import HOST, kvs_server, memcached

SENTINEL_OPAQUE = 0x5E471E01
STEP_TIMEOUT = 5.0

# The statistics offlow reports (offlow/kvexec.c) and compares with memcached's;
# STATS_EXACT: their values too (command counters, zeroed by "stats reset").
STATS_KEPT = frozenset((
    "pid uptime time version pointer_size rusage_user rusage_system max_connections "
    "curr_connections total_connections rejected_connections cmd_get cmd_set cmd_flush "
    "cmd_touch get_hits get_misses get_expired get_flushed delete_misses delete_hits "
    "incr_misses incr_hits decr_misses decr_hits cas_misses cas_hits cas_badval "
    "touch_hits touch_misses bytes_read bytes_written limit_maxbytes threads bytes "
    "curr_items total_items evictions maxbytes maxconns tcpport udpport evictions "
    "num_threads cas_enabled item_size_max binding_protocol").split())
STATS_EXACT = frozenset((
    "cmd_get cmd_set cmd_touch get_hits get_misses delete_misses delete_hits incr_misses "
    "incr_hits decr_misses decr_hits cas_misses cas_hits cas_badval touch_hits "
    "touch_misses pointer_size cas_enabled binding_protocol").split())
META_STATUS = (b"HD", b"VA", b"EN", b"NS", b"EX", b"NF", b"MN")


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
        self.sock.send(udp_dgram(sentinel_rid, bin_req(OP_NOOP, opaque=SENTINEL_OPAQUE)))
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
            if op == OP_STAT and st == 0 and kl:
                name = payload[el:el + kl].decode("latin1")
                if name not in STATS_KEPT:
                    continue
                if name not in STATS_EXACT:
                    payload = payload[:el + kl] + b"<v>"
                    body = len(payload)
            out += HDR.pack(magic, op, kl, el, dt, st, body, opaque, self._cas(cas)) + payload
        return out + rest

    def _meta(self, line: bytes) -> bytes:
        """A meta reply line: CAS renumbered, TTL and idle seconds blurred."""
        words = line.rstrip(b"\r\n").split(b" ")
        for i, w in enumerate(words[1:], 1):
            if w[:1] == b"c" and w[1:].isdigit():
                words[i] = b"c%d" % self._cas(int(w[1:]))
            elif w[:1] in (b"t", b"l") and w[1:].isdigit() and int(w[1:]) > 0:
                words[i] = w[:1] + b"+"
        return b" ".join(words) + b"\r\n"

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
            if line.startswith(b"STAT "):
                parts = line.rstrip(b"\r\n").split(b" ", 2)
                name = parts[1].decode("latin1") if len(parts) > 1 else ""
                if name in STATS_KEPT:
                    value = parts[2] if len(parts) > 2 and name in STATS_EXACT else b"<v>"
                    out += b"STAT " + parts[1] + b" " + value + b"\r\n"
                continue
            if line[:2] in META_STATUS and line[2:3] in (b" ", b"\r", b"\n"):
                out += self._meta(line)
                if line.startswith(b"VA "):
                    words = line.split(b" ")
                    n = int(words[1]) if words[1].strip().isdigit() else 0
                    out += data[off:off + n + 2]
                    off += n + 2
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
    """The CAS in a step's first answer that has one (binary header, a gets VALUE line,
    or a meta reply's c flag)."""
    if text:
        for line in raw.split(b"\r\n"):
            parts = line.split(b" ")
            if parts[0] == b"VALUE" and len(parts) == 5 and parts[4].isdigit():
                return int(parts[4])
            if parts[0] in META_STATUS:
                for w in parts[1:]:
                    if w[:1] == b"c" and w[1:].isdigit():
                        return int(w[1:])
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
