"""Short libFuzzer runs (with ASan+UBSan) of the header parsers, the pcap source,
the prefix-file / size-mix parsers and the route tables (prefix text -> DIR-24-8 and
IPv6 tables -> lookups against brute force), the memcached request parser (binary, text
and UDP-framed streams, run against a small key-value store), the NIC cache of the
key-value store (arbitrary requests and replies on both sides), the segmentation
offload's descriptor and template parser (every descriptor it takes cut into packets
that must fit), the CBC key-table parser and decryption of arbitrary ciphertexts, the
word count's word splitter, from small seed corpora made of valid and malformed inputs;
the TSPLIB parser, whose cities are then climbed (the tour a permutation of the length
returned); the remote ring bridge's messages from a peer and a remote device's run
setup from a host; control requests staged in parts and long replies read back (a map
whose entries fit no message); the xdp target's map control over real BPF hash maps (skipped where
libbpf is missing or the kernel refuses to make a BPF map).  Skipped
when clang cannot build libFuzzer targets."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from offlow import cbuild
from offlow.errors import OfflowError
from offlow.kvs.steps import binary_steps, meta_steps, text_steps, udp_steps
from offlow.paths import DATA
from offlow.targets import xdp
from offlow.targets.base import missing_package
from offlow.testing import malformed_cases
from offlow.testing.malformed import write_pcap

FUZZ = Path(__file__).resolve().parent / "fuzz"
# target -> the runtime library it fuzzes (and links, with the core)
TARGETS = {"pkt": "core", "pcap": "core", "prefixes": "core", "routes": "lpm", "ctl": "lpm",
           "ctl6": "lpm",
           "mcproto": "kvs", "chan": "core", "kvcache": "kvs", "lso": "lso", "tuple": "streams",
           "cbc": "crypto", "tsplib": "tsp", "words": "streams", "remote": "remote",
           "remote_setup": "remote", "remote_chan": "remote", "mcjoin": "kvs", "map": "map",
           "map_ctl": "map", "kvs_span": "kvs", "xdp_mapctl": "map", "ctl_stage": "map"}
# targets of offlow's C tools: their sources beside the target's, their folder's headers
TOOLS = cbuild.RUNTIME / "tools"
TOOL_SOURCES = {"remote_chan": [TOOLS / "remote_chan.c"],
                "xdp_mapctl": [TOOLS / "xdp_mapctl.c", TOOLS / "xdp_tables.c"]}
# more libraries a target links: runtime libraries, then system ones (-l)
MORE_LIBS = {"xdp_mapctl": ["lpm"]}
LINK = {"xdp_mapctl": ["-lbpf"]}
# exit status of a target that cannot run here (it prints "SKIP: the reason" first)
SKIP_STATUS = 79  # (libFuzzer exits 77 on a crash)
SETS = ("base", "fuzz", "werror")
RUNS = 200_000       # per target; whichever of this and the time limit comes first
SECONDS = 10


def _libfuzzer_problem(tmp: Path) -> str | None:
    """Why libFuzzer targets cannot be built here, or None."""
    cc = cbuild.description().compiler(*SETS)
    if shutil.which(cc) is None:
        return f"{cc} is not installed"
    src = tmp / "probe.c"
    src.write_text("#include <stddef.h>\n#include <stdint.h>\n"
                   "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)"
                   "{ (void)d; (void)n; return 0; }\n")
    res = subprocess.run([cc, *cbuild.flags(*SETS), str(src), "-o", str(tmp / "probe")],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return f"clang cannot link -fsanitize=fuzzer (libclang-rt-dev missing?): " \
               f"{res.stderr.strip()[:300]}"
    return None


def _unbuildable() -> dict[str, str]:
    """Targets that cannot be built here: target -> why."""
    if not xdp.BPF_HEADERS.exists():
        return {"xdp_mapctl": missing_package("libbpf-dev", "libbpf: the BPF map the "
                                              "xdp target's map control runs on")}
    return {}


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli, reflected 0x82F63B78), bit by bit: the fuzz seeds' bulk
    transfers carry it as the remote link's sender computes it."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _seed_corpus(target: str, d: Path) -> None:
    d.mkdir(parents=True)
    cases = malformed_cases()
    if target == "pkt":
        for i, c in enumerate(cases):
            (d / f"frame{i}").write_bytes(c.frame)
    elif target == "pcap":
        write_pcap(d / "valid.pcap", [c for c in cases if c.category.startswith("valid")][:6])
        write_pcap(d / "mixed.pcap", cases[:12])
        write_pcap(d / "snap64.pcap", cases[:4], snaplen=64)
        if (DATA / "quic.pcap").exists():
            (d / "quic_head.pcap").write_bytes((DATA / "quic.pcap").read_bytes()[:2000])
    elif target == "routes":
        (d / "nested").write_text("\x05\x0f0.0.0.0/0\n10.0.0.0/8\n10.1.0.0/16\n10.1.2.0/24\n"
                                  "10.1.2.128/25\n10.1.2.255/32\n10.1.3.7/31\n")
        (d / "v6").write_text("\x09\x03::/0\n2001:db8::/32\n2001:db8::/48\n2001:db8::/64\n"
                              "2001:db8::8000:0:0:0/65\n2001:db8::1/128\n::ffff:10.0.0.0/104\n"
                              "fe80::1:2/10 x\n1::2::3/64\n")
        (d / "mixed").write_text("\x00\x00192.0.2.0/24,65000\r\n2001:4:112::/48|x\n"
                                 "# c\n8.8.8.8\n1:2:3:4:5:6:7:8/127\n")
    elif target == "ctl":
        # messages, each a length byte then its bytes (runtime/core ctl.h; offlow/control.py)
        from offlow.control import route_message

        msgs = [route_message("add", "10.1.2.0/26", 9), route_message("del", "10.1.2.128/25"),
                route_message("add", "0.0.0.0/0", 1), route_message("add", "10.1.2.129/32", 7),
                route_message("del", "10.0.0.0/8"), b"i", b"g\x01\0\0\0",
                b"s\x03\0\0\0\x05\0\0\0", b"a\x21\x01\0" + bytes(16)]
        (d / "routes").write_bytes(b"".join(bytes([len(m)]) + m for m in msgs))
    elif target == "ctl6":
        from offlow.control import route_message

        msgs = [route_message("add", "2001:db8:0:1::/64", 9), route_message("del", "2001:db8::/32"),
                route_message("add", "::/0", 1), route_message("add", "2001:db8::7/128", 7),
                route_message("del", "2001:db8:1::/48"), b"i", b"a\x81\x01\0" + bytes(16),
                b"a\x08\x01\0" + bytes([0x20, 1]) + bytes(14)]
        (d / "routes").write_bytes(b"".join(bytes([len(m)]) + m for m in msgs))
        # a batch: begin, staged adds and deletes (capital letters), commit
        batch = [b"b", *(m[:1].upper() + m[1:] for m in msgs[:5]), b"c", b"A\x08\x01\0"
                 + bytes(16), b"c"]
        (d / "batch").write_bytes(b"".join(bytes([len(m)]) + m for m in batch))
    elif target == "mcproto":
        # first byte: framing (0 binary, 1 text, 2 UDP, 3 sniffed) + limit bits + 16:
        # trusted exec; second: cut
        for name, mode, steps in (("bin", 0, binary_steps()), ("text", 1, text_steps()),
                                  ("meta", 1, meta_steps()), ("udp", 2, udp_steps())):
            for i, st in enumerate(steps):
                if callable(st.data) or len(st.data) > 4096:
                    continue
                flags = (4 if i % 3 == 0 else 0) | (16 if i % 2 else 0)
                (d / f"{name}{i}").write_bytes(bytes([mode | flags, i]) + st.data)
        # bit 5: a storage command (second byte: set add replace append prepend cas ms)
        # with these arguments, a length of 13 and a data block reading "delete victim"
        for i, args in enumerate((b"k 0 0", b"k 0 0 noreply", b"k 0 0 noreply extra", b"k x 0",
                                  b"k 0 x 5", b"k" * 251 + b" 0 0", b"k 0", b"k",
                                  b"k Mx", b"k F1 F1 q", b"k Tx", b"k b", b"k O" + b"9" * 40)):
            for cmd in range(7):
                (d / f"inject{i}_{cmd}").write_bytes(bytes([32, cmd]) + args)
    elif target == "kvcache":
        # first byte: policy / eviction / header-only replies; then records [kind][len][bytes]:
        # kind 0x80: a request (32 spare bytes for a reply), 1: the store answers the oldest
        dgrams = [st.data for st in udp_steps() if not callable(st.data) and len(st.data) <= 255]
        for mode in range(8):
            seq = bytes([mode])
            for i, dg in enumerate(dgrams):
                seq += bytes([0x80, len(dg)]) + dg + (bytes([1, 0]) if i % 2 else b"")
            (d / f"seq{mode}").write_bytes(seq + bytes([1, 0]) * 4)
    elif target == "lso":
        for name, desc in lso_seed_descriptors():
            (d / name).write_bytes(desc)
    elif target == "tuple":
        from offlow.streams.tuples import Tuple, frame

        for n in (1, 3, 39, 64, 128):
            f = frame(Tuple(0, tuple(range(-n, n, 2))[:n]), 7001)
            (d / f"tuple{n}").write_bytes(bytes([n + 1]) + f[1:])  # first byte: the count
            (d / f"cut{n}").write_bytes(f[:-3])
    elif target == "mcjoin":  # a request id, then datagrams as a 2-byte length and bytes
        def dgram(rid: int, seq: int, count: int, payload: bytes) -> bytes:
            d = struct.pack("!HHHH", rid, seq, count, 0) + payload
            return struct.pack("!H", len(d)) + d
        (d / "three").write_bytes(b"\x00\x07" + dgram(7, 2, 3, b"c" * 100) + dgram(7, 0, 3, b"a")
                                  + dgram(9, 1, 3, b"stale") + dgram(7, 1, 3, b"b" * 1400))
        (d / "empty").write_bytes(b"\x00\x01" + dgram(1, 0, 0, b""))
        (d / "one").write_bytes(b"\x12\x34" + dgram(0x1234, 0, 1, b"STORED\r\n"))
    elif target == "kvs_span":  # the steering hash's low byte, then a memcached datagram
        def dgram(payload: bytes) -> bytes:
            return b"\x05" + struct.pack("!HHHH", 0x1234, 0, 1, 0) + payload
        getk = struct.pack("!BBHBBHIIQ", 0x80, 0x0C, 1, 0, 0, 0, 1, 9, 0)
        (d / "text").write_bytes(dgram(b"get a bb ccc dddd a\r\n"))
        (d / "gat").write_bytes(dgram(b"gat 0 k1 k2 k3\r\nget zz\r\n"))
        (d / "meta").write_bytes(dgram(b"mg dXNlcg== b v\r\nmg k2 v\r\n"))
        (d / "binary").write_bytes(dgram(getk + b"a" + getk + b"b"))
        (d / "cut").write_bytes(dgram(b"get " + b"k " * 300)[:-40])
    elif target == "words":
        (d / "line").write_bytes(b"  the quick\tbrown\r\nfox \x0b\x0c jumps\0over \xff")
        (d / "empty").write_bytes(b"")
        (d / "spaces").write_bytes(b" \t\n\r\x0b\x0c")
    elif target == "cbc":  # first byte: 0 AES, 1 Blowfish; then a key table
        line = "10.0.0.1:1 10.0.0.2:2 " + "ab" * 16 + " " + "cd" * 16
        (d / "aes").write_bytes(b"\0# keys\n" + line.encode() + b"  # one\r\n\n")
        (d / "bf").write_bytes(b"\1" + f"1.2.3.4:5 6.7.8.9:10 {'01' * 7} {'02' * 8}\n".encode())
        (d / "twice").write_bytes(b"\0" + (line + "\n").encode() * 2)
        (d / "blocks").write_bytes(b"\0" + bytes(range(48)))
    elif target == "remote":  # [kind-16][hlen][dlen lo, hi][release][hdr][data]
        def msg(kind: int, hdr: bytes, body: bytes, release: int = 0) -> bytes:
            return bytes([kind, len(hdr), len(body) & 255, len(body) >> 8, release]) + hdr + body
        entry = struct.pack("<IHH", 0, 5, 0) + bytes(8) + b"hello" + bytes(19)
        two = msg(0, struct.pack("<IIII", 0, 2, 0, 0), entry * 2, 1)
        (d / "entries").write_bytes(two + msg(0, struct.pack("<IIII", 0, 1, 1, 2), entry))
        (d / "credit").write_bytes(msg(1, struct.pack("<II", 1, 20), b""))
        (d / "toolong").write_bytes(msg(0, struct.pack("<IIII", 0, 1, 0, 0),
                                        struct.pack("<IHH", 0, 999, 0) + bytes(32)))
    elif target == "remote_setup":  # [header bytes][header][directions, arguments]
        def setup(nrings: int, npeers: int, exe: int, body: bytes, hlen: int = 16) -> bytes:
            return bytes([hlen]) + struct.pack("<IIQ", nrings, npeers, exe)[:hlen] + body
        (d / "ttl").write_bytes(setup(1, 1, 4096, b"o--cpu-base\x001\x00--opt\x00rx.loops=1\x00"))
        (d / "router").write_bytes(setup(2, 2, 9, b"io--serve\x00"))
        (d / "no_nul").write_bytes(setup(1, 0, 1, b"-abc"))
        (d / "bad_dir").write_bytes(setup(3, 0, 1, b"ox?"))
        (d / "short").write_bytes(setup(1, 0, 1, b"o", hlen=12))
    elif target == "remote_chan":  # [bulk?][hlen][dlen lo, hi][hdr][data], repeated
        def chan(bulk: bool, hdr: bytes, body: bytes) -> bytes:
            return bytes([bulk, len(hdr), len(body) & 255, len(body) >> 8]) + hdr + body
        blob = bytes(range(200))
        (d / "direct").write_bytes(chan(False, struct.pack("<I", 0), b"hello") +
                                   chan(False, struct.pack("<I", 1), bytes(56)))
        (d / "bulk").write_bytes(chan(True, struct.pack("<IIQ", 1, crc32c(blob), 200), blob))
        (d / "bad_crc").write_bytes(chan(True, struct.pack("<IIQ", 0, 1234, 200), blob) +
                                    chan(False, struct.pack("<I", 0), b"after"))
        (d / "toolong").write_bytes(chan(False, struct.pack("<I", 0), bytes(57)))
        (d / "nochan").write_bytes(chan(False, struct.pack("<I", 7), b"x"))
    elif target == "map":  # key size and entries, then (operation, key, value) steps
        steps = bytes(b for i in range(40) for b in (i % 3, i * 5 % 32, i))
        (d / "small").write_bytes(bytes([0x30]) + steps)
        (d / "wide").write_bytes(bytes([0xfc]) + steps)
    elif target == "map_ctl":  # key size and entries, then messages (length byte, bytes)
        key = bytes(range(1, 8))   # a 7-byte key: first byte 0x06
        msgs = [b"s" + key + b"\x2e\x00", b"g" + key, b"n\0\0\0\0", b"d" + key, b"d" + key,
                b"i", b"k\0\0", b"k\x05\0", b"s" + key, b"z"]
        msgs += [b"s" + bytes([i]) + key[1:] + b"\x01\x00" for i in range(10)]
        (d / "seven").write_bytes(bytes([0x26]) + b"".join(bytes([len(m)]) + m for m in msgs))
    elif target == "ctl_stage":  # key size and entries, then messages as map_ctl's
        (d / "staged").write_bytes(_staged_seed())
    elif target == "xdp_mapctl":  # the map's shape, then steps: kind | key number << 3
        def op(kind: int, key: int = 0, *args: int) -> bytes:
            return bytes([kind | key << 3, *args])
        fill = b"".join(op(1, k, k * 3) for k in range(8))      # sets past `entries`
        walk = op(3, 0, 0) + op(4) * 8                           # 'n' at 0, going on
        rest = (op(5) + op(2, 1) + op(2, 1) + op(0, 1) + op(0, 0) + walk + op(3, 0, 0x80)
                + b"\xff" * 4 + op(6, 0, 5) + op(6, 0, 200) + op(1, 1, 9) + op(1, 30, 9)
                + op(7, 0, 2, ord("s"), 1) + op(7, 0, 1, ord("z")) + op(7, 0, 0) + op(5))
        for shape in range(4):
            (d / f"shape{shape}").write_bytes(bytes([shape]) + fill + walk + rest)
            (d / f"churn{shape}").write_bytes(bytes([shape]) + (op(1, 2, 1) + op(3, 0, 0)
                                                                + op(2, 2) + op(4)) * 6)
    elif target == "tsplib":
        head = "NAME : x\nTYPE : TSP\nDIMENSION : 5\nEDGE_WEIGHT_TYPE : EUC_2D\n"
        nodes = "NODE_COORD_SECTION\n1 0 0\n2 3 4\n3 1.5e2 -7\n5 9 9\n4 2 2\nEOF\n"
        (d / "five").write_bytes((head + nodes).encode())
        (d / "crlf").write_bytes((head + nodes).replace("\n", "\r\n").encode())
        (d / "short").write_bytes((head + nodes[:40]).encode())
        (d / "geo").write_bytes(head.replace("EUC_2D", "GEO").encode())
    else:
        (d / "prefixes").write_text("1.0.0.0/24\n  10.1.0.0/16 65000 x\n2001:db8::/32\n"
                                    "# comment\n8.8.8.8\ngarbage\n")
        (d / "imix").write_text("64:7,576:4,1500:1")
        (d / "sizes").write_text("64,128,1500")


def _staged_seed() -> bytes:
    """fuzz_ctl_stage's seed: a map of 57-byte keys and 2-byte values (4 entries), a set
    staged in parts and run, a get and a delete staged, a walk whose replies are kept; a
    request abandoned half-way, parts out of order and past the end, reads past a kept
    reply (runtime ctl.h: 'S', 'P', 'X', 'R'); another client (the length byte 255)
    after one staged a whole request and one kept a reply, its 'X' and 'R' first."""
    def staged(req: bytes, cut: int | None = None) -> list[bytes]:
        parts = [b"P" + struct.pack("<I", at) + req[at:at + 51] for at in range(0, len(req), 51)]
        return [b"S" + struct.pack("<I", len(req)), *parts[:cut], b"X"]

    key = bytes(range(1, 58))
    msgs = [*staged(b"s" + key + b"\x2e\x00"), *staged(b"g" + key), b"n\0\0\0\0",
            b"R\0\0\0\0", b"R\x34\0\0\0", b"R\x50\0\0\0", *staged(b"s" + key[::-1] + b"\1\0", 1),
            b"P\x07\0\0\0abc", *staged(b"d" + key), *staged(b"d" + key), b"S\0\0\0\0",
            b"S\xff\0\0\0", b"X", b"Pxx", *staged(b"S" + key), b"i",
            *staged(b"s" + key + b"\1\0")[:-1], None, b"X", b"n\0\0\0\0", None,
            b"R\0\0\0\0"]
    return bytes([56 | 3 << 6]) + b"".join(b"\xff" if m is None else bytes([len(m)]) + m
                                           for m in msgs)


def lso_seed_descriptors() -> list[tuple[str, bytes]]:
    """Seeds for fuzz_lso: link MTU, frame size and PIO flag, then a descriptor (its
    fixed part, little-endian, and a header template made by scapy)."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Dot1Q, Ether

    templates = [Ether() / IP() / TCP(), Ether() / Dot1Q() / IPv6() / TCP(options=[("NOP", 0)] * 4),
                 Ether() / IP(options=b"\x01\x01\x01\x00") / UDP(), Ether() / IPv6() / UDP()]
    out = []
    for i, t in enumerate(templates):
        raw = bytes(t)
        for j, (mtu, length, mss, flags) in enumerate([(1500, 3000, 1460, 0), (512, 65535, 400, 1),
                                                       (9000, 0, 8000, 0), (576, 999, 8, 1)]):
            head = struct.pack("<HHB", mtu, mtu + 22, j % 3)
            desc = struct.pack("<IIHHHHII", 200, length, mss, flags | (j & 2), len(raw), 0, 7,
                               j) + raw
            out.append((f"desc{i}_{j}", head + desc))
    return out


def _build_all(targets: dict[str, str]) -> dict[str, Path]:
    """Every target of `targets`, built as make -j would: the libraries' archives first
    (the core's before those that need it), then the targets, as many at once as there
    are CPUs."""
    wanted = {*targets.values(), *(lib for t in targets for lib in MORE_LIBS.get(t, []))}
    libs = [lib.name for lib in cbuild.description().closure(wanted)]
    cbuild.build_library("core", SETS)
    cbuild.each_in_parallel(lambda lib: cbuild.build_library(lib, SETS),
                            [(lib,) for lib in libs if lib != "core"])
    exes: dict[str, Path] = {}
    cbuild.each_in_parallel(lambda t, lib: exes.__setitem__(t, cbuild.build_exe(
        f"fuzz_{t}", [FUZZ / f"fuzz_{t}.c", *TOOL_SOURCES.get(t, [])],
        [lib, *MORE_LIBS.get(t, [])], SETS, includes=[TOOLS] if t in TOOL_SOURCES else [],
        link=LINK.get(t, []))), list(targets.items()))
    return {t: exes[t] for t in targets}


@pytest.fixture(scope="module")
def fuzz_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """Build every target that can be built here and run them side by side: target ->
    (exit status, log); a target that cannot be built: (SKIP_STATUS, "SKIP: why")."""
    tmp = tmp_path_factory.mktemp("fuzz")
    problem = _libfuzzer_problem(tmp)
    if problem:
        pytest.skip(problem)
    procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    env = dict(os.environ, TMPDIR=str(tmp),
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    unbuildable = _unbuildable()
    try:
        exes = _build_all({t: lib for t, lib in TARGETS.items() if t not in unbuildable})
    except OfflowError as e:
        pytest.fail(str(e))
    for t, exe in exes.items():
        corpus = tmp / f"corpus_{t}"
        _seed_corpus(t, corpus)
        log = tmp / f"{t}.log"
        with open(log, "wb") as f:
            procs[t] = (subprocess.Popen(
                [str(exe), f"-runs={RUNS}", f"-max_total_time={SECONDS}", "-seed=1",
                 "-timeout=10", "-rss_limit_mb=2048", f"-artifact_prefix={tmp}/{t}-",
                 str(corpus)], stdout=f, stderr=subprocess.STDOUT, env=env), log)
    out = {t: (SKIP_STATUS, f"SKIP: {why}") for t, why in unbuildable.items()}
    for t, (p, log) in procs.items():
        try:
            rc = p.wait(timeout=SECONDS + 50)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        out[t] = (rc, log.read_text(errors="replace"))
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target_finds_no_crash(target: str, fuzz_runs: dict[str, tuple[int, str]]) -> None:
    rc, log = fuzz_runs[target]
    skip = [line for line in log.splitlines() if line.startswith("SKIP: ")]
    if rc == SKIP_STATUS and skip:
        pytest.skip(f"fuzz_{target}: {skip[0].removeprefix('SKIP: ')}")
    assert rc == 0, f"fuzz_{target} exited {rc}:\n{log[-6000:]}"
    assert "Done " in log, log[-2000:]


def test_xdp_mapctl_target_says_why_where_the_kernel_refuses_bpf_maps(tmp_path: Path) -> None:
    """Where the kernel refuses to make a BPF map, fuzz_xdp_mapctl prints the reason and
    exits SKIP_STATUS (the test above skips with that reason), never a silent pass: run
    here with every capability dropped (setpriv), where the kernel refuses it."""
    bpf_off = Path("/proc/sys/kernel/unprivileged_bpf_disabled")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the target without capabilities")
    if not bpf_off.exists() or bpf_off.read_text().strip() == "0":
        pytest.skip("this kernel lets a process without capabilities make BPF maps")
    why = _libfuzzer_problem(tmp_path) or _unbuildable().get("xdp_mapctl")
    if why:
        pytest.skip(why)
    exe = _build_all({"xdp_mapctl": "map"})["xdp_mapctl"]
    res = subprocess.run(["setpriv", "--bounding-set=-all", "--inh-caps=-all", str(exe),
                          "-runs=1"], capture_output=True, text=True, timeout=60)
    assert res.returncode == SKIP_STATUS, res.stdout + res.stderr[-2000:]
    assert ("SKIP: the kernel refuses to make a BPF hash map: Operation not permitted (errno 1; "
            "making one needs root or CAP_BPF)") in res.stdout.splitlines()
