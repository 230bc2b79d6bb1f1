"""The request sequences the interop replay (offlow/kvs/interop.py) sends to a real
memcached and to offlow's servers: every command of memcached 1.6's text, meta and
binary protocols, their quiet / noreply forms and their errors, over TCP and UDP.

Five sequences, each on its own keys: the binary protocol over TCP, the text protocol
over TCP (storage, retrieval, arithmetic, touch, flush, stats and the admin commands
clients send), the meta commands over TCP, and the binary protocol over UDP (with the
8-byte frame header; a few text and meta requests too). They cover hits and misses,
every quiet opcode and noreply, CAS matches and mismatches, keys of 250 and 251
bytes, an empty, a 100 KB and a 2 MB (over the limit) value, unknown opcodes and
commands, malformed headers and lines, garbage, and requests after which the server
must close the connection.

A step may be marked `known` with the reason its answers are allowed to differ; a
difference there is listed apart, not as a failure: the bad storage lines whose data
block memcached runs as a command and offlow skips (BLOCK_SKIPPED).

Over UDP memcached 1.6.18 runs every request of a datagram, in order (a set after a
get too), and so does offlow; the UDP steps pipeline several requests in a datagram to
check it. The binary get of a 251-byte key comes last: after it memcached's UDP
connection reads only the first request of every later datagram (a sticky quirk of
its error path, seen with `-t 1` and with several threads), which an earlier session
took for memcached's rule and copied (offlow then skipped the requests after a text
get, stats or mn, or a binary NOOP, STAT or error: a set after a get in one datagram
was silently not run).

Left out on purpose (memcached's behaviour is a quirk, not protocol): an unknown
binary opcode carrying a key (memcached skips key + extras bytes too many after it,
desynchronizing the stream), a value of exactly 1 MiB (memcached's limit counts its
item header), flags above 2^32 - 1 (memcached wraps them), a bad key inside a text
multi-get pipelined behind other requests (memcached drops the answers queued before
the error), and what offlow does not keep (slab classes: "stats slabs/items/sizes",
"me"; the admin commands lru_crawler, slabs, watch, cache_memlimit).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from dataclasses import dataclass

HDR = struct.Struct(">BBHBBHIIQ")
UDP_HDR = struct.Struct(">HHHH")
SENTINEL_KEY = b"__offlow_interop_sentinel__"
SENTINEL_VALUE = b"S3NT1N3L-0ffl0w!"

OP_GET, OP_SET, OP_ADD, OP_REPLACE, OP_DELETE = 0x00, 0x01, 0x02, 0x03, 0x04
OP_QUIT, OP_GETQ, OP_NOOP, OP_VERSION, OP_GETK, OP_GETKQ = 0x07, 0x09, 0x0A, 0x0B, 0x0C, 0x0D
OP_SETQ, OP_ADDQ, OP_REPLACEQ, OP_DELETEQ, OP_QUITQ = 0x11, 0x12, 0x13, 0x14, 0x17
OP_INCR, OP_DECR, OP_FLUSH, OP_APPEND, OP_PREPEND, OP_STAT = 0x05, 0x06, 0x08, 0x0E, 0x0F, 0x10
OP_INCRQ, OP_DECRQ, OP_FLUSHQ, OP_APPENDQ, OP_PREPENDQ = 0x15, 0x16, 0x18, 0x19, 0x1A
OP_TOUCH, OP_GAT, OP_GATQ, OP_GATK, OP_GATKQ = 0x1C, 0x1D, 0x1E, 0x23, 0x24

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
        Step("verbosity (0x1b) is unknown to memcached 1.6", bin_req(0x1B, opaque=26)),
        Step("sasl list mechs without sasl is unknown", bin_req(0x20, opaque=25)),
        *_binary_more(prefix),
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


def _arith(delta: int, initial: int = 0, exptime: int = 0) -> bytes:
    """INCREMENT/DECREMENT extras: delta, initial value, expiry."""
    return struct.pack(">QQI", delta, initial, exptime & 0xFFFFFFFF)


def _binary_more(prefix: bytes) -> list[Step]:
    """The binary opcodes besides get/set/delete: append, prepend, incr, decr, touch,
    gat, flush, stat, their quiet forms and shape errors (which close)."""
    ap, n, t, nope = (_k(prefix, x) for x in (b"ap", b"n", b"t", b"nope"))
    ex = store_extras
    e0, e100 = struct.pack(">I", 0), struct.pack(">I", 100)   # touch / gat expiries
    return [
        Step("append to a missing key", bin_req(OP_APPEND, ap, value=b"x", opaque=31)),
        Step("set for append", bin_req(OP_SET, ap, ex(9), b"mid")),
        Step("append", bin_req(OP_APPEND, ap, value=b">>", opaque=32)),
        Step("prepend", bin_req(OP_PREPEND, ap, value=b"<<", opaque=33)),
        Step("appendq and prependq are silent",
             bin_req(OP_APPENDQ, ap, value=b"!") + bin_req(OP_PREPENDQ, ap, value=b"!")),
        Step("prependq to a missing key answers", bin_req(OP_PREPENDQ, nope, value=b"x")),
        Step("get after append and prepend", bin_req(OP_GET, ap), capture="ap"),
        Step("append with the current cas",
             lambda v: bin_req(OP_APPEND, ap, value=b"c", cas=v["ap"])),
        Step("append with a stale cas", lambda v: bin_req(OP_APPEND, ap, value=b"c", cas=v["ap"])),
        Step("incr of a missing key creates the initial value",
             bin_req(OP_INCR, n, _arith(5, 40), opaque=34)),
        Step("incr", bin_req(OP_INCR, n, _arith(5, 40), opaque=35)),
        Step("decr past zero stops at zero", bin_req(OP_DECR, n, _arith(1000))),
        Step("incr wraps at 2^64", bin_req(OP_SET, n, ex(), b"18446744073709551615")
             + bin_req(OP_INCR, n, _arith(2))),
        Step("get after incr (padded in place)", bin_req(OP_GET, n)),
        Step("incr of a missing key with expiry 0xffffffff is a miss",
             bin_req(OP_INCR, nope, _arith(1, 0, -1), opaque=36)),
        Step("incr of a non-number", bin_req(OP_INCR, ap, _arith(1), opaque=37)),
        Step("incrq and decrq are silent", bin_req(OP_INCRQ, n, _arith(3))
             + bin_req(OP_DECRQ, n, _arith(1)) + bin_req(OP_GET, n)),
        Step("incr with a wrong cas", bin_req(OP_INCR, n, _arith(1), cas=1)),
        Step("touch", bin_req(OP_SET, t, ex(4), b"tv") + bin_req(OP_TOUCH, t, e100)),
        Step("touch of a missing key", bin_req(OP_TOUCH, nope, e100)),
        Step("gat and gatk", bin_req(OP_GAT, t, e0, opaque=38)
             + bin_req(OP_GATK, t, e0, opaque=39)),
        Step("gat misses", bin_req(OP_GAT, nope, e0)
             + bin_req(OP_GATK, nope, e0)),
        Step("gatq and gatkq: silent misses, answered hits",
             bin_req(OP_GATQ, nope, e0) + bin_req(OP_GATKQ, t, e0)
             + bin_req(OP_GATQ, t, e0)),
        Step("stat reset then the counters",
             bin_req(OP_STAT, b"reset") + bin_req(OP_GET, t) + bin_req(OP_GET, nope)
             + bin_req(OP_STAT, opaque=40)),
        Step("stat settings", bin_req(OP_STAT, b"settings")),
        Step("stat of an unknown group", bin_req(OP_STAT, b"bogus", opaque=41)),
        Step("flush with a far delay keeps the items",
             bin_req(OP_FLUSH, b"", struct.pack(">I", 100000)) + bin_req(OP_GET, t)),
        Step("flush", bin_req(OP_FLUSH, opaque=42) + bin_req(OP_GET, t)),
        Step("flushq is silent", bin_req(OP_SET, t, ex(), b"x") + bin_req(OP_FLUSHQ)
             + bin_req(OP_GET, t)),
        Step("incr with short extras closes", bin_req(OP_INCR, n, b"\0" * 8)),
        Step("touch without extras closes", bin_req(OP_TOUCH, t)),
        Step("flush with a key closes", bin_req(OP_FLUSH, b"k")),
        Step("stat with extras closes", bin_req(OP_STAT, b"", b"\0\0\0\0")),
        Step("append with extras closes", bin_req(OP_APPEND, ap, b"\0\0\0\0", b"x")),
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
        *_text_more(k),
        Step("version ignores arguments", b"version now\r\n"),
        Step("quit closes", b"quit\r\n"),
        Step("get after reconnecting", b"get " + k(b"a") + b" " + k(b"e") + b"\r\n"),
    ]


def _text_more(k: Callable[[bytes], bytes]) -> list[Step]:
    """append/prepend, incr/decr, touch, gat/gats, flush_all, stats, verbosity, shutdown."""
    ap, n, t, nope = k(b"ap"), k(b"n"), k(b"t"), k(b"nope")
    sentinel = b"set " + SENTINEL_KEY + b" 0 0 %d\r\n" % len(SENTINEL_VALUE) + SENTINEL_VALUE
    return [
        Step("append to a missing key", b"append " + ap + b" 0 0 1\r\nx\r\n"),
        Step("append and prepend keep the flags",
             b"set " + ap + b" 7 0 3\r\nmid\r\nappend " + ap + b" 9 0 2\r\n>>\r\nprepend "
             + ap + b" 9 0 2\r\n<<\r\nget " + ap + b"\r\n"),
        Step("append noreply", b"append " + ap + b" 0 0 1 noreply\r\n!\r\nget " + ap + b"\r\n"),
        Step("incr and decr", b"set " + n + b" 5 0 3\r\n100\r\ndecr " + n + b" 95\r\nget " + n
             + b"\r\nincr " + n + b" 1000\r\ngets " + n + b"\r\n"),
        Step("incr wraps, decr stops at zero", b"set " + n + b" 0 0 20\r\n18446744073709551615"
             b"\r\nincr " + n + b" 1\r\ndecr " + n + b" 5\r\nget " + n + b"\r\n"),
        Step("incr of numbers with spaces and a sign",
             b"set " + n + b" 0 0 3\r\n 12\r\nincr " + n + b" 1\r\nset " + n
             + b" 0 0 3\r\n+12\r\nincr " + n + b" 1\r\nget " + n + b"\r\n"),
        Step("incr of what is not a number",
             b"set " + n + b" 0 0 2\r\n-1\r\nincr " + n + b" 1\r\nset " + n
             + b" 0 0 0\r\n\r\nincr " + n + b" 1\r\nset " + n + b" 0 0 3\r\n1x2\r\nincr "
             + n + b" 1\r\n"),
        Step("incr of a missing key", b"incr " + nope + b" 1\r\ndecr " + nope + b" 1\r\n"),
        Step("incr noreply", b"set " + n + b" 0 0 1\r\n5\r\nincr " + n + b" 2 noreply\r\nget "
             + n + b"\r\n"),
        Step("incr with a bad delta", b"incr " + n + b" x\r\nincr " + n + b" -1\r\n"),
        Step("incr with a wrong argument count", b"incr " + n + b"\r\nincr " + n + b" 1 2 3\r\n"),
        Step("touch", b"set " + t + b" 3 0 2\r\nhi\r\ntouch " + t + b" 100\r\ntouch " + nope
             + b" 1\r\ntouch " + t + b" 1 noreply\r\n"),
        Step("touch with a bad expiry", b"touch " + t + b" x\r\ntouch " + t + b"\r\n"),
        Step("gat and gats", b"gat 100 " + t + b" " + nope + b" " + t + b"\r\ngats 0 " + t
             + b"\r\n"),
        Step("gat without a key, gat with a bad expiry", b"gat 100\r\ngat x " + t + b"\r\n"),
        Step("touch with a negative expiry expires", b"touch " + t + b" -1\r\nget " + t + b"\r\n"),
        Step("stats reset then the counters",
             b"stats reset\r\nset " + t + b" 0 0 1\r\nx\r\nget " + t + b" " + nope
             + b"\r\ndelete " + nope + b"\r\nincr " + nope + b" 1\r\ntouch " + t
             + b" 0\r\nstats\r\n"),
        Step("stats settings", b"stats settings\r\n"),
        Step("stats of an unknown group", b"stats bogus\r\n"),
        Step("verbosity", b"verbosity 1\r\nverbosity 1 noreply\r\nverbosity\r\nverbosity x\r\n"),
        Step("shutdown is not enabled", b"shutdown\r\n"),
        Step("flush_all with a far delay keeps the items",
             b"set " + t + b" 0 0 1\r\nx\r\nflush_all 100000\r\nget " + t + b"\r\n"),
        Step("flush_all", b"flush_all\r\nget " + t + b"\r\n" + sentinel + b"\r\n"),
        Step("flush_all noreply and with a zero delay",
             b"set " + t + b" 0 0 1\r\nx\r\nflush_all noreply\r\nget " + t
             + b"\r\nflush_all 0\r\nflush_all 0 noreply\r\n" + sentinel + b"\r\n"),
        Step("flush_all with bad arguments", b"flush_all x\r\nflush_all 1 2 3\r\n"),
    ]


def meta_steps(prefix: bytes = b"im:") -> list[Step]:
    """The meta commands (mg, ms, md, ma, mn) with their flags, over TCP."""
    def k(x: bytes) -> bytes:
        return prefix + x
    a, c, d, v, r, n, nope = k(b"a"), k(b"c"), k(b"d"), k(b"v"), k(b"r"), k(b"n"), k(b"nope")
    b64 = base64.b64encode(k(b"binary key")).decode().encode()
    return [
        Step("mn", b"mn\r\nmn with arguments\r\n"),
        Step("mg miss", b"mg " + nope + b"\r\nmg " + nope + b" k O123 v\r\n"),
        Step("mg miss with q is silent", b"mg " + nope + b" q\r\nmn\r\n"),
        Step("ms", b"ms " + a + b" 3\r\nabc\r\nmg " + a + b"\r\nmg " + a + b" v\r\n"),
        Step("mg flags in order", b"mg " + a + b" s f k O9 v h c\r\nmg " + a + b" h l t\r\n"),
        Step("ms with flags, q, T and F", b"ms " + a + b" 2 q F5 T0\r\nxy\r\nmg " + a
             + b" v f t\r\nms " + a + b" 1 c k O7\r\nz\r\n"),
        Step("ms modes", b"ms " + a + b" 1 ME\r\nq\r\nms " + a + b" 1 MA\r\nq\r\nms " + a
             + b" 1 MP\r\np\r\nmg " + a + b" v\r\nms " + nope + b" 1 MR\r\nq\r\nms " + nope
             + b" 1 MA\r\nq\r\nms " + a + b" 1 MS\r\ns\r\n"),
        Step("ms with a cas", b"ms " + c + b" 1\r\na\r\nmg " + c + b" c\r\n", capture="c"),
        Step("ms with the current and a stale cas",
             lambda vals: b"ms " + c + b" 1 C%d\r\nb\r\nms " % vals["c"] + c
             + b" 1 C%d\r\nb\r\n" % vals["c"]),
        Step("ms with a cas on a missing key", b"ms " + nope + b" 1 C5\r\nb\r\n"),
        Step("ms base64 key", b"ms " + b64 + b" 3 b\r\nbar\r\nmg " + b64 + b" b v k\r\nget "
             + k(b"binary key") + b"\r\n"),
        Step("md", b"ms " + d + b" 1\r\na\r\nmd " + d + b" q\r\nmd " + d + b"\r\nmd " + d
             + b" k O5\r\n"),
        Step("md with a stale cas", b"ms " + d + b" 1\r\na\r\nmd " + d + b" C1\r\n"),
        Step("md invalidate, then mg wins and then sees it won",
             b"md " + d + b" I T30\r\nmg " + d + b" v c\r\nmg " + d + b" v\r\nms " + d
             + b" 1\r\nb\r\nmg " + d + b"\r\n"),
        Step("ma miss", b"ma " + nope + b"\r\nma " + nope + b" q\r\nmn\r\n"),
        Step("ma creates with N and J", b"ma " + n + b" N0 J10\r\nma " + n + b" v\r\nma " + n
             + b" MD D3 v\r\nma " + n + b" M- v t\r\nma " + n + b" q\r\nmg " + n + b" v\r\n"),
        Step("ma of what is not a number", b"ms " + a + b" 2\r\nab\r\nma " + a + b"\r\n"),
        Step("ma with a stale cas", b"ma " + n + b" C1\r\n"),
        Step("mg N creates and wins", b"mg " + v + b" N30 v\r\nmg " + v + b" v\r\nmg " + v
             + b"\r\n"),
        Step("mg R wins near the end of the TTL", b"ms " + r + b" 1 T10\r\nr\r\nmg " + r
             + b" R30 v\r\nmg " + r + b" v\r\n"),
        Step("mg T touches, t reports in order",
             b"mg " + r + b" T100 t v\r\nmg " + r + b" t T200 t\r\nmg " + r + b" u\r\n"),
        Step("meta flag errors",
             b"mg " + a + b" Z\r\nmg " + a + b" s s\r\nmg " + a + b" Tx\r\nmd " + a
             + b" Z\r\nma " + a + b" Mx\r\nmg " + a + b" O" + b"9" * 40 + b"\r\n"),
        Step("mg with too many flags", b"mg " + a + b" " + b" ".join([b"O1"] * 20) + b"\r\n"),
        Step("meta without a key", b"mg\r\nmd\r\nma\r\nmx " + a + b"\r\n"),
        Step("ms flag errors skip the data block",
             b"ms " + a + b" 1 Z\r\nx\r\nms " + a + b" 1 Mx\r\nx\r\nms " + a + b" x\r\n"),
    ]


def udp_dgram(rid: int, payload: bytes, seq: int = 0, count: int = 1) -> bytes:
    """A UDP datagram: the memcached frame header, then `payload`."""
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
        ("text get", b"get " + a + b" " + b + b"\r\n", "", ""),
        ("text set and get", b"set " + b + b" 3 0 4\r\ntext\r\nget " + b + b"\r\n", "", ""),
        ("truncated request is dropped", bin_req(OP_GET, a)[:-1], "", ""),
        ("unknown opcode", bin_req(0x5F, value=b"zz", opaque=11), "", ""),
        ("setq is silent", bin_req(OP_SETQ, b, ex(), b"q") + bin_req(OP_GETQ, b, opaque=12),
         "", ""),
        ("append, an incr error, and a get after it",
         bin_req(OP_APPEND, b, value=b"1") + bin_req(OP_INCR, b, _arith(2))
         + bin_req(OP_GET, b), "", ""),
        ("requests after a get miss and a getk miss",
         bin_req(OP_GETK, k251[:-1], opaque=13) + bin_req(OP_GET, a, opaque=14)
         + bin_req(OP_GET, k251[:-1], opaque=15) + bin_req(OP_GET, a, opaque=16), "", ""),
        ("requests after a text get", b"get " + a + b"\r\nversion\r\n", "", ""),
        ("a set after a get, then a get of it",
         b"get " + a + b"\r\nset " + b + b" 0 0 5\r\nafter\r\nget " + b + b"\r\n", "", ""),
        ("requests after a noop and an unknown opcode",
         bin_req(OP_NOOP, opaque=17) + bin_req(0x5F, opaque=18) + bin_req(OP_GET, a, opaque=19)
         + bin_req(OP_DELETE, b) + bin_req(OP_GET, b, opaque=20), "", ""),
        ("text incr, touch and gat", b"set " + b + b" 0 0 1\r\n1\r\nincr " + b + b" 4\r\ntouch "
         + b + b" 100\r\ngat 0 " + b + b"\r\n", "", ""),
        ("meta commands", b"ms " + b + b" 2 c\r\nmm\r\nmg " + b + b" v s\r\nmd " + b
         + b" q\r\nmn\r\nversion\r\n", "", ""),
    ]
    steps = [Step(name, udp_dgram(0x1000 + i, data), capture=cap, known=known)
             for i, (name, data, cap, known) in enumerate(plain)]
    steps += [
        Step("multi-datagram request is dropped", udp_dgram(0x2001, bin_req(OP_GET, a), 0, 2)),
        Step("datagram shorter than the frame header is dropped", b"\x00\x01\x00"),
        Step("frame header alone gets nothing", udp_dgram(0x2002, b"")),
        Step("sequence and reserved fields are ignored",
             UDP_HDR.pack(0x2003, 5, 1, 9) + bin_req(OP_GET, a)),
        # last: memcached's UDP connection reads only the first request of each datagram
        # after this error (module docstring)
        Step("key of 251 bytes", udp_dgram(0x2004, bin_req(OP_GET, k251))),
    ]
    return steps


def sequences() -> list[Script]:
    """The four sequences compare() replays."""
    return [Script("binary-tcp", "tcp", False, tuple(binary_steps())),
            Script("text-tcp", "tcp", True, tuple(text_steps())),
            Script("meta-tcp", "tcp", True, tuple(meta_steps())),
            Script("binary-udp", "udp", False, tuple(udp_steps()))]


