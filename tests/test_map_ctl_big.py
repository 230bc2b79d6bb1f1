"""`offlow ctl ... map` on a map whose entries fit no control message (runtime
ctl_stage.h, offlow/control.py: requests staged in parts, long replies read back in
parts): a user's IPv6 policy table (tests/programs/v6_policy.py: a 57-byte key of
addresses, ports, MACs and small fields, 8-byte values, comments in the body) run with
`offlow run --window-file` on host, nic and xdp (the BPF hash map, through its fd; the
xdp run makes and removes its own namespace). While its frames flow, `offlow ctl` walks
the four flows it learned; a client stages half of a set and dies; `offlow ctl` then
sets one flow's policy (the traffic class it then writes),
sets, reads and deletes a key of its own; the frames (read with dpkt) show the traffic
class from some frame on and never the old one after it. The same through the Python
API with the segment on a remote device (each part crosses the link). A malformed
staged request is one error and changes nothing; `offlow explain` says the entries go
in parts."""

from __future__ import annotations

import ipaddress
import json
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import dpkt
import jsonschema
import pytest

from offlow import live
from offlow.build import plan_program
from offlow.control import ControlError
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.explain import explain
from offlow.report import format_summary, summarize
from offlow.runner import RunOptions
from offlow.session import session
from offlow.targets import remote
from tests.e2e import ROOT, offlow_cli, read_frames, window_in
from tests.remote_served import Servers
from tests.test_map_ctl import _complete_records, _stopped_if_failing, needs_bpf

POLICY = ROOT / "tests" / "programs" / "v6_policy.py"
SRC = "2001:db8::{}"
DST = "2001:db8:ff::1"


def _flow(k: int) -> str:
    """Flow k's key (k = 1..4) as offlow ctl reads and prints it."""
    return (f"src={SRC.format(k)},dst={DST},sport=1000,dport={52 + k},proto=17,"
            f"smac=02:00:00:00:00:0{k},dmac=04:04:04:04:04:04,vlan=0,label={0x12340 + k},"
            "hlim=64,ingress=0")


OWN = (f"src=2001:db8:1::9,dst={DST},sport=7,dport=7,proto=6,smac=02:00:00:00:00:09,"
       "dmac=04:04:04:04:04:04,vlan=3,label=1048575,hlim=1,ingress=200")


# A client that stages the first part of a 66-byte set and dies (its end of the
# channel left open): the next client's requests must not see its half.
DIES_HALF_WAY = """
import os, struct, sys
from offlow.session import attach
t = attach(sys.argv[1]).__enter__().tables["policy"]
t.request(b"S" + struct.pack("<I", 66))
t.request(b"P" + struct.pack("<I", 0) + b"s" + b"\\xff" * 50)
os._exit(3)
"""


def _capture(path: Path) -> None:
    """Flows 1..4: UDP from 2001:db8::k to ports 53..56, one frame each (looped)."""
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for k in range(1, 5):
            udp = dpkt.udp.UDP(sport=1000, dport=52 + k, data=b"q" * (10 + k))
            udp.ulen = len(bytes(udp))
            ip = dpkt.ip6.IP6(src=ipaddress.ip_address(SRC.format(k)).packed,
                              dst=ipaddress.ip_address(DST).packed, nxt=17, hlim=64,
                              flow=0x12340 + k, data=udp)
            ip.plen = len(udp)
            w.writepkt(bytes(dpkt.ethernet.Ethernet(src=bytes([2, 0, 0, 0, 0, k]),
                                                    dst=b"\x04" * 6, type=0x86DD,
                                                    data=ip)), ts=k * 1e-6)


def _traffic_class(frame: bytes) -> tuple[int, int]:
    """A frame's flow number (its source address's last byte) and traffic class."""
    ip = dpkt.ethernet.Ethernet(frame).data
    return ip.src[15], ip.fc


def _ctl(window: str, *args: str) -> subprocess.CompletedProcess[str]:
    return offlow_cli("ctl", window, "map", "policy", *args)


def _until_marked(out: Path, running: Callable[[], bool], after: int = 2000) -> None:
    """Wait until the output holds a frame of flow 2 with traffic class 46 and `after`
    frames behind it (or the run ended: `running()` false, or 300 s passed: the checks
    of the whole output then say what happened)."""
    seen, at, first = 0, 0, None
    end = time.monotonic() + 300
    while running() and time.monotonic() < end:
        frames, at = _complete_records(out, at)
        for k, f in enumerate(frames if first is None else ()):
            if _traffic_class(f) == (2, 46):
                first = seen + k
                break
        seen += len(frames)
        if first is not None and seen - first > after:
            return
        time.sleep(0.05)   # (a poll: the frames come at 20,000 a second)


@pytest.mark.parametrize("device", ["host", "nic", pytest.param("xdp", marks=needs_bpf)])
def test_offlow_ctl_walks_and_changes_a_map_too_wide_for_a_message(device: str,
                                                                   tmp_path: Path) -> None:
    cap, out, wfile = tmp_path / "in.pcap", tmp_path / "out.pcap", tmp_path / "w.json"
    _capture(cap)
    run = subprocess.Popen([sys.executable, "-m", "offlow.cli", "run", str(POLICY), "--set",
                            f"edge.device={device}", "--input", str(cap), "--output", str(out),
                            "--loops", "1000000", "--rate", "20000", "--window-file",
                            str(wfile)], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        window = window_in(run, wfile, within=240)
        end = time.monotonic() + 60   # the walk: each entry's reply read back in parts
        while len(_ctl(window, "list").stdout.splitlines()) < 4 and time.monotonic() < end:
            time.sleep(0.05)
        listed = _ctl(window, "list")
        assert sorted(listed.stdout.splitlines()) == [f"{_flow(k)} 0" for k in range(1, 5)], (
            listed.stderr)
        # a client that dies half-way through staging a set, holding the channel
        dead = subprocess.run([sys.executable, "-c", DIES_HALF_WAY, window],
                              capture_output=True, text=True, timeout=60)
        assert dead.returncode == 3, dead.stderr
        # each request staged in parts: set (66 bytes), get and delete (58)
        assert _ctl(window, "set", _flow(2), "46").returncode == 0
        got = _ctl(window, "get", _flow(2))
        assert (got.returncode, got.stdout) == (0, "46\n"), got.stderr
        assert _ctl(window, "set", OWN, str(2**64 - 1)).returncode == 0
        assert _ctl(window, "get", OWN).stdout == f"{2**64 - 1}\n"
        assert f"{OWN} {2**64 - 1}" in _ctl(window, "list").stdout.splitlines()
        full = _ctl(window, "set", OWN.replace("vlan=3", "vlan=4"), "1")
        assert full.returncode == 2 and "the map is full (5 keys)" in full.stderr, full.stderr
        assert _ctl(window, "delete", OWN).returncode == 0
        for args in (("get", OWN), ("delete", OWN)):
            gone = _ctl(window, *args)
            assert gone.returncode == 2 and gone.stderr.count("\n") == 1, gone.stderr
        assert sorted(_ctl(window, "list").stdout.splitlines()) == sorted(
            f"{_flow(k)} {46 if k == 2 else 0}" for k in range(1, 5))
        info = _ctl(window, "info").stdout
        assert info.startswith("kind map, type u, size 8, length 4, updates 3, entries 5"), info
        _until_marked(out, lambda: run.poll() is None)
        run.send_signal(signal.SIGINT)   # stops as Ctrl-C does: the run's counts kept
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err
    _check_traffic_classes(out)


def _check_traffic_classes(out: Path) -> None:
    """Flows 1, 3 and 4 never marked; flow 2 traffic class 0 up to some frame, then 46
    on every later one, and on at least one."""
    tc: dict[int, list[int]] = {}
    for f in read_frames(out):
        flow, c = _traffic_class(f)
        tc.setdefault(flow, []).append(c)
    assert all(set(tc[k]) == {0} for k in (1, 3, 4)), {k: set(v) for k, v in tc.items()}
    marked = tc[2]
    assert 46 in marked, f"none of flow 2's {len(marked)} frames carried traffic class 46"
    first = marked.index(46)   # 0 until the set reached the core, then 46 on every frame
    assert 0 < first and set(marked[:first]) == {0} and set(marked[first:]) == {46}


@pytest.mark.skipif(remote.TARGET.unusable() is not None,
                    reason=f"remote: {remote.TARGET.unusable()}")
def test_a_wide_map_on_a_remote_device_through_the_python_api(
        tmp_path: Path, served: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same program on `remote:m`: each part of a staged request, and of a reply
    read back, crosses the link to the device's process and back."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret, (port,) = served.secret, served.ports(1)
    cap, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    _capture(cap)
    opts = RunOptions(input=cap, output=out, loops=1_000_000, rate=20_000,
                      remotes=(f"m=127.0.0.1:{port}",), secret_file=secret)
    with session(load_program(POLICY, ["edge.device=remote:m"]), opts) as s, \
            _stopped_if_failing(s):
        m = s.tables["policy"].map()   # (waits for the device, which starts after the run)
        end = time.monotonic() + 60
        while len(dict(m.items())) < 4 and time.monotonic() < end:
            time.sleep(0.05)
        assert dict(m.items()) == {_flow(k): 0 for k in range(1, 5)}
        m.set(_flow(2), 46)
        assert m.get(_flow(2)) == 46
        m.set(OWN, 9)
        assert m.get(OWN) == 9
        m.delete(OWN)
        assert m.get(OWN) is None
        _until_marked(out, lambda: s.result is None)
        s.stop()
    assert s.result is not None and s.result.ok, s.result
    _check_traffic_classes(out)


def test_malformed_staged_requests_are_one_error_and_change_nothing(tmp_path: Path) -> None:
    """Through the Python API on host: parts with no request begun, out of order, an
    incomplete request run, a read with no reply kept; a request too long for any
    table; the map as it was after each."""
    cap = tmp_path / "in.pcap"
    _capture(cap)
    opts = RunOptions(input=cap, output=tmp_path / "out.pcap", loops=200, rate=20_000)
    with session(load_program(POLICY), opts) as s, _stopped_if_failing(s):
        t = s.tables["policy"]
        m = t.map()
        end = time.monotonic() + 60
        while len(dict(m.items())) < 4 and time.monotonic() < end:
            time.sleep(0.05)
        before = dict(m.items())
        assert len(before) == 4
        for msg, error in [(b"P\0\0\0\0abc", "a part with no request begun"),
                           (b"X", "no request staged"),
                           (b"R\0\0\0\0", "no reply is kept to read"),
                           (b"S\xff\0\0\0", "a request of 255 bytes: this table's take 1..69")]:
            with pytest.raises(ControlError, match=error):
                t.request(msg)
        t.request(b"S" + struct.pack("<I", 66))
        t.request(b"P\0\0\0\0" + b"s" * 50)
        with pytest.raises(ControlError, match="a part of 3 at 60: 50 of 66 staged"):
            t.request(b"P" + struct.pack("<I", 60) + b"abc")
        with pytest.raises(ControlError, match="no request staged"):
            t.request(b"X")   # (the part out of order dropped it)
        with pytest.raises(ControlError, match="'s' of 59 bytes: want 65"):
            t.request(b"s" + bytes(59))   # staged by the client, refused whole
        with pytest.raises(OfflowError, match="a request of 65537 bytes; one takes at most "
                                              "65536"):
            t.request(b"s" + bytes(65536))
        assert t.info().updates == 0 and dict(m.items()) == before
        s.wait_drained(timeout=120)
    assert s.result is not None and s.result.ok, s.result


# A client that stages the whole of a set (S, every P) and is killed before its 'X'.
KILLED_BEFORE_RUN = """
import os, signal, struct, sys
from offlow.mapctl import parse_value
from offlow.session import attach
t = attach(sys.argv[1]).__enter__().tables["policy"]
m = t.map()
msg = b"s" + m.key(sys.argv[2]) + parse_value(m.layout, "9")
t.request(b"S" + struct.pack("<I", len(msg)))
for at in range(0, len(msg), 51):
    t.request(b"P" + struct.pack("<I", at) + msg[at:at + 51])
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_request_staged_by_a_client_killed_before_running_it_is_dropped(
        tmp_path: Path) -> None:
    """A client stages a whole set and is killed before its 'X': the next client's
    'X' runs nothing (the staged request was its dead client's: dropped, counted as a
    control drop in the live counters and the run's stats), the key is never set, and
    the next client's own requests are served."""
    cap = tmp_path / "in.pcap"
    _capture(cap)
    opts = RunOptions(input=cap, output=tmp_path / "out.pcap", loops=200, rate=20_000)
    with session(load_program(POLICY), opts) as s, _stopped_if_failing(s):
        killed = subprocess.run([sys.executable, "-c", KILLED_BEFORE_RUN, str(s.window), OWN],
                                capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        t = s.tables["policy"]
        with pytest.raises(ControlError, match="no request staged"):
            t.request(b"X")
        m = t.map()
        assert m.get(OWN) is None and t.info().updates == 0
        assert live.read(s.window, timeout=30)["host"]["ctl_dropped"] == {"policy": 1}
        m.set(OWN, 7)
        assert m.get(OWN) == 7
        s.wait_drained(timeout=120)
    assert s.result is not None and s.result.ok, s.result
    assert s.result.stats["host"]["ctl_dropped"] == {"policy": 1}
    summary = summarize(s.build.plan, s.result.stats)
    assert summary["ctl_dropped"] == {"policy": 1}
    jsonschema.validate(dict(summary, ok=True, errors=[], warnings=[], interrupted=False),
                        json.loads((ROOT / "docs" / "run-result.schema.json").read_text()))
    assert ("control policy: 1 request(s) staged in parts and dropped unrun (their client "
            "went away before running them)") in format_summary(summary).split("\n\n")


def test_explain_gives_a_wide_map_a_channel_in_parts() -> None:
    for device in ("host", "nic", "xdp"):
        plan = plan_program(load_program(POLICY, [f"edge.device={device}"]))
        assert "ctl.policy" in plan.program_channels
        line = next(x for x in explain(plan).splitlines() if x.startswith("  ctl.policy:"))
        assert line.startswith(f"  ctl.policy: table policy, served on {device}")
        assert line.endswith("; its entries (57 + 8 bytes) go in parts (a request or reply of "
                             "more than one 56-byte message is staged, then applied or read "
                             "whole)")
        assert "none:" not in explain(plan)
