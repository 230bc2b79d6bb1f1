"""`offlow ctl ... map` (offlow/mapctl.py, runtime map_ctl.h): a user's hash map
(tests/programs/dscp_marks.py: a 7-byte key with an address field, 1-byte values, its
own names) read and changed while the program runs on host, on nic and on xdp (a BPF
hash map, answered through its fd; the xdp runs make and remove their own namespace and
veth pair). Its core (on xdp: the XDP program) learns
four flows (mark 0); a client sets one flow's mark, adds and deletes a key of its own,
and walks the map; the frames' TOS bytes (read with dpkt) show the mark from some frame
on and never the old one after it, and the final map report shows the changes. Every
bad input is one error and changes nothing; the key and value parser is fuzzed
(random mangled keys and values: parsed or one OfflowError)."""

from __future__ import annotations

import ipaddress
import random
import re
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import Element, Port, Program, SharedMap, Sink, Source
from offlow.build import plan_program
from offlow.control import ControlError, Table
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.explain import explain
from offlow.ir.types import KEY_TYPES
from offlow.mapctl import Layout, MapTable, format_key, parse_key, parse_value
from offlow.report import summarize
from offlow.runner import RunOptions, progress_totals
from offlow.session import Session, session
from offlow.targets import xdp
from tests.e2e import ROOT, read_frames

MARKS = ROOT / "tests" / "programs" / "dscp_marks.py"
LAYOUT = Layout.parse("peer:ipv4,proto:uint8_t,port:uint16_t;uint8_t")
MARKED = "peer=192.0.2.2,proto=17,port=54"
WHY_NOT = xdp.TARGET.unusable()
needs_bpf = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")
# frames forwarded after the first marked one before a run whose map is changed while
# it runs is stopped: the marks of a stretch of frames past the change are checked
AFTER = 4000


def _capture(path: Path) -> None:
    """Four UDP flows from 192.0.2.1..4 to ports 53..56, one frame each (looped)."""
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for k in range(4):
            udp = dpkt.udp.UDP(sport=1000, dport=53 + k, data=b"q" * (10 + k))
            ip = dpkt.ip.IP(src=bytes([192, 0, 2, k + 1]), dst=bytes([10, 0, 0, 1]), p=17,
                            data=udp)
            ip.len = len(bytes(ip))
            w.writepkt(bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                                    type=0x0800, data=ip)), ts=k * 1e-6)


def _marks_run(device: str, tmp_path: Path, loops: int = 2000) -> Session:
    """The marking program on `device` over _capture's four flows, `loops` times at
    20,000 frames a second, as a session (its output in tmp_path/out.pcap)."""
    cap = tmp_path / "in.pcap"
    _capture(cap)
    opts = RunOptions(input=cap, output=tmp_path / "out.pcap", loops=loops, rate=20_000)
    return session(load_program(MARKS, [f"edge.device={device}"]), opts)


def _learned(m: MapTable, n: int) -> dict[str, int]:
    """The map's items once its core has learned `n` keys (polled, up to 60 s)."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        items = dict(m.items())
        if len(items) >= n:
            return items
        time.sleep(0.05)
    raise AssertionError(f"the core learned {len(items)} keys, not {n}")


def _complete_records(path: Path, at: int) -> tuple[list[bytes], int]:
    """The frames of the complete records of pcap file `path`, which a run is still
    writing, from byte `at` on (0: from its start, past its header), and the offset
    after the last complete one (where the next call starts)."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
            f.seek(at)
            data = f.read()
    except FileNotFoundError:
        return [], at
    pos, frames = 0, []
    if at == 0:
        if len(data) < 24:
            return [], 0
        pos = 24
    # (microsecond or nanosecond timestamps, written little-endian or big-endian)
    order = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    while pos + 16 <= len(data):
        (caplen,) = struct.unpack_from(order + "I", data, pos + 8)
        if pos + 16 + caplen > len(data):
            break
        frames.append(data[pos + 16:pos + 16 + caplen])
        pos += 16 + caplen
    return frames, at + pos


def _forward_past_the_mark(s: Session, out: Path, after: int) -> None:
    """Let the traffic flow until the output `out` (read as it is written: its sink
    flushes whole records) holds a frame of MARKED's flow with mark 46 and `after`
    frames behind it, then stop the run's sources (they end as on Ctrl-C: the run
    ends with what it counted). Returns early when the input runs out first: the
    checks of the whole output then tell what happened."""
    seen, at, first = 0, 0, None
    while True:
        drained = s.region is not None and s.region.word("drained") >= len(s.run.procs)
        frames, at = _complete_records(out, at)
        for k, f in enumerate(frames if first is None else ()):
            ip = dpkt.ethernet.Ethernet(f).data
            if ip.src[3] == 2 and ip.tos == 46:
                first = seen + k
                break
        seen += len(frames)
        if drained or (first is not None and seen - first > after):
            s.stop()
            return
        time.sleep(0.05)   # (a poll: the frames come at 20,000 a second)



@contextmanager
def _stopped_if_failing(s: Session) -> Iterator[Session]:
    """`s`, whose run is stopped at once when the block fails (its input lasts minutes:
    leaving the session would wait for its end)."""
    try:
        yield s
    except BaseException:
        s.stop()
        raise

def _check_marks(out: Path, stats: dict[str, Any]) -> None:
    """The frames of `out` (read with dpkt): all four flows in turn, every frame the
    sources read forwarded; flows 1, 3 and 4 never marked; flow 2 unmarked up to
    some frame, then marked 46 on every later one, and on at least one."""
    tos: dict[int, list[int]] = {}
    for f in read_frames(out):
        ip = dpkt.ethernet.Ethernet(f).data
        tos.setdefault(ip.src[3], []).append(ip.tos)
    counts = [len(tos.get(k, [])) for k in (1, 2, 3, 4)]
    # the replay sends flows 1..4 in turn and may stop within a turn
    assert counts == sorted(counts, reverse=True) and counts[0] - counts[3] <= 1, counts
    totals = progress_totals(stats)
    assert (totals["read"], totals["forwarded"], totals["dropped"]) == (sum(counts),) * 2 + (0,)
    assert all(set(tos[k]) == {0} for k in (1, 3, 4))
    marked = tos[2]
    assert 46 in marked, f"none of flow 2's {len(marked)} frames carried the mark"
    first = marked.index(46)   # 0 until the set reached the core, then 46 on every frame
    assert 0 < first and set(marked[:first]) == {0} and set(marked[first:]) == {46}


@pytest.mark.parametrize("device", ["host", "nic", pytest.param("xdp", marks=needs_bpf)])
def test_a_users_map_changed_while_it_runs(device: str, tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    # the requests below come while the frames flow, at 20,000 a second (their marks
    # show it): they flow on until the output shows the change and AFTER frames past
    # it, however long the requests take on a busy machine (up to 200 s of input); the
    # later tests' requests come after their packets
    with _marks_run(device, tmp_path, loops=1_000_000) as s, _stopped_if_failing(s):
        t = s.tables["marks"]
        m = t.map()
        assert m.layout == LAYOUT
        assert _learned(m, 4) == {f"peer=192.0.2.{k + 1},proto=17,port={53 + k}": 0
                                  for k in range(4)}
        m.set(MARKED, 46)
        assert m.get(MARKED) == 46
        m.set("peer=198.51.100.9,proto=6,port=0x1bb", 255)   # a key of the client's own
        assert m.get("port=443,proto=6,peer=198.51.100.9") == 255
        assert dict(m.items(limit=2)).keys() <= dict(m.items()).keys()
        assert len(list(m.items(limit=2))) == 2
        # the map holds 5 keys of 5: a new key is refused, nothing changed
        with pytest.raises(ControlError, match="the map is full \\(5 keys\\)") as e:
            m.set("peer=203.0.113.1,proto=1,port=0", 1)
        assert e.value.errno == 28  # ENOSPC
        m.delete("peer=198.51.100.9,proto=6,port=443")
        assert m.get("peer=198.51.100.9,proto=6,port=443") is None
        with pytest.raises(ControlError, match="no such key") as e:
            m.delete("peer=198.51.100.9,proto=6,port=443")
        assert e.value.errno == 2  # ENOENT
        info = t.info()
        assert (info.kind, info.type, info.size, info.length, info.updates, info.entries,
                info.full) == ("map", "u", 1, 4, 3, 5, 1)
        _forward_past_the_mark(s, out, AFTER)
    assert s.result is not None and s.result.ok, s.result
    summary = summarize(s.build.plan, s.result.stats)
    assert summary["segments"][0]["device"] == device
    report = summary["tables"]["marks"]
    assert report["pairs"] == [[["192.0.2.1", 17, 53], 0], [["192.0.2.2", 17, 54], 46],
                               [["192.0.2.3", 17, 55], 0], [["192.0.2.4", 17, 56], 0]]
    assert (report["full"], report["items"]) == (1, 4)
    _check_marks(out, s.result.stats)


@pytest.mark.parametrize("device", ["host", pytest.param("xdp", marks=needs_bpf)])
def test_bad_requests_are_one_error_and_change_nothing(device: str, tmp_path: Path) -> None:
    with _marks_run(device, tmp_path) as s:
        t = s.tables["marks"]
        m = t.map()
        _learned(m, 4)
        for key, error in [
            ("peer=192.0.2.1,proto=17", "no value for port"),
            ("peer=192.0.2.1,proto=17,port=53,vlan=3", "the map has no field `vlan`"),
            ("peer=192.0.2.1,proto=17,proto=17,port=5", "field `proto` given twice"),
            ("peer=192.0.2.300,proto=17,port=53", "is not an ipv4 address"),
            ("peer=2001:db8::1,proto=17,port=53", "is not an ipv4 address"),
            ("peer=192.0.2.1,proto=256,port=53", "field `proto` 256 does not fit uint8_t"),
            ("peer=192.0.2.1,proto=x,port=53", "field `proto` `x` is not an integer"),
            ("peer=192.0.2.1,proto=17,port=-1", "field `port` -1 does not fit uint16_t"),
            ("192.0.2.1", "want FIELD=VALUE"),
        ]:
            with pytest.raises(OfflowError, match=error):
                m.set(key, 1)
        with pytest.raises(OfflowError, match="value 256 does not fit uint8_t"):
            m.set(MARKED, 256)
        with pytest.raises(OfflowError, match="value -1 does not fit uint8_t"):
            m.set(MARKED, -1)
        # the device checks what it is sent, too
        with pytest.raises(ControlError, match="'s' of 3 bytes: want 8"):
            t.request(b"sabc")
        with pytest.raises(ControlError, match="'g' of 0 bytes: want 7"):
            t.request(b"g")
        with pytest.raises(ControlError, match="request 'z' is not one a map takes"):
            t.request(b"z")
        with pytest.raises(OfflowError, match="is a hash map: use `offlow ctl WINDOW map"):
            t[0]
        with pytest.raises(OfflowError, match="no table `flows` with a control channel"):
            s.tables["flows"]
        assert t.info().updates == 0 and dict(m.items()) == _learned(m, 4)
        if device == "xdp":  # BPF has no slots: positions in the walk, asked out of order
            walk = [_next(t, at) for at in range(4)]
            assert [at for at, _ in walk] == [0, 1, 2, 3]
            assert [_next(t, at) for at in (3, 1, 2, 0)] == [walk[3], walk[1], walk[2], walk[0]]
            assert sorted(k for _, k in walk) == sorted(m.key(k) for k in _learned(m, 4))
            with pytest.raises(ControlError, match="no more keys"):
                t.request(b"n" + struct.pack("<I", 4))
        s.wait_drained(timeout=120)
    assert s.result is not None and s.result.ok, s.result


def _next(t: Table, at: int) -> tuple[int, bytes]:
    """A walk's raw step: the slot (position) and key of the first key at >= `at`."""
    raw = t.request(b"n" + struct.pack("<I", at))
    return struct.unpack_from("<I", raw)[0], raw[4:11]


@pytest.mark.parametrize("device", ["nic", pytest.param("xdp", marks=needs_bpf)])
def test_offlow_ctl_map_command_line(device: str, tmp_path: Path) -> None:
    with _marks_run(device, tmp_path) as s:
        def ctl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "offlow.cli", "ctl", str(s.window),
                                   "map", *args], capture_output=True, text=True, timeout=60)

        end = time.monotonic() + 60   # (the session holds no channel: one client at a time)
        while len(ctl("marks", "list").stdout.splitlines()) < 4 and time.monotonic() < end:
            time.sleep(0.05)
        assert ctl("marks", "set", MARKED, "7").returncode == 0
        got = ctl("marks", "get", MARKED)
        assert (got.returncode, got.stdout) == (0, "7\n"), got.stderr
        listed = ctl("marks", "list")
        assert sorted(listed.stdout.splitlines()) == [
            "peer=192.0.2.1,proto=17,port=53 0", "peer=192.0.2.2,proto=17,port=54 7",
            "peer=192.0.2.3,proto=17,port=55 0", "peer=192.0.2.4,proto=17,port=56 0"]
        assert len(ctl("marks", "list", "--limit", "1").stdout.splitlines()) == 1
        # info: one line of the map's own fields (1-byte values, 5 entries, 4 keys held)
        info = ctl("marks", "info").stdout
        assert re.fullmatch(r"kind map, type u, size 1, length 4, updates 1, entries 5, "
                            r"full \d+\n", info), info
        assert ctl("marks", "delete", MARKED).returncode == 0
        for args, error in [(("marks", "get", MARKED), "has no key"),
                            (("marks", "set", "peer=1.2.3.4,port=1", "3"), "no value for proto"),
                            (("marks", "set", MARKED), "want `map NAME set KEY VALUE`"),
                            (("marks", "get", MARKED, "--limit", "3"), "--limit N"),
                            (("nope", "list"), "no table `nope`")]:
            bad = ctl(*args)
            assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
            assert error in bad.stderr, bad.stderr
        tables = subprocess.run([sys.executable, "-m", "offlow.cli", "ctl", str(s.window),
                                 "tables"], capture_output=True, text=True, timeout=60)
        assert "marks: map, " in tables.stdout and " keys, 2 updates" in tables.stdout
        s.wait_drained(timeout=120)


@pytest.mark.parametrize(("text", "error"), [
    ("hw=+1:00:00:aa:bb:cc,v6=::1,n=0", r"`\+1:00:00:aa:bb:cc` is not a mac address"),
    ("hw= f:00:00:aa:bb:cc,v6=::1,n=0", "`f:00:00:aa:bb:cc` is not a mac address"),
    ("hw=02:00:00:aa:bb,v6=::1,n=0", "is not a mac address such as 02:00:00:aa:bb:cc"),
    ("hw=02:00:00:aa:bb:cc,v6=192.0.2.1,n=0", "`192.0.2.1` is not an ipv6 address"),
    ("hw=02:00:00:aa:bb:cc,v6=::1,n=32768", "field `n` 32768 does not fit int16_t"),
])
def test_each_field_takes_only_its_own_form(text: str, error: str) -> None:
    layout = Layout.parse("hw:mac,v6:ipv6,n:int16_t;int64_t")
    with pytest.raises(OfflowError, match=error):
        parse_key(layout, text)
    assert format_key(layout, parse_key(layout, "n=-32768,v6=::1,hw=02:00:00:AA:bb:cc")) == (
        "hw=02:00:00:aa:bb:cc,v6=::1,n=-32768")


def _field_text(rng: random.Random, ftype: str) -> str:
    if ftype == "ipv4":
        return str(ipaddress.IPv4Address(rng.getrandbits(32)))
    n = rng.getrandbits(8 * KEY_TYPES[ftype])
    return rng.choice([str, hex])(n)


def test_a_key_prints_as_it_parses() -> None:
    rng = random.Random(10)
    for _ in range(2000):
        text = ",".join(f"{f}={_field_text(rng, t)}" for f, t in LAYOUT.fields)
        raw = parse_key(LAYOUT, text)
        assert len(raw) == 7 and parse_key(LAYOUT, format_key(LAYOUT, raw)) == raw


def _mangled(rng: random.Random, good: str) -> str:
    """`good` with a few characters replaced, dropped or doubled, or random text."""
    chars = list(good) if rng.random() < 0.8 else []
    alphabet = "=,:.0123456789abcdefx-_ peortxyz\x00\u00e9"
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(chars) + 1)
        op = rng.randrange(3)
        if op == 0:
            chars.insert(at, rng.choice(alphabet))
        elif chars and op == 1:
            del chars[min(at, len(chars) - 1)]
        elif chars:
            chars[min(at, len(chars) - 1)] = rng.choice(alphabet)
    return "".join(chars)


def test_mangled_keys_and_values_are_parsed_or_one_error() -> None:
    """Fuzz: every mangled key or value is a key of the right size or an OfflowError
    (no other exception), and an accepted key prints as it parses."""
    rng = random.Random(11)
    six = Layout.parse("hw:mac,v6:ipv6,n:int16_t;int64_t")
    goods = [(LAYOUT, "peer=192.0.2.1,proto=17,port=53"),
             (six, "hw=02:00:00:aa:bb:cc,v6=2001:db8::1,n=-3")]
    accepted = refused = 0
    for _ in range(20000):
        layout, good = rng.choice(goods)
        text = _mangled(rng, good)
        try:
            raw = parse_key(layout, text)
        except OfflowError:
            refused += 1
        else:
            accepted += 1
            assert len(raw) == layout.key_size
            assert parse_key(layout, format_key(layout, raw)) == raw
        try:
            value = parse_value(layout, _mangled(rng, "-12"))
        except OfflowError:
            continue
        assert len(value) == KEY_TYPES[layout.value]
    assert accepted > 500 and refused > 1000


def test_explain_says_which_maps_have_a_control_channel() -> None:
    """On host, nic and xdp a map has ctl.NAME (on xdp answered through the BPF map's
    fd), a map too wide for one control message too, its entries in parts: `offlow
    explain` says each."""
    for device in ("host", "nic"):
        plan = plan_program(load_program(MARKS, [f"edge.device={device}"]))
        assert "ctl.marks" in plan.program_channels
        assert f"  ctl.marks: table marks, served on {device}" in explain(plan).splitlines()
    on_xdp = plan_program(load_program(MARKS, ["edge.device=xdp"]))
    assert "ctl.marks" in on_xdp.program_channels
    assert ("  ctl.marks: table marks, served on xdp (its BPF hash map, through the map's fd, "
            "by the xdp process's channel manager thread on the host CPU)"
            ) in explain(on_xdp).splitlines()
    assert "none:" not in explain(on_xdp)
    # 40 key bytes and an 8-byte value: 48 fit one message; one more key byte does not
    fits = tuple((f"f{i}", "uint64_t") for i in range(5))
    fitting = explain(plan_program(_wide(fits))).splitlines()
    assert "  ctl.wide: table wide, served on host" in fitting
    p = plan_program(_wide((*fits, ("g", "uint8_t"))))
    assert "ctl.wide" in p.program_channels
    assert ("  ctl.wide: table wide, served on host; its entries (41 + 8 bytes) go in parts "
            "(a request or reply of more than one 56-byte message is staged, then applied or "
            "read whole)") in explain(p).splitlines()


def _wide(key: tuple[tuple[str, str], ...]) -> Program:
    """A user's program with one map of key `key` (uint64_t values) on the host."""
    class Keep(Element):
        tables = ("w",)
        inputs = (Port("inp", "eth"),)
        outputs = (Port("out", "eth"),)
        body = "struct wide_key k; memset(&k, 0, sizeof k); (void)ofl_map_lookup(w, &k);"

    p = Program("wide_keys")
    src, out = Source("in"), Sink("out")
    keep = Keep("keep", w=SharedMap("wide", key, "uint64_t", 4))
    src >> keep >> out
    p.segment("only", [src, keep, out], device="host", cores=[0])
    return p


def test_info_says_the_fields_of_its_kind_of_table() -> None:
    from offlow.control import Info
    assert Info("array", "u", 2, 3, 0, entries=9).text() == (
        "kind array, type u, size 2, length 3, updates 0")
    assert Info("lpm6", "u", 2, 10, 1, lookups=5, lookups_during_updates=2).text() == (
        "kind lpm6, type u, size 2, length 10, updates 1, lookups 5, "
        "lookups_during_updates 2")
    assert Info("map", "u", 8, 61, 1, entries=61, full=7).text().endswith(
        "entries 61, full 7")
