"""Packet ports (`offlow run --port`, docs/ports.md): the router forwards through DPDK's
net_pcap, through net_af_packet and through afpacket on veth pairs in a network
namespace the test makes, with the same frames as through the pcap port (read back by
dpkt, not by offlow); bad port strings, a missing interface and a PMD that cannot start
get one clear error."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from offlow import OfflowError
from offlow.build import reload_object
from offlow.dsl.loader import load_program
from offlow.runner import RunOptions, build_for, run
from offlow.targets import xdp
from tests.e2e import ROOT, read_frames, run_example
from tests.test_router import bgp_slice, frames_to, write_pcap

ROUTER = ROOT / "examples" / "router.py"

needs_dpdk = pytest.mark.skipif(
    subprocess.run(["pkg-config", "--exists", "libdpdk"]).returncode != 0,
    reason="libdpdk-dev is not installed (benchmarks/common/peers.setup_dpdk installs it)")
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                                reason="network namespaces need root and iproute2")


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A slice of the BGP table, 2000 frames to it (a quarter unroutable) and the
    router's output through the pcap port: (table, input, expected output)."""
    d = tmp_path_factory.mktemp("ports")
    nets = bgp_slice(3000, 1000)
    table = d / "slice.txt"
    table.write_text("".join(f"{n}\n" for n in nets))
    capture, out = d / "in.pcap", d / "out.pcap"
    write_pcap(capture, frames_to(nets, random.Random(11), 2000))
    s = run_example(program=ROUTER, input=capture, output=out, opts=_tables(table))
    assert s["ok"], s["errors"]
    return table, capture, out


def _tables(table: Path) -> tuple[str, ...]:
    return (f"routes4.path={table}", f"routes6.path={table}")


@needs_dpdk
def test_router_through_dpdk_net_pcap_writes_what_the_pcap_port_writes(
        traffic: tuple[Path, Path, Path], tmp_path: Path) -> None:
    table, capture, expected = traffic
    out = tmp_path / "dpdk.pcap"
    # rx on the nic process, tx on the host: one net_pcap device each
    s = run_example(program=ROUTER, duration=1.0, opts=_tables(table),
                    ports=(f"rx=dpdk:net_pcap0,rx_pcap={capture}",
                           f"tx=dpdk:net_pcap1,tx_pcap={out}"))
    assert s["ok"], s["errors"]
    want = read_frames(expected)
    assert len(want) > 1000
    assert read_frames(out) == want


@needs_dpdk
@pytest.mark.skipif(xdp.TARGET.unusable() is not None,
                    reason=f"xdp cannot run here: {xdp.TARGET.unusable()}")
def test_a_dpdk_port_beside_a_segment_on_xdp(tmp_path: Path) -> None:
    """The TTL pipeline's rx segment on xdp, its sink on the host through a DPDK port:
    the xdp device's host side, which opens no source, builds without the port
    library's headers (they were in the common.h every device includes: a compile
    error), and the port writes what the pcap sink writes for the same run."""
    out, want = tmp_path / "dpdk.pcap", tmp_path / "pcap.pcap"
    s = run_example(["rx.device=xdp"], count=500, ports=(f"tx=dpdk:net_pcap0,tx_pcap={out}",))
    assert s["ok"], s["errors"]
    t = run_example(["rx.device=xdp"], count=500, output=want)
    assert t["ok"], t["errors"]
    assert len(read_frames(want)) > 100
    assert read_frames(out) == read_frames(want)


@needs_dpdk
def test_a_run_with_a_dpdk_port_can_be_reloaded() -> None:
    """offlow reload's shared object of a run whose sink is a DPDK port builds: it
    opens no source and is not given the port library's headers (it failed to compile
    while common.h, which it includes, named them)."""
    o = RunOptions(count=10, ports=("tx=dpdk:net_null0",))
    b = build_for(load_program(ROOT / "examples" / "ttl_pipeline.py"), o)
    assert reload_object(b, "host").is_file()


@needs_dpdk
def test_dpdk_source_spreads_over_the_cores_of_its_segment(
        traffic: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Two cores on the rx segment: the port gets two RX queues (net_pcap: one per
    rx_pcap), each core reads one; every frame is forwarded once."""
    table, capture, expected = traffic
    frames = read_frames(capture)
    halves = [tmp_path / "a.pcap", tmp_path / "b.pcap"]
    for h, part in zip(halves, (frames[::2], frames[1::2]), strict=True):
        write_pcap(h, part)
    out = tmp_path / "dpdk.pcap"
    s = run_example(["rx.cores=0,1"], program=ROUTER, duration=1.0, opts=_tables(table),
                    ports=(f"rx=dpdk:net_pcap0,rx_pcap={halves[0]},rx_pcap={halves[1]}",
                           f"tx=dpdk:net_pcap1,tx_pcap={out}"))
    assert s["ok"], s["errors"]
    assert sorted(read_frames(out)) == sorted(read_frames(expected))


@pytest.mark.parametrize("spec, message", [
    ("dpdk", "expected [NAME=]dpdk:ARGS or [NAME=]afpacket:IFACE"),
    ("pcap:x", "expected [NAME=]dpdk:ARGS"),
    ("dpdk:", "expected DPDK device arguments"),
    ("dpdk:--vdev", "expected DPDK device arguments"),
    ("dpdk:eth0", "is neither a virtual device"),
    ("dpdk:net_pcap0,rx_pcap", "`rx_pcap` is not KEY=VALUE"),
    ("dpdk:net_pcap0,rx_pcap=/nonexistent/in.pcap", "rx_pcap=/nonexistent/in.pcap: no such"),
    ("afpacket:", "is not an interface name"),
    ("afpacket:no-such-if9", "no interface `no-such-if9` here"),
    ("nosuch=afpacket:lo", "no source or sink named `nosuch` (the program has rx, tx)"),
])
def test_bad_port_is_one_clear_error_before_any_process_starts(spec: str, message: str) -> None:
    prog = load_program(ROUTER)
    o = RunOptions(ports=(spec,), duration=1.0)
    with pytest.raises(OfflowError) as e:
        run(build_for(prog, o), o)
    assert message in str(e.value)


def test_a_source_on_a_port_needs_a_duration() -> None:
    o = RunOptions(ports=("rx=afpacket:lo",))
    with pytest.raises(OfflowError, match="give --duration"):
        run(build_for(load_program(ROUTER), o), o)


@needs_dpdk
def test_a_pmd_that_fails_to_start_stops_the_run_with_its_reason(tmp_path: Path) -> None:
    """net_af_packet on an interface that is not there: known only to the PMD. The
    device process says why, the run stops cleanly (no process or EAL folder left)."""
    before = _eal_folders()
    s = run_example(program=ROUTER, duration=5.0,
                    ports=("rx=dpdk:net_af_packet0,iface=no-such-if9",))
    assert not s["ok"]
    # the run's one error, the reason (ofl_start_failf), not an exit status
    assert s["errors"] == ["source rx: DPDK has no port net_af_packet0 (a driver that failed "
                           "to start, or not an ethdev: see the EAL's messages above)"], s["errors"]
    assert not _orphans(_eal_folders() - before)


def _eal_folders() -> set[str]:
    run_dir = Path("/var/run/dpdk")
    return {p.name for p in run_dir.glob("offlow-[0-9]*")} if run_dir.is_dir() else set()


def _orphans(folders: set[str]) -> set[str]:
    """The EAL folders (``offlow-PID``) whose process is gone: a run left them behind.
    (A live process's folder belongs to a run going on beside this test.)"""
    return {f for f in folders if not Path(f"/proc/{f.removeprefix('offlow-')}").exists()}


# ---- veth pairs in a network namespace --------------------------------------------

@pytest.fixture
def netns() -> Iterator[str]:
    """A namespace with two veth pairs, in0-peer0 (frames into the router) and
    out0-peer1 (frames out of it), up, without IPv6 (no router solicitations)."""
    ns = f"offlow-t{os.getpid()}"
    ip = ["ip", "-n", ns]
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                        "net.ipv6.conf.default.disable_ipv6=1"], check=True)
        for a, b in (("in0", "peer0"), ("out0", "peer1")):
            subprocess.run([*ip, "link", "add", a, "type", "veth", "peer", "name", b],
                           check=True)
            for i in (a, b):
                subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                                f"net.ipv6.conf.{i}.disable_ipv6=1"], check=True)
                subprocess.run([*ip, "link", "set", i, "up"], check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


# Runs in the namespace: starts `offlow run` (argv), waits until it forwards a probe (an
# input frame the expected output holds, its UDP payload - the frame's index - set to
# ffffffff), sends the input's frames into peer0, collects what arrives on peer1 until
# the run ends (stopped once as many frames as expected came back and then nothing for
# 1 s, else at its --duration) and writes it, without the probes, as a pcap.
DRIVER = r"""
import signal, socket, subprocess, sys, time
import dpkt
inp, expected, out, send_if, recv_if, *cmd = sys.argv[1:]
PROBE = b"\xff" * 4
frames = [bytes(b) for _, b in dpkt.pcap.Reader(open(inp, "rb"))]
first = next(iter(dpkt.pcap.Reader(open(expected, "rb"))))[1]
probe = frames[int.from_bytes(first[-4:], "big")][:-4] + PROBE
p = subprocess.Popen(cmd)
deadline = time.time() + 60
while True:  # (a net_tap port makes its interface when the run starts)
    try:
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx.bind((recv_if, 0))
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((send_if, 0))
        break
    except OSError:
        assert time.time() < deadline and p.poll() is None, "no interfaces"
        time.sleep(0.05)
rx.settimeout(0.05)
got = []
def receive():
    try:
        fr, addr = rx.recvfrom(65535)
    except socket.timeout:
        return False
    except OSError:  # ENETDOWN: a tap the run has not brought up yet
        time.sleep(0.01)
        return False
    if addr[2] != socket.PACKET_OUTGOING:
        got.append(fr)
    return True
while not any(fr.endswith(PROBE) for fr in got):
    assert time.time() < deadline and p.poll() is None, "the run never forwarded a probe"
    try:
        tx.send(probe)
    except OSError:  # (the interface is not up yet)
        time.sleep(0.05)
    receive()
for k, fr in enumerate(frames):
    tx.send(fr)
    if k % 32 == 31:  # (gently: other work shares these cores)
        time.sleep(0.005)
# Every expected frame back and nothing more for a second (a duplicate would have come
# with its first copy): the run is stopped as by Ctrl-C. Its --duration ends it when
# frames are missing.
want = sum(1 for _ in dpkt.pcap.Reader(open(expected, "rb")))
quiet, stopped = time.time(), False
while True:
    if receive():
        quiet = time.time()
    elif p.poll() is not None:
        break
    elif (not stopped and time.time() - quiet >= 1.0
          and sum(not fr.endswith(PROBE) for fr in got) >= want):
        p.send_signal(signal.SIGINT)
        stopped = True
with open(out, "wb") as f:
    w = dpkt.pcap.Writer(f)
    for fr in got:
        if not fr.endswith(PROBE):
            w.writepkt(fr)
sys.exit(p.returncode)
"""


@needs_root
@pytest.mark.parametrize("kind, cores", [("afpacket", 1), ("afpacket", 2), ("dpdk", 1),
                                         ("net_tap", 1)])
def test_router_through_veth_ports_forwards_what_the_pcap_port_writes(
        kind: str, cores: int, netns: str, traffic: tuple[Path, Path, Path],
        tmp_path: Path) -> None:
    """Frames sent into one interface of the namespace come out of another as through
    the pcap port: afpacket and net_af_packet on veth pairs, net_tap on the tap
    interfaces the PMD makes there. With two rx cores, afpacket's sockets share the
    interface through one fanout group: each frame reaches one core (no duplicates)."""
    if kind != "afpacket" and subprocess.run(["pkg-config", "--exists", "libdpdk"]).returncode:
        pytest.skip("libdpdk-dev is not installed")
    table, capture, expected = traffic
    ports = {"afpacket": ("rx=afpacket:in0", "tx=afpacket:out0"),
             "dpdk": ("rx=dpdk:net_af_packet0,iface=in0,framecnt=4096",
                      "tx=dpdk:net_af_packet1,iface=out0,framecnt=4096"),
             # DPDK makes the tap interfaces: the test sends into dtap0, reads dtap1
             "net_tap": ("rx=dpdk:net_tap0,iface=dtap0", "tx=dpdk:net_tap1,iface=dtap1")}
    links = {"net_tap": ("dtap0", "dtap1")}.get(kind, ("peer0", "peer1"))
    cmd = [str(Path(sys.executable).with_name("offlow")), "run", str(ROUTER), "--duration", "6",
           "--timeout", "60", "--set", f"rx.cores={','.join(map(str, range(cores)))}",
           *(a for t in _tables(table) for a in ("--opt", t)),
           *(a for p in ports[kind] for a in ("--port", p))]
    got = tmp_path / "got.pcap"
    res = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", DRIVER,
                          str(capture), str(expected), str(got), *links, *cmd],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(read_frames(got)) == sorted(read_frames(expected)), res.stdout


@needs_dpdk
def test_port_run_json_matches_the_schema_and_accounts_every_frame(
        traffic: tuple[Path, Path, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import jsonschema

    from offlow.cli import main

    table, capture, _ = traffic
    out = tmp_path / "out.pcap"
    argv = ["run", str(ROUTER), "--duration", "1", "--json",
            "--port", f"rx=dpdk:net_pcap0,rx_pcap={capture}",
            "--port", f"tx=dpdk:net_pcap1,tx_pcap={out}",
            *(a for t in _tables(table) for a in ("--opt", t))]
    assert main(argv) == 0
    s = json.loads(capsys.readouterr().out)
    jsonschema.validate(s, json.loads((ROOT / "docs" / "run-result.schema.json").read_text()))
    assert s["sinks"]["tx"]["port"] == f"net_pcap1,tx_pcap={out}"
    assert s["sinks"]["tx"]["refused"] == 0
    assert s["accounting"]["read"] == 2000 and s["accounting"]["unaccounted"] == 0


def test_port_spec_parser_takes_any_string_without_crashing() -> None:
    """Random specs built from the grammar's pieces and noise: each is a Port or one
    OfflowError, nothing else (the parser's fuzz test)."""
    from offlow import ports

    rng = random.Random(33)
    pieces = ["dpdk", "afpacket", ":", "=", ",", "rx", "net_pcap0", "rx_pcap", "lo",
              "0000:01:00.0", "01:00.0", "-", " ", "/", "\x00", "é", "net_", "iface"]
    for _ in range(3000):
        spec = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        try:
            name, port = ports.parse(spec)
        except OfflowError as e:
            assert str(e).startswith(f"--port `{spec}`")
        else:
            assert port.kind in ports.KINDS and spec.endswith(port.args)
