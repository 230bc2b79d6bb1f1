"""Programs written as a user writes them from docs/streams.md, docs/crypto.md,
docs/lso.md and docs/planner.md, run on the targets they fit, each output checked
against an independent computation (Counter and bytes.split for words, `cryptography`
for AES-CBC, dpkt and a fragment reassembly written here for frames), never offlow's
helpers: a word count with a stop-word gate of the user's own C
(tests/programs/word_gate.py), an encrypt-then-segment pipeline (seal_jumbo.py, then
cut_sealed.py through a send port with an MSS of 1337), a planner question about the
word count; and the mistakes such a user makes, each one clear error or a counted drop."""

from __future__ import annotations

import random
import socket
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import dpkt
import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from offlow import Program
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.lso.app import session
from offlow.report import summarize
from offlow.runner import RunOptions, build_for, run
from tests.e2e import ROOT, offlow_cli, read_frames

PROGRAMS = ROOT / "tests" / "programs"
WORD_GATE, SEAL, CUT = (PROGRAMS / f"{n}.py" for n in ("word_gate", "seal_jumbo", "cut_sealed"))
STREAMS_QUERY = ROOT / "examples" / "streams_query.py"


def _udp_frame(src: str, sport: int, dst: str, dport: int, data: bytes, ident: int = 0) -> bytes:
    u = dpkt.udp.UDP(sport=sport, dport=dport, data=data)
    u.ulen = len(u)
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=17, data=u,
                    ttl=64, id=ident)
    ip.len = len(ip)
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, data=ip))


def _write(path: Path, frames: list[bytes]) -> None:
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for k, fr in enumerate(frames):
            w.writepkt(fr, ts=k * 1e-4)


def _run(program: Program, o: RunOptions) -> dict[str, Any]:
    b = build_for(program, o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    return summarize(b.plan, res.stats)


# ---- a word count with a gate of the user's own --------------------------------------

VOCAB = [b"a", b"of", b"the", b"fox", b"#tag", b"#", b"quick", b"x\x00y", b"caf\xc3\xa9", b"}",
         b'"q"', b"fifteen_letters", b"sixteen_letters!", b"averyveryverylongword"]


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    """301 lines of 0..8 words with spaces, tabs, newlines and CRs, empty lines among
    them, from a few flows."""
    rng = random.Random(5)
    text = []
    for _ in range(301):
        words = [rng.choice(VOCAB) for _ in range(rng.randrange(9))]
        text.append(b"".join(w + rng.choice([b" ", b"\t", b"  ", b"\n", b"\r\n"])
                             for w in words))
    path = tmp_path_factory.mktemp("words") / "lines.pcap"
    _write(path, [_udp_frame("10.0.0.1", 5000 + k % 7, "10.0.0.2", 6000, ln)
                  for k, ln in enumerate(text)])
    return path, text


def _counts(table: list[int]) -> dict[bytes, int]:
    """The count table read as docs/streams.md's word_table lays it out (6 words a slot:
    state, the word zero-padded to 15 bytes then its length, the count)."""
    out = {}
    for i in range(0, len(table), 6):
        if table[i]:
            raw = b"".join(k.to_bytes(4, "little") for k in table[i + 1:i + 5])
            out[raw[:raw[15]]] = table[i + 5]
    return out


@pytest.mark.parametrize("settings", [(), ("tally.device=nic",),
                                      ("tally.device=nic", "tally.cores=1,2"),
                                      ("ingest.device=host",)])
def test_a_word_count_with_a_stop_word_gate_counts_what_counter_counts(
        tmp_path: Path, lines: tuple[Path, list[bytes]], settings: tuple[str, ...]) -> None:
    """Words of 3..15 bytes that are no hashtag, counted as Counter counts bytes.split()'s
    words; the gate's and the counter's ends add up to every word."""
    path, text = lines
    words = [w for ln in text for w in ln.split()]
    want = Counter(w for w in words if 3 <= len(w) <= 15 and not w.startswith(b"#"))
    s = _run(load_program(WORD_GATE, list(settings)), RunOptions(input=path, timeout=60))
    assert _counts(s["tables"]["tally_counts"]) == want
    gate, tally = s["elements"]["gate"], s["elements"]["tally_words"]
    assert gate["consumed"] == sum(1 for w in words if len(w) < 3 or w.startswith(b"#"))
    assert tally["why"]["not_a_word"] == sum(1 for w in words if len(w) > 15
                                             and not w.startswith(b"#"))
    assert gate["in"] == len(words) and s["accounting"]["unaccounted"] == 0


@pytest.mark.parametrize(("program", "settings", "said"), [
    (WORD_GATE, "tally.device=gpu", r"element `cutter` \(SplitWords\) cannot run on target `gpu`"),
    (STREAMS_QUERY, "select.device=xdp",
     r"element `tuples` \(TupleIn\) cannot run on target `xdp`: its body uses offlow/streams.h"),
    (STREAMS_QUERY, "aggregate.device=gpu",
     r"element `average` \(Aggregate\) cannot run on target `gpu`: it has code to run at "
     "the end of its stream"),
    (STREAMS_QUERY, "aggregate.cores=0,1", r"table `average_windows` is one core's state"),
])
def test_a_placement_where_a_stream_element_cannot_run_is_one_error(
        lines: tuple[Path, list[bytes]], program: Path, settings: str, said: str) -> None:
    with pytest.raises(OfflowError, match=said):
        build_for(load_program(program, [settings]), RunOptions(input=lines[0], timeout=60))


def test_a_planner_question_ranks_the_user_s_alternatives(
        lines: tuple[Path, list[bytes]]) -> None:
    """`offlow plan` with the placements docs/planner.md suggests: each --alt given is
    ranked, and the model's own consequence holds: the tally on three slow cores beats
    everything on one (the splitter dominates, and three cores share it)."""
    r = offlow_cli("plan", str(WORD_GATE), "--device", "cmp-nic-400", "--workload",
                   str(lines[0]), "--packets", "3000", "--alt", "",
                   "--alt", "tally.device=nic", "--alt", "tally.device=nic tally.cores=1,2,3")
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines()
            if ln.strip()[:1].isdigit() and "ingest:" in ln]
    places = [next(w for w in row if w.startswith("tally:")) for row in rows]
    assert sorted(places) == ["tally:host[0]", "tally:nic[0]", "tally:nic[1-3]"]
    assert places.index("tally:nic[1-3]") < places.index("tally:nic[0]")


@pytest.mark.parametrize(("alt", "said"), [
    # (a KeyError traceback after the whole calibration)
    ("tally.device=xdp", "--alt 'tally.device=xdp': places a segment on `xdp`"),
    # (ranked as if the 4-core device had 9 cores)
    ("tally.device=nic tally.cores=1,2,3,4,5,6,7,8",
     "segment `tally` on nic core 4; cmp-nic-400 has 4 cores (0..3)"),
])
def test_a_planner_alternative_the_device_cannot_hold_is_one_error(
        lines: tuple[Path, list[bytes]], alt: str, said: str) -> None:
    r = offlow_cli("plan", str(WORD_GATE), "--device", "cmp-nic-400", "--workload",
                   str(lines[0]), "--packets", "2000", "--alt", alt)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert said in r.stderr and "calibrating" not in r.stderr


# ---- encrypt, then segment ------------------------------------------------------------

KEYS = {("10.9.0.1", 4242, "10.9.0.2", 7777): (bytes(range(16)), bytes(range(0xa0, 0xb0))),
        ("10.9.0.2", 7777, "10.9.0.1", 4242): (bytes(range(255, 239, -1)), bytes(15) + b"\x01")}
SIZES = [0, 1, 15, 16, 17, 1337, 1344, 2689, 4001, 8941, 8942, 8950]
MSS = 1337


def _aes(flow: tuple[str, int, str, int], data: bytes) -> bytes:
    key, iv = KEYS[flow]
    p = padding.PKCS7(128).padder()
    e = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return e.update(p.update(data) + p.finalize()) + e.finalize()


@pytest.fixture(scope="module")
def jumbo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[tuple[Any, bytes]]]:
    """Datagrams of odd sizes up to a jumbo frame on the two keyed flows, one to the
    discard port and one of a flow with no key; the key file with comments (one with
    a quote and a brace) and uneven spaces."""
    d = tmp_path_factory.mktemp("seal")
    rng = random.Random(7)
    flows = list(KEYS)
    sent = [(flows[k % 2], rng.randbytes(n)) for k, n in enumerate(SIZES)]
    sent.insert(3, (("10.9.0.3", 1337, "10.9.0.2", 9), b"discard me"))
    sent.insert(7, (("10.9.0.4", 1, "10.9.0.2", 2), b"no key for me"))
    _write(d / "jumbo.pcap", [_udp_frame(f[0], f[1], f[2], f[3], data, k)
                              for k, (f, data) in enumerate(sent)])
    lines = ['# my flows } "quoted"']
    for (src, sport, dst, dport), (key, iv) in KEYS.items():
        lines.append(f"{src}:{sport}   {dst}:{dport} {key.hex()} {iv.hex()}  # a flow")
    (d / "keys.txt").write_text("\n".join(lines) + "\n")
    return d / "jumbo.pcap", d / "keys.txt", sent


@pytest.fixture(scope="module", params=[(), ("front.device=host", "vault.device=host",
                                               "vault.cores=0")], ids=["nic", "host"])
def sealed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           jumbo: tuple[Path, Path, list[tuple[Any, bytes]]]) -> tuple[dict[str, Any], list[bytes]]:
    """seal_jumbo.py as written (an ordered group of three NIC cores) and on one host core."""
    out = tmp_path_factory.mktemp("sealed") / "sealed.pcap"
    s = _run(load_program(SEAL, list(request.param)),
             RunOptions(input=jumbo[0], output=out, timeout=60,
                        opts=(f"flowkeys.path={jumbo[1]}",)))
    return s, read_frames(out)


def _fits(n: int) -> bool:
    """Its ciphertext (PKCS#7: the next whole block) fits a 9,000-byte frame."""
    return 14 + 20 + 8 + (n // 16 + 1) * 16 <= 9000


def test_jumbo_datagrams_are_sealed_as_cryptography_seals_them_in_order(
        jumbo: tuple[Path, Path, list[tuple[Any, bytes]]],
        sealed: tuple[dict[str, Any], list[bytes]]) -> None:
    """On an ordered group of three NIC cores or one host core: every keyed datagram whose
    ciphertext fits the program's 9,000-byte frames comes out in order, AES-128-CBC with
    PKCS#7 under its flow's key and IV; the one that would not fit is a counted
    `too_long`, the discard port's a counted drop of the user's guard, the unkeyed one
    `no_key`."""
    s, frames = sealed
    keyed = [(f, d) for f, d in jumbo[2] if f in KEYS]
    want = [_aes(f, d) for f, d in keyed if _fits(len(d))]
    got = [bytes(dpkt.ethernet.Ethernet(fr).data.data.data) for fr in frames]
    assert got == want and len(want) == len(SIZES) - 1
    assert s["elements"]["lock"]["why"]["too_long"] == 1
    assert s["elements"]["lock"]["why"]["no_key"] == 1
    assert s["elements"]["guard"]["why"] == {"discard_port": 1}
    for fr in frames:  # lengths and the IPv4 checksum rewritten: dpkt agrees
        ip = dpkt.ethernet.Ethernet(fr).data
        assert ip.len == len(fr) - 14 and ip.data.ulen == ip.len - 20
        assert dpkt.in_cksum(fr[14:34]) == 0


def _reassemble(frames: list[bytes]) -> list[bytes]:
    """IPv4 fragments put back together by Identification and offset (RFC 791), each
    fragment's header checked: the UDP datagrams (headers included), in order."""
    parts: dict[int, list[tuple[int, bool, bytes]]] = {}
    for fr in frames:
        ip = dpkt.ethernet.Ethernet(fr).data
        assert isinstance(ip, dpkt.ip.IP) and dpkt.in_cksum(fr[14:14 + ip.hl * 4]) == 0
        assert len(fr) - 14 <= 1500
        raw = fr[14 + ip.hl * 4:14 + ip.len]
        parts.setdefault(ip.id, []).append((ip.offset * 8, bool(ip.mf), raw))  # (8 B units)
    out = []
    for ident in sorted(parts):
        pieces = sorted(parts[ident], key=lambda p: p[0])
        data = b""
        for off, mf, raw in pieces:
            assert off == len(data)
            assert (len(raw) == (MSS + 8) // 8 * 8) == mf  # every piece but the last full
            data += raw
        out.append(data)
    return out


def test_sealed_datagrams_cut_at_mss_1337_reassemble_and_decrypt_to_what_was_sent(
        tmp_path: Path, jumbo: tuple[Path, Path, list[tuple[Any, bytes]]],
        sealed: tuple[dict[str, Any], list[bytes]]) -> None:
    """The host posts each sealed datagram as one send with MSS 1337 (fragments of
    1,344 bytes of datagram each); the fragments reassemble into the datagram, whose
    UDP checksum holds over it, and `cryptography` decrypts it to what was sent."""
    frames = sealed[1]
    out = tmp_path / "cut.pcap"
    # ids as the sends' tags: each datagram's fragments share its IPv4 Identification,
    # which the template gives; make them distinct
    with session(load_program(CUT), output=out, mtu=1500) as s:
        for k, fr in enumerate(frames):
            eth = dpkt.ethernet.Ethernet(fr)
            eth.data.id = k
            eth.data.sum = 0
            raw = bytes(eth)
            s.port.send(raw[:42], raw[42:], mss=MSS)
    assert s.result.ok and all(c.status == 0 for c in s.result.completions)
    datagrams = _reassemble(read_frames(out))
    assert len(datagrams) == len(frames)
    keyed = [(f, d) for f, d in jumbo[2] if f in KEYS and _fits(len(d))]
    for dg, fr, (flow, plain) in zip(datagrams, frames, keyed, strict=True):
        udp = dpkt.udp.UDP(dg)
        assert udp.data == dpkt.ethernet.Ethernet(fr).data.data.data
        src, dst = socket.inet_aton(flow[0]), socket.inet_aton(flow[2])
        pseudo = src + dst + bytes([0, 17]) + len(dg).to_bytes(2, "big")
        assert udp.sum == 0 or dpkt.in_cksum(pseudo + dg) == 0
        key, iv = KEYS[flow]
        d = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
        u = padding.PKCS7(128).unpadder()
        assert u.update(d.update(udp.data) + d.finalize()) + u.finalize() == plain
    # the session's completions stay readable after it (it crashed the interpreter:
    # they were read from the port's freed handle)
    assert s.port.completions() == s.result.completions


def test_a_key_file_with_a_bad_line_is_one_error_before_the_run(
        tmp_path: Path, jumbo: tuple[Path, Path, list[tuple[Any, bytes]]]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(jumbo[1].read_text() + "10.9.0.5:1 10.9.0.6:2 00112233 0011\n")
    o = RunOptions(input=jumbo[0], timeout=60, opts=(f"flowkeys.path={bad}",))
    with pytest.raises(OfflowError, match=r"line 4: .*key"):
        run(build_for(load_program(SEAL), o), o)


def test_the_send_port_refuses_an_mss_of_0_and_the_nic_one_above_the_link(
        tmp_path: Path) -> None:
    """MSS 0 is refused by the host before posting; an MSS whose packets exceed the
    link's MTU is refused by the NIC, completed with its reason and counted; the sends
    beside them are cut."""
    template = _udp_frame("10.0.0.1", 1, "10.0.0.2", 2, b"")
    with session(load_program(CUT), output=tmp_path / "o.pcap", mtu=1500) as s:
        with pytest.raises(OfflowError, match="an MSS above 0"):
            s.port.send(template, bytes(100), mss=0)
        s.port.send(template, bytes(3001), mss=1473)
        s.port.send(template, bytes(5000), mss=9000)
    assert [(c.reason, c.packets) for c in s.result.completions] == [("", 3), ("bad_mss", 0)]
    assert s.result.summary["elements"]["slicer"]["why"]["bad_mss"] == 1


# ---- a stream query's parameters, mistaken ---------------------------------------------

@pytest.mark.parametrize(("make", "said"), [
    ("Aggregate('a', fn='sum', attr=1, size='100', advance=10)", "size='100'"),
    ("Aggregate('a', fn='sum', attr=1, size=100, advance=10, groups='8')", "groups='8'"),
    ("Aggregate('a', fn='sum', attr=True, size=100, advance=10)", "attr=True"),
    ("BSort('b', slack=True)", "slack=True"),
    ("Join('j', size=True, left_port=1, right_port=2, left_key=1, right_key=1)", "size=True"),
    ("CountWords('c', slots='16', words=word_table('t', 16))", "slots='16'"),
    ("word_table('t', '16')", "slots='16'"),
])
def test_a_parameter_of_the_wrong_type_is_one_error_naming_it(make: str, said: str) -> None:
    """(A str was a TypeError traceback from a comparison, or for word_table a length of
    '161616161616'; a bool passed as 1.)"""
    from offlow.elements.streams import Aggregate, BSort, Join  # noqa: F401
    from offlow.elements.words import CountWords, word_table  # noqa: F401
    with pytest.raises(OfflowError, match=f"`[a-z]+`: {said}"):
        eval(make)


@pytest.mark.parametrize(("opt", "said"), [
    ("average_windows.size=0", "size=0 is not a number within 1..2305843009213693951"),
    ("average_windows.advance=x", "advance=x is not a number within"),
    ("average_windows.size=100000000",
     "size=100000000 over advance=50000 keeps more than 1024 windows open"),
    ("average_windows.fn=median", "fn=median: expected count, sum, avg, min or max"),
    ("average_windows.groups=0", "groups=0 is not a number within 1..65536"),
])
def test_a_stream_operator_option_it_would_refuse_is_one_error_before_the_run(
        tmp_path: Path, opt: str, said: str) -> None:
    """(The host's process refused it once started, while the NIC already read tuples
    into a ring then broken: counted `ring_broken` drops, then the error.)"""
    frames = [_udp_frame("10.0.0.1", 1, "10.0.0.2", 7001, (k % 30).to_bytes(4, "little") * 3)
              for k in range(64)]
    _write(tmp_path / "t.pcap", frames)
    o = RunOptions(input=tmp_path / "t.pcap", timeout=60, opts=(opt,))
    with pytest.raises(OfflowError, match=f"stream operator average_windows: {said}"):
        run(build_for(load_program(STREAMS_QUERY), o), o)


def test_a_udp_query_s_results_made_at_its_end_are_counted_as_sent(tmp_path: Path) -> None:
    """A counting Aggregate served over UDP: the window still open when the run is
    stopped comes out at the end (its at_end) and reaches the sender, and the sink's
    `sent` counts it. (It was sent at the sink's close, after the stats were written:
    `3 packets, 2 sent, 0 dropped, 0 send errors`.)"""

    from offlow import Sink, Source
    from offlow.build import build
    from offlow.elements.streams import Aggregate, TupleIn, TupleReply
    from offlow.runner import Run

    p = Program("udp_counts")
    src, tin, back, out = Source("ears"), TupleIn("tin"), TupleReply("back"), Sink("mouth")
    tally = Aggregate("tally", fn="count", attr=2, size=10, advance=10, order=1)
    src >> tin >> tally >> back >> out
    p.segment("front", [src, tin], device="nic", cores=[0])
    p.segment("rear", [tally, back, out], device="host", cores=[0])
    r = Run(build(p), RunOptions(udp_port=0, timeout=60))
    r.start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
        c.bind(("127.0.0.1", 0))
        c.settimeout(30)
        try:
            for k in range(25):  # v1 0..24: windows [0,10) and [10,20) close, [20,30) not
                c.sendto(struct.pack("<2i", k, 7), ("127.0.0.1", r.udp_port))
            got = [c.recv(65536) for _ in range(2)]
        finally:
            r.stop()
            res = r.wait()
        c.setblocking(False)  # the run has ended: whatever it sent is here
        while True:
            try:
                got.append(c.recv(65536))
            except BlockingIOError:
                break
    assert res.ok, res.errors
    rows = [struct.unpack("<2iqq", g) for g in got]  # group, count, result, window start
    assert [(n, start) for _, n, _, start in rows[:2]] == [(10, 0), (10, 10)]
    assert len(rows) == 3 and rows[2][3] == 20 and 1 <= rows[2][1] <= 5
    sink = summarize(r.build.plan, res.stats)["sinks"]["mouth"]
    assert sink["packets"] == sink["sent"] == 3


# ---- a sensor query: the user's own predicate among the stream operators ---------------

HOT = PROGRAMS / "hot_sensors.py"
SIZE, ADVANCE = 777, 333


def _ns_pcap(path: Path, records: list[tuple[int, bytes]]) -> None:
    """A nanosecond pcap (magic 0xa1b23c4d), written here byte by byte."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for ts, fr in records:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(fr), len(fr)) + fr)


def _ns_frames(path: Path) -> list[bytes]:
    raw = path.read_bytes()
    assert struct.unpack_from("<I", raw)[0] == 0xA1B23C4D  # ts kept whole, as docs say
    out, at = [], 24
    while at < len(raw):
        incl = struct.unpack_from("<IIII", raw, at)[2]
        out.append(raw[at + 16:at + 16 + incl])
        at += 16 + incl
    return out


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, ...]]]:
    """500 readings (v1..v5, v4 the room 0..6, v2 with the 32-bit extremes among them),
    ts growing by 0..400 ns with runs of equal ts, shuffled in blocks of three (at most
    two places out of order); among them a datagram that holds no tuple and two tuples
    of two values. Returns the capture and the rows as they arrive (ts, values...)."""
    rng = random.Random(11)
    ts, rows = 0, []
    for _ in range(500):
        ts += rng.choice([0, 0, 37, 120, 250, 333, 400])
        v2 = rng.choice([-2**31, 2**31 - 1]) if rng.random() < 0.02 else rng.randrange(-999, 999)
        rows.append((ts, rng.randrange(-20, 21), v2, rng.randrange(-20, 21),
                     rng.randrange(7), rng.randrange(100)))
    arrived = []
    for k in range(0, len(rows), 3):
        block = rows[k:k + 3]
        rng.shuffle(block)
        arrived += block
    records = [(r[0], _udp_frame("10.1.0.1", 4000, "10.1.0.2", 7001,
                                 struct.pack(f"<{len(r) - 1}i", *r[1:]))) for r in arrived]
    extra = [(5, b"\x01" * 6), (77, struct.pack("<2i", 1, 2)), (9000, struct.pack("<2i", 3, 4))]
    for at, payload in extra:
        records.insert(at % len(records), (records[at % len(records)][0],
                                           _udp_frame("10.1.0.1", 4000, "10.1.0.2", 7001,
                                                      payload)))
    path = tmp_path_factory.mktemp("hot") / "readings.pcap"
    _ns_pcap(path, records)
    return path, arrived


def _hottest(arrived: list[tuple[int, ...]]) -> list[tuple[int, int, int, int]]:
    """The query worked out plainly: the probe's rule, a stable sort by ts (the BSort's
    slack covers the disorder), then each window's rooms in the order they first came:
    (room, readings, hottest, window start); a window is out once a reading at or past
    its end comes, the rest at the end, oldest first."""
    kept = sorted((r for r in arrived if (r[1] + r[3]) % 3), key=lambda r: r[0])
    windows: dict[int, dict[int, list[int]]] = {}
    out: list[tuple[int, int, int, int]] = []

    def emit(w: int) -> None:
        out.extend((room, n, hi, w * ADVANCE) for room, (n, hi) in windows.pop(w).items())

    for ts, _, v2, _, room, _ in kept:
        for w in sorted(w for w in windows if w * ADVANCE + SIZE <= ts):
            emit(w)
        for w in range((ts - SIZE) // ADVANCE + 1, ts // ADVANCE + 1):
            n_hi = windows.setdefault(w, {}).setdefault(room, [0, v2])
            n_hi[0] += 1
            n_hi[1] = max(n_hi[1], v2)
    for w in sorted(windows):
        emit(w)
    return out


@pytest.mark.parametrize("settings", [(), ("query.device=nic",), ("probe.device=host",)])
def test_a_sensor_query_with_the_user_s_own_predicate_gives_each_room_s_hottest(
        tmp_path: Path, readings: tuple[Path, list[tuple[int, ...]]],
        settings: tuple[str, ...]) -> None:
    path, arrived = readings
    out = tmp_path / "hot.pcap"
    s = _run(load_program(HOT, list(settings)), RunOptions(input=path, output=out, timeout=60))
    got = [struct.unpack("<2iqq", bytes(dpkt.ethernet.Ethernet(fr).data.data.data))
           for fr in _ns_frames(out)]
    assert got == _hottest(arrived)
    assert s["elements"]["tuples"]["why"]["bad_size"] == 1
    assert s["elements"]["probe_rule"]["why"]["too_few"] == 2
    assert s["elements"]["hottest"]["why"].get("late", 0) == 0
    assert s["accounting"]["unaccounted"] == 0


def test_a_drop_reason_that_is_a_c_keyword_is_one_error_naming_it() -> None:
    """A user's element whose drop reason is `short` (the first name this file's probe
    had): the error names it and why (it said only `drops names at most 256 reasons,
    each a C identifier`)."""
    from offlow import Element, Port, Sink, Source

    class Picky(Element):
        inputs = (Port("inp", "eth"),)
        outputs = (Port("out", "eth"),)
        drops = {"runt": "under 60 bytes", "short": "a user's word for it"}
        body = "if (pkt->len < 60u) DROP_WHY(runt);"

    p = Program("picky")
    src, el, out = Source("rx"), Picky("picky"), Sink("tx")
    src >> el >> out
    p.segment("s", [src, el, out], device="host")
    with pytest.raises(OfflowError, match="drop reason 'short' is not a C identifier "
                                          r"\(letters, digits and _, not a C keyword\)"):
        build_for(p, RunOptions(timeout=60))


def _sum16(b: bytes) -> int:
    """The Internet checksum's one's-complement sum (RFC 1071), folded."""
    b += b"\0" * (len(b) % 2)
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def test_a_tcp_send_with_options_and_an_ipv6_datagram_cut_at_mss_1337(tmp_path: Path) -> None:
    """docs/lso.md's other shapes from a user's port: TCP/IPv4 with a timestamps option
    and a sequence number about to wrap, and UDP/IPv6, both at MSS 1337. dpkt reads
    every packet; the TCP segments carry 1,337 bytes each (the last the rest) at
    consecutive sequence numbers across the wrap, PSH and FIN only on the last, IPv4
    IDs counting up, each checksum right; the IPv6 fragments (Identification the tag)
    reassemble into the datagram, whose UDP checksum holds."""
    rng = random.Random(3)
    opts = b"\x01\x01\x08\x0a" + struct.pack("!II", 1, 2)
    fl = dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH | dpkt.tcp.TH_FIN
    tcp = dpkt.tcp.TCP(sport=4433, dport=50000, seq=0xFFFFF000, ack=5, flags=fl, opts=opts,
                       win=512, off=(20 + len(opts)) // 4)
    ip = dpkt.ip.IP(src=socket.inet_aton("10.2.0.1"), dst=socket.inet_aton("10.2.0.2"), p=6,
                    data=tcp, ttl=64, id=100)
    ip.len = len(ip)
    t4 = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, data=ip))
    udp = dpkt.udp.UDP(sport=5353, dport=6363, ulen=8)
    a6, b6 = (socket.inet_pton(socket.AF_INET6, f"2001:db8::{k}") for k in (1, 2))
    ip6 = dpkt.ip6.IP6(src=a6, dst=b6, nxt=17, hlim=64, data=udp, plen=8)
    t6 = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=0x86DD, data=ip6))
    p4, p6 = rng.randbytes(9999), rng.randbytes(4001)
    out = tmp_path / "cut.pcap"
    with session(load_program(CUT), output=out, mtu=1500) as s:
        s.port.send(t4, p4, mss=MSS)
        s.port.send(t6, p6, mss=MSS, tag=77)
    assert [(c.tag, c.status, c.packets) for c in s.result.completions] == [(0, 0, 8),
                                                                            (77, 0, 3)]
    eths = [dpkt.ethernet.Ethernet(fr) for fr in read_frames(out)]
    segs = [e.data for e in eths if isinstance(e.data, dpkt.ip.IP)]
    stream, seq = b"", 0xFFFFF000
    for k, ip4 in enumerate(segs):
        t, raw = ip4.data, bytes(ip4)
        assert t.seq == seq and ip4.id == 100 + k and t.opts == opts
        assert _sum16(raw[:20]) == 0xFFFF
        pseudo = raw[12:20] + struct.pack("!HH", 6, len(raw) - 20)
        assert _sum16(pseudo + raw[20:]) == 0xFFFF
        last = k == len(segs) - 1
        assert len(t.data) == (len(p4) - MSS * k if last else MSS)
        assert (t.flags == fl) if last else (t.flags == dpkt.tcp.TH_ACK)
        stream += t.data
        seq = (seq + len(t.data)) & 0xFFFFFFFF
    assert stream == p4
    frags = [bytes(e.data) for e in eths if isinstance(e.data, dpkt.ip6.IP6)]
    datagram = b""
    for k, fr in enumerate(frags):  # IPv6 header, then the fragment header, then data
        nxt, _, off_m, ident = struct.unpack("!BBHI", fr[40:48])
        assert nxt == 17 and ident == 77 and fr[6] == 44
        assert off_m >> 3 == len(datagram) // 8 and bool(off_m & 1) == (k < len(frags) - 1)
        assert len(fr) <= 1500
        datagram += fr[48:]
    assert dpkt.udp.UDP(datagram).data == p6 and len(datagram) == 8 + len(p6)
    pseudo6 = a6 + b6 + struct.pack("!IxxxB", len(datagram), 17)
    assert _sum16(pseudo6 + datagram) == 0xFFFF


def test_every_send_of_a_long_session_has_its_completion(tmp_path: Path) -> None:
    """4,500 sends (more than the 4,096 completions the port keeps unreaped): each comes
    back completed, in order, with its packet. (`offlow lso run` of a 20,000-frame
    capture said `20,000 sends posted, 4,096 completed, 4,096 packets made`.)"""
    template = _udp_frame("10.3.0.1", 7, "10.3.0.2", 8, b"")
    with session(load_program(CUT), mtu=1500) as s:
        for k in range(4500):
            s.port.send(template, k.to_bytes(2, "big"), mss=MSS)
    done = s.result.completions
    assert [c.tag for c in done] == list(range(4500))
    assert all(c.status == 0 and c.packets == 1 for c in done)
    assert s.result.summary["sinks"]["wire"]["packets"] == 4500


@pytest.mark.parametrize("device", ["nic", "host"])
def test_md5_over_five_interleaved_chains_is_the_scheme_docs_crypto_md_spells_out(
        tmp_path: Path, jumbo: tuple[Path, Path, list[tuple[Any, bytes]]], device: str) -> None:
    """Md5Chains with k=5 (not the default 4) on datagrams of 0..8,950 bytes: each payload
    becomes the MD5 of the five chains' MD5s, chain c holding 64-byte blocks c, c+5, ...
    (hashlib on the blocks cut here)."""
    import hashlib

    from offlow import Sink, Source
    from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
    from offlow.elements.crypto import Md5Chains

    def md5x(data: bytes, k: int) -> bytes:
        blocks = [data[i:i + 64] for i in range(0, len(data), 64)]
        chains = [hashlib.md5(b"".join(blocks[c::k])).digest() for c in range(k)]
        return hashlib.md5(b"".join(chains)).digest()

    p = Program("five_chains")
    rx, eth, ip4, l4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4")
    digest, tx, other = Md5Chains("digest5", k=5), Sink("tx"), Discard("other")
    rx >> eth
    eth["ipv4"] >> ip4 >> l4 >> digest >> tx
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("all", [rx, eth, ip4, l4, digest, tx, other], device=device, cores=[0])
    out = tmp_path / "digests.pcap"
    _run(p, RunOptions(input=jumbo[0], output=out, timeout=60))
    got = [bytes(dpkt.ethernet.Ethernet(fr).data.data.data) for fr in read_frames(out)]
    assert got == [md5x(data, 5) for _, data in jumbo[2]]
    with pytest.raises(OfflowError, match="k=True: the number of chains must be 1..16"):
        Md5Chains("bad", k=True)
