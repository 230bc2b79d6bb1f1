"""Programs written as a new user writes them from docs/targets.md (gpu, xdp) and
docs/remote.md, run on every target they fit, each output checked against an
independent computation (dpkt, ipaddress and Python's own arithmetic: a ones' complement
sum, FNV-1a for the next-hop rule of docs/router.md), never offlow's helpers: a
checksum and classifier offloaded to gpu in batches of 37 (tests/programs/gpu_fold.py),
an ACL with counters in XDP and the rest on the host (xdp_acl_split.py, VLAN-tagged and
over-long frames among its input); and a user's mistakes, each one clear error before
anything starts or a counted drop."""

from __future__ import annotations

import ipaddress
import os
import random
import signal
import socket
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

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.build import build, plan_program
from offlow.dsl.loader import load_program
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.errors import OfflowError
from offlow.targets import gpu, remote, xdp
from tests.e2e import ROOT, offlow_cli, read_frames, run_example, window_in
from tests.remote_served import TCP, Servers
from tests.test_map_ctl import _complete_records

PROGRAMS = ROOT / "tests" / "programs"
FOLD, ACL = PROGRAMS / "gpu_fold.py", PROGRAMS / "xdp_acl_split.py"
EGRESS = PROGRAMS / "remote_egress.py"
NO_GPU, NO_XDP = gpu.TARGET.unusable(), xdp.TARGET.unusable()
NO_REMOTE = remote.TARGET.unusable()
needs_ucx = pytest.mark.skipif(NO_REMOTE is not None, reason=f"remote: {NO_REMOTE}")
needs_opencl = pytest.mark.skipif(NO_GPU is not None, reason=f"gpu target: {NO_GPU}")
needs_bpf = pytest.mark.skipif(NO_XDP is not None, reason=f"xdp cannot run here: {NO_XDP}")


def _eth(l3: bytes, vlan: int | None = None, ethertype: int = 0x0800) -> bytes:
    tag = struct.pack("!HH", 0x8100, vlan) if vlan is not None else b""
    return b"\x04" * 6 + b"\x02" * 6 + tag + struct.pack("!H", ethertype) + l3


def _ipv4(src: str, proto: int, l4: Any, ident: int = 0) -> bytes:
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton("10.9.9.9"), p=proto,
                    data=l4, ttl=64, id=ident)
    ip.len = len(ip)
    return bytes(ip)


def _udp(src: str, dport: int, payload: bytes, ident: int = 0) -> bytes:
    u = dpkt.udp.UDP(sport=4000, dport=dport, data=payload)
    u.ulen = len(u)
    return _ipv4(src, 17, u, ident)


def _write(path: Path, frames: list[bytes]) -> None:
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for k, fr in enumerate(frames):
            w.writepkt(fr, ts=k * 1e-4)


# ---- a checksum and classifier offloaded to gpu ----------------------------------------

ZONES = ["10.0.0.0/8", "172.16.0.0/12", "192.0.2.64/26", "10.200.0.0/16"]
SOURCES = ["10.1.2.3", "10.200.0.9", "172.16.5.5", "192.0.2.77", "192.0.2.7", "8.8.8.8"]


def _fnv_hop(net: ipaddress.IPv4Network, nports: int) -> int:
    """docs/router.md's next-hop rule, FNV-1a-32 over the address and the length byte."""
    h = 2166136261
    for b in net.network_address.packed + bytes([net.prefixlen]):
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h % nports + 1


def _hop_of(addr: str, prefixes: list[str], nports: int) -> int:
    """The longest prefix's hop by that rule (0: none covers the address)."""
    a = ipaddress.ip_address(addr)
    nets = [ipaddress.ip_network(n) for n in prefixes]
    best = max((n for n in nets if a in n), key=lambda n: n.prefixlen, default=None)
    return 0 if best is None else _fnv_hop(best, nports)


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """The program file reads its placement from the environment at load time."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def _fold_expected(frame: bytes) -> bytes | None:
    """The frame gpu_fold.py sends, or None where it drops it (no zone)."""
    ip = frame[14:]
    src = ipaddress.ip_address(ip[12:16])
    nets = [ipaddress.ip_network(z) for z in ZONES]
    best = max((n for n in nets if src in n), key=lambda n: n.prefixlen, default=None)
    if best is None:
        return None
    total = sum(ip[i] << 8 | (ip[i + 1] if i + 1 < len(ip) else 0) for i in range(0, len(ip), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    zone, braces = _fnv_hop(best, 7), (ip.count(b"}") + ip.count(b'"')) & 0xFF
    return frame[:6] + struct.pack("!HHBB", total, zone, braces, 0x5A) + frame[12:]


@pytest.fixture(scope="module")
def fold_input(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[bytes]]:
    """157 UDP datagrams of 0..1,199 payload bytes (`}`, `"`, 0 and 255 among them: odd
    lengths too) from six sources, two in no zone; an IPv6 frame and an ARP one."""
    rng = random.Random(7)
    frames = [_eth(_udp(rng.choice(SOURCES), 53, bytes(rng.choice(b'ab}"\x00\xff')
                                                     for _ in range(rng.randrange(1200))), k))
              for k in range(157)]
    frames[40:40] = [_eth(b"\x60" + b"\x00" * 60, ethertype=0x86DD),
                     _eth(b"\x00" * 28, ethertype=0x0806)]
    d = tmp_path_factory.mktemp("fold")
    _write(d / "in.pcap", frames)
    (d / "zones.txt").write_text("# the user's zones\n" + "\n".join(ZONES) + "\n")
    return d / "in.pcap", d / "zones.txt", frames


def _fold_run(where: str, fold_input: tuple[Path, Path, list[bytes]], tmp: Path,
              *settings: str, **more: Any) -> tuple[list[bytes], dict[str, Any]]:
    cap, zones, _ = fold_input
    out = tmp / f"out-{where}.pcap"
    with _env("CRUNCH", where):
        s = run_example(settings, program=FOLD, input=cap, output=out,
                        opts=(f"zones.path={zones}",), **more)
    assert s["ok"], s["errors"]
    return read_frames(out), s


@pytest.mark.parametrize(("where", "rx"), [
    pytest.param("gpu", "nic", marks=needs_opencl, id="gpu"),
    pytest.param("gpu", "xdp", marks=[needs_opencl, needs_bpf], id="gpu-rx-xdp"),
    pytest.param("gpu", "remote:edge", marks=[needs_opencl, needs_ucx], id="gpu-rx-remote"),
    pytest.param("nic", "nic", id="nic"), pytest.param("host", "nic", id="host")])
def test_gpu_fold_gives_pythons_checksums_and_zones(
        where: str, rx: str, fold_input: tuple[Path, Path, list[bytes]], served: Servers,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On gpu in batches of 37 with 3 in flight (neither a power of two nor the default),
    fed by the NIC, by XDP and by a remote device (whose zones table the host reads and
    sends: before, the first device that reads files was chosen, xdp or remote, neither
    of which sends, and the gpu process waited for the table forever), and on nic and
    host: every frame's ones' complement sum, zone (an LPM table the kernel reads, 7
    ports) and count of `}`/`"` bytes as Python computes them; the unzoned sources
    dropped with their reason, IPv6 and ARP discarded."""
    settings = ("crunch.batch=37", "crunch.depth=3") if where == "gpu" else ()
    more: dict[str, Any] = {}
    if rx.startswith("remote:"):
        for k, v in TCP.items():
            monkeypatch.setenv(k, v)
        more = {"remotes": (f"edge=127.0.0.1:{served.ports(1)[0]}",),
                "secret_file": served.secret}
    got, s = _fold_run(where, fold_input, tmp_path, *settings, f"rx.device={rx}", **more)
    frames = fold_input[2]
    ipv4 = [f for f in frames if f[12:14] == b"\x08\x00"]
    want = [e for e in map(_fold_expected, ipv4) if e is not None]
    assert 0 < len(want) < len(ipv4)  # (some forwarded, some unzoned)
    assert got == want
    dropped = {d["reason"]: d["packets"] for d in s["accounting"]["dropped"]}
    assert dropped == {"unzoned": len(ipv4) - len(want)}


# ---- an ACL in XDP, the rest on the host ----------------------------------------------

AF_XDP_MAX = 3840  # docs/targets.md: the longest frame the AF_XDP crossing takes


def _tcp(flags: int, n: int) -> bytes:
    return _ipv4("10.0.0.3", 6, dpkt.tcp.TCP(sport=5555, dport=80, flags=flags, data=b"x" * n))


@pytest.fixture(scope="module")
def acl_input(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    """UDP to denied and allowed ports, TCP with SYN+FIN and without, with and without a
    VLAN tag (ids 7 and 4094); frames of 3,700..8,000 bytes (over the AF_XDP limit and
    just under it); IPv6 frames."""
    rng = random.Random(3)
    frames: list[bytes] = []
    for k in range(60):
        c = k % 6
        if c == 0:
            frames.append(_eth(_udp("10.0.0.1", rng.choice([23, 6667, 53, 24]),
                                    bytes(rng.randrange(300))), rng.choice([None, 7])))
        elif c == 1:
            frames.append(_eth(_tcp(rng.choice([0x03, 0x02, 0x11, 0x01, 0x07]),
                                    rng.randrange(100)), rng.choice([None, 4094])))
        elif c == 2:
            frames.append(_eth(_udp("10.0.0.1", 9, b"j" * rng.choice([3900, 5000, 8000]))))
        elif c == 3:
            frames.append(_eth(_udp("10.0.0.1", 9, b"k" * rng.randrange(3700, 3820))))
        elif c == 4:
            frames.append(_eth(b"\x60" + b"\x00" * 50, ethertype=0x86DD))
        else:
            frames.append(_eth(_udp("10.0.0.1", 1000 + k, b"v"), vlan=5))
    path = tmp_path_factory.mktemp("acl") / "acl.pcap"
    _write(path, frames)
    return path, frames


def _acl_oracle(frames: list[bytes], on_xdp: bool) -> tuple[list[bytes], dict[str, int],
                                                             list[int]]:
    """What xdp_acl_split.py sends, its drops by reason and its `hits` table, worked out
    with dpkt."""
    out, drops, hits = [], {}, [0] * 5
    for f in frames:
        e = dpkt.ethernet.Ethernet(f)
        ip = e.data
        if not isinstance(ip, dpkt.ip.IP):
            continue  # (junk: consumed)
        l4 = ip.data
        why = ("denied_port" if isinstance(l4, dpkt.udp.UDP) and l4.dport in (23, 6667) else
               "syn_fin" if isinstance(l4, dpkt.tcp.TCP) and l4.flags & 3 == 3 else "")
        if not why:
            hits[ip.p & 3] += 1
            hits[4] += 1
            why = "too_long" if on_xdp and len(f) > AF_XDP_MAX else ""
        if why:
            drops[why] = drops.get(why, 0) + 1
            continue
        l3 = len(f) - len(bytes(ip))
        g = bytearray(f)
        g[l3 + 4:l3 + 6] = bytes([ord("o"), ip.p & 3])
        g[l3 + 8] = len(f) // 1000 & 0xFF
        out.append(bytes(g))
    return out, drops, hits


@pytest.mark.parametrize("where", [pytest.param("xdp", marks=needs_bpf), "nic", "host"])
def test_xdp_acl_passes_denies_and_counts_as_dpkt_reads_the_capture(
        where: str, acl_input: tuple[Path, list[bytes]], tmp_path: Path) -> None:
    """The ACL in XDP (generic mode, frames through the run's veth pair) and on nic and
    host: the frames the host stamps, the drops by reason (on xdp also `too_long` at the
    crossing, each frame over 3,840 bytes: counted, not lost) and the counters, as dpkt
    reads the capture; VLAN-tagged frames pass the ACL as untagged ones."""
    cap, frames = acl_input
    with _env("GATE", where):
        s = run_example((), program=ACL, input=cap, output=tmp_path / "out.pcap")
    assert s["ok"], s["errors"]
    want, drops, hits = _acl_oracle(frames, where == "xdp")
    assert read_frames(tmp_path / "out.pcap") == want
    assert any(f[12:14] == b"\x81\x00" for f in want)  # (a tagged frame went through)
    assert {d["reason"]: d["packets"] for d in s["accounting"]["dropped"]} == drops
    assert s["tables"]["hits"] == hits


# ---- a user's mistakes --------------------------------------------------------------

@pytest.mark.parametrize("spec", ["[::1]:7000", "::1:7000", "[2001:db8::2]:7311"])
def test_an_ipv6_remote_address_is_one_error_before_anything_starts(spec: str) -> None:
    """The link takes IPv4 only; an IPv6 --remote used to be accepted, the run started,
    and its stand-in failed (`::1` is not an IPv4 address) once the processes were up."""
    from offlow.remote import endpoints

    with pytest.raises(OfflowError, match=r"an IPv6 address; the link .* IPv4 addresses "
                                          r"only"):
        endpoints([f"dev1={spec}"])


def test_serve_device_refuses_an_ipv6_listen_address(tmp_path: Path) -> None:
    """Through the CLI (a process of its own: serve-device exec's its server): one line
    saying why, before the server starts (it used to start and say `::1` is not an IPv4
    address)."""
    secret = tmp_path / "s"
    secret.write_text("x" * 32)
    secret.chmod(0o600)
    r = subprocess.run([sys.executable, "-m", "offlow.cli", "serve-device", "--listen",
                        "[::1]:0", "--secret-file", str(secret)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "takes IPv4 addresses only" in r.stderr


def test_offlow_targets_prints_what_docs_targets_md_shows() -> None:
    """docs/targets.md's `offlow targets` block is the command's output (where every
    target is usable here, as the block says)."""
    r = offlow_cli("targets")
    if "usable here" not in r.stdout or r.stdout.count("usable here") != 5:
        pytest.skip("a target is not usable here; the block shows every one usable")
    doc = (ROOT / "docs" / "targets.md").read_text()
    assert r.stdout == doc.split("$ offlow targets\n", 1)[1].split("```", 1)[0]


def test_a_fold_placed_on_gpu_with_two_cores_is_one_error() -> None:
    """A user gives the gpu segment two cores: one error naming the segment and why."""
    with _env("CRUNCH", "gpu"):
        prog = load_program(FOLD, ["crunch.cores=0,1"])
    with pytest.raises(OfflowError, match=r"segment `crunch` cannot run on target `gpu`"):
        plan_program(prog)


# ---- an egress picker on a remote device over 127.0.0.1, its table changed live --------

EGRESS_FIB = ["10.0.0.0/8", "10.5.0.0/16", "192.0.2.128/25"]
EGRESS_DSTS = ["10.5.1.1", "10.77.3.4", "10.9.9.9", "192.0.2.200", "203.0.113.9"]


@pytest.fixture(scope="module")
def egress_input(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """50 UDP datagrams to five destinations in turn (one in no prefix), 0..12 bytes."""
    frames = []
    for k in range(50):
        ip = _udp("10.0.0.1", 9, b"e" * (k % 13))
        ip = ip[:16] + socket.inet_aton(EGRESS_DSTS[k % 5]) + ip[20:]
        ip = ip[:10] + b"\0\0" + ip[12:]
        csum = sum(struct.unpack("!10H", ip[:20]))
        while csum >> 16:
            csum = (csum & 0xFFFF) + (csum >> 16)
        frames.append(_eth(ip[:10] + struct.pack("!H", ~csum & 0xFFFF) + ip[12:]))
    d = tmp_path_factory.mktemp("egress")
    _write(d / "in.pcap", frames)
    (d / "fib.txt").write_text("\n".join(EGRESS_FIB) + "\n")
    return d / "in.pcap", d / "fib.txt"


def _egress_dst(frame: bytes) -> str:
    return socket.inet_ntoa(frame[30:34])


@pytest.mark.parametrize("where", [
    pytest.param(("remote:edge",), marks=needs_ucx, id="pick-remote"),
    pytest.param(("remote:edge", "rx.device=remote:edge"), marks=needs_ucx,
                 id="rx-and-pick-remote"),
    pytest.param(("host",), id="host")])
def test_remote_egress_picks_the_hops_python_computes(
        where: tuple[str, ...], egress_input: tuple[Path, Path], served: Servers,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On `remote:edge` over 127.0.0.1 (also with the source's segment there: two
    segments on one core of a remote device, whose shared thread's C name held the
    device's `:` and did not compile), and on the host: each frame's hop as the
    longest prefix and docs/router.md's rule give it (11 ports), the uncovered
    destination dropped with its reason, `per_hop` as Python counts the output."""
    cap, fib = egress_input
    extra: dict[str, Any] = {}
    if where[0].startswith("remote"):
        for k, v in TCP.items():
            monkeypatch.setenv(k, v)
        extra = {"remotes": (f"edge=127.0.0.1:{served.ports(1)[0]}",),
                 "secret_file": served.secret}
    out = tmp_path / "out.pcap"
    with _env("PICK", where[0]):
        s = run_example(where[1:], program=EGRESS, input=cap, output=out,
                        opts=(f"egress.path={fib}",), **extra)
    assert s["ok"], s["errors"]
    got = read_frames(out)
    want = [f for f in read_frames(cap) if _hop_of(_egress_dst(f), EGRESS_FIB, 11)]
    assert [f[:5] + f[6:] for f in got] == [f[:5] + f[6:] for f in want]
    assert [f[5] for f in got] == [_hop_of(_egress_dst(f), EGRESS_FIB, 11) for f in want]
    assert {d["reason"]: d["packets"] for d in s["accounting"]["dropped"]} == {
        "no_egress": 10}
    per_hop = [0] * 12
    for f in got:
        per_hop[f[5] % 12] += 1
    assert s["tables"]["per_hop"] == per_hop


def _hop_runs(frames: list[bytes]) -> dict[str, list[int]]:
    """Per destination, the hops of its frames in output order with repeats collapsed."""
    runs: dict[str, list[int]] = {}
    for f in frames:
        r = runs.setdefault(_egress_dst(f), [])
        if not r or r[-1] != f[5]:
            r.append(f[5])
    return runs


@needs_ucx
def test_offlow_ctl_changes_the_remote_egress_table_while_it_runs(
        egress_input: tuple[Path, Path], served: Servers, tmp_path: Path) -> None:
    """`offlow ctl WINDOW route add/del --table egress` while the picker forwards on
    `remote:edge` (the input looped): each destination's hop goes from the old answer to
    the new one once and never back (10.77/16 added with hop 9, then 10.5/16 deleted:
    its addresses fall back to 10/8's); a prefix that is none and a route not in the
    table are each one error line, exit status 2."""
    cap, fib = egress_input
    out, wfile = tmp_path / "out.pcap", tmp_path / "w.json"
    run = subprocess.Popen(
        [sys.executable, "-m", "offlow.cli", "run", str(EGRESS), "--input", str(cap),
         "--output", str(out), "--opt", f"egress.path={fib}", "--loops", "1000000",
         "--rate", "5000", "--window-file", str(wfile), "--remote",
         f"edge=127.0.0.1:{served.ports(1)[0]}", "--secret-file", str(served.secret)],
        cwd=ROOT, env={**os.environ, **TCP, "PICK": "remote:edge"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        window = window_in(run, wfile, within=240)
        _frames_until(out, run, lambda fr: len(fr) >= 100)
        ctl = ("--table", "egress")
        for args in (("add", "10.77.0.0/16", "9"), ("del", "10.5.0.0/16")):
            r = offlow_cli("ctl", window, "route", *args, *ctl)
            assert r.returncode == 0, r.stderr
        for args in (("add", "10.77.0.0/33", "3"), ("del", "10.66.0.0/16")):
            r = offlow_cli("ctl", window, "route", *args, *ctl)
            assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        fallback = _hop_of("10.5.1.1", ["10.0.0.0/8"], 11)
        _frames_until(out, run, lambda fr: _hop_runs(fr).get("10.5.1.1", [])[-1:] ==
                      [fallback] and len(fr) >= 600)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err
    before = {d: _hop_of(d, EGRESS_FIB, 11) for d in EGRESS_DSTS}
    assert _hop_runs(read_frames(out)) == {
        "10.5.1.1": [before["10.5.1.1"], fallback],
        "10.77.3.4": [before["10.77.3.4"], 9],
        "10.9.9.9": [before["10.9.9.9"]],
        "192.0.2.200": [before["192.0.2.200"]]}


def _frames_until(out: Path, run: subprocess.Popen[str], done: Any) -> None:
    """Reads the output as the run writes it until `done(frames)` holds, the run ends or
    300 s pass (the checks after it then say what happened)."""
    frames: list[bytes] = []
    at, end = 0, time.monotonic() + 300
    while run.poll() is None and time.monotonic() < end:
        more, at = _complete_records(out, at)
        frames += more
        if done(frames):
            return
        time.sleep(0.05)   # (a poll: 5,000 frames a second come)


class CountSeen(Element):
    """A user's mistake on gpu: a packet counter in a `static` local (C takes it; OpenCL
    C 1.2 does not, and a work-item keeps nothing between packets anyway)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = r"""
    static uint32_t seen;   /* "how many so far" } */
    seen++;
    if (seen > 1000000u) DROP();
    """


@needs_opencl
def test_a_body_opencl_refuses_is_its_error_without_the_headers_warnings() -> None:
    """The OpenCL compiler's error, pointing at the body's line in this file, and none of
    the warnings offlow's own headers draw from PoCL (`use of logical '&&' with constant
    operand` in err.h): they filled the 512-byte message after the error, the last one
    cut mid-line, and on a compiler that lists diagnostics in source order they would
    have pushed the error out."""
    p = Program("static_seen")
    wire, eth, v4, junk = Source("wire"), ParseEth("eth"), CheckIPv4("v4"), Discard("junk")
    seen, out = CountSeen("seen"), Sink("out")
    wire >> eth
    eth["ipv4"] >> v4 >> seen >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("rx", [wire, eth, v4, junk], device="nic", cores=[0])
    p.segment("mid", [seen], device="gpu", cores=[0])
    p.segment("tx", [out], device="host", cores=[0])
    with pytest.raises(OfflowError) as e:
        build(p)
    lines = str(e.value).splitlines()
    assert lines[0] == "segment `mid` on gpu: the OpenCL compiler refused the kernel (error -11):"
    line = Path(__file__).read_text().splitlines().index(
        "    static uint32_t seen;   /* \"how many so far\" } */") + 1
    assert f"{Path(__file__).name}:{line}:" in lines[1] and "static" in lines[1], lines
    assert not any("warning:" in ln for ln in lines), lines


@needs_ucx
def test_a_remote_tables_file_is_looked_for_on_the_devices_machine(
        egress_input: tuple[Path, Path], served: Servers, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/remote.md: a table's `path` on a remote device names a file on that machine.
    The host used to refuse one it did not have itself before the run (`table egress:
    path=...: no such file`), so a file on the device's machine alone could not be used;
    now the device's machine reads it, and a file missing there is the run's one error,
    said by the device's process."""
    cap, _ = egress_input
    for k, v in TCP.items():
        monkeypatch.setenv(k, v)
    missing = tmp_path / "only-on-the-device.txt"
    with _env("PICK", "remote:edge"):
        s = run_example((), program=EGRESS, input=cap, opts=(f"egress.path={missing}",),
                        remotes=(f"edge=127.0.0.1:{served.ports(1)[0]}",),
                        secret_file=served.secret)
    assert not s["ok"] and len(s["errors"]) == 1, s["errors"]
    assert (f"its process exited there with status 1: table egress: cannot open prefix file "
            f"{missing}") in s["errors"][0]


# ---- more of a user's mistakes: already one error each (pinned) -----------------------

class TtlBump(Element):
    """A batch body only (a vector element written for the host)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    batch_body = r"""
    for (uint32_t k = 0; k < n; k++) states[k].ttl++;   /* "}" */
    """


class Spread(Element):
    """Counts by destination in an array of 400,000 counters (3.2 MB)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("t",)
    body = r"""
    t[state->dst4 & 262143u] += 1;
    """


def _middle(mid: Element, device: str) -> Program:
    p = Program("mistake")
    wire, eth, v4, junk = Source("wire"), ParseEth("eth"), CheckIPv4("v4"), Discard("junk")
    out = Sink("out")
    wire >> eth
    eth["ipv4"] >> v4 >> mid >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    if device == "xdp":
        p.segment("all", [wire, eth, v4, junk, mid, out], device="xdp", cores=[0])
    else:
        p.segment("rx", [wire, eth, v4, junk], device="nic", cores=[0])
        p.segment("mid", [mid], device=device, cores=[0])
        p.segment("tx", [out], device="host", cores=[0])
    return p


@pytest.mark.parametrize(("make", "device", "message"), [
    (lambda: TtlBump("bump"), "gpu", r"element `bump` \(TtlBump\) cannot run on target `gpu`: "
     r"it has only a batch body.*give the element a per-packet body"),
    (lambda: TtlBump("bump"), "xdp", r"element `bump` \(TtlBump\) cannot run on target `xdp`: "
     r"it has only a batch body"),
    (lambda: Spread("spread", t=Shared("wide", "uint64_t", 400_000)), "xdp",
     r"its shared array wide takes more than 2 MiB, the most one BPF map value here holds"),
    (lambda: Spread("spread", t=Shared("wide", "uint64_t", 400_000)), "gpu",
     r"its table `wide` \(uint64_t\) has no device-buffer form"),
], ids=["batch-only-gpu", "batch-only-xdp", "big-array-xdp", "array-gpu"])
def test_a_placement_the_target_cannot_run_is_one_error_at_compile_time(
        make: Any, device: str, message: str) -> None:
    with pytest.raises(OfflowError, match=message):
        plan_program(_middle(make(), device))


@needs_ucx
def test_a_remote_address_nobody_listens_on_is_the_runs_one_error(
        egress_input: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A port of 127.0.0.1 where no serve-device listens: one error naming the device and
    the address, no hang."""
    cap, fib = egress_input
    for k, v in TCP.items():
        monkeypatch.setenv(k, v)
    with socket.socket() as free:  # a port nobody listens on (bound, never listened)
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
        secret = tmp_path / "s"
        secret.write_text("y" * 40)
        secret.chmod(0o600)
        with _env("PICK", "remote:edge"):
            s = run_example((), program=EGRESS, input=cap, opts=(f"egress.path={fib}",),
                            remotes=(f"edge=127.0.0.1:{port}",), secret_file=secret)
    assert not s["ok"] and len(s["errors"]) == 1, s["errors"]
    assert s["errors"][0].startswith(f"remote device remote:edge (127.0.0.1:{port}): "
                                     "refused before any packet moved"), s["errors"]


@needs_bpf
def test_an_iface_that_does_not_exist_is_one_error_before_anything_starts() -> None:
    from offlow.runner import RunOptions, build_for

    with _env("GATE", "xdp"):
        prog = load_program(ACL)
    o = RunOptions(iface="nope0", duration=1)
    with pytest.raises(OfflowError, match=r"--iface nope0: no such interface in this network "
                                          r"namespace"):
        build_for(prog, o)


@pytest.mark.parametrize("rx", ["xdp", "remote:edge"])
def test_the_host_sends_the_gpus_table_when_the_first_device_is_xdp_or_remote(
        rx: str) -> None:
    """Neither xdp's host side nor a remote device sends tables to other devices; the
    plan named them the sender (they read table files) and the gpu process waited for
    `zones` forever (a hang until the run's timeout)."""
    with _env("CRUNCH", "gpu"):
        plan = plan_program(load_program(FOLD, [f"rx.device={rx}"]))
    assert plan.table_sender == "host"
    assert next(t for t in plan.graph.shared if t.name == "zones").bulk
