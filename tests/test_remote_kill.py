"""A remote device's own process killed (SIGKILL) while its `offlow serve-device`
survives (docs/remote.md, Faults): the run ends with one error naming the device, every
packet is accounted, and the same server serves the next run. Once with the device's
source on it (the TTL pipeline), once with a device segment that copies each frame the
host sends it onto two rings back to the host (tests/programs/twin_tap.py). And the
link itself lost (serve-device killed) in the middle of the toll_gate run, frames
crossing both ways."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from offlow.remote import DEV_DIRS
from offlow.targets import remote
from tests.e2e import read_frames, window_in
from tests.procs import child_pids
from tests.test_remote import CLI, on_remote, run, secret_file, serve, start, ttl_pipeline

pytestmark = pytest.mark.skipif(remote.TARGET.unusable() is not None,
                                reason=f"remote: {remote.TARGET.unusable()}")

def device_pid(srv: subprocess.Popen[str]) -> int:
    """The device's process that serve-device `srv` runs: its child whose executable is
    the one the host sent (in serve-device's folder for the run)."""
    folders = list(DEV_DIRS.glob(f"offlow-remote-dev-{srv.pid}-*"))
    assert len(folders) == 1, folders
    exe = folders[0] / "device"
    for pid in child_pids(srv.pid):
        try:
            if Path(f"/proc/{pid}/exe").resolve() == exe.resolve():
                return pid
        except OSError:
            continue
    raise AssertionError(f"no device process under serve-device {srv.pid}")

def wait_until(p: subprocess.Popen[str], ready: Any) -> None:
    """Until `ready()` (packets reach the host's sink); fails if the run ends first."""
    deadline = time.monotonic() + 120  # generous: a cold cache compiles first
    while not ready() and time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        time.sleep(0.05)
    assert ready(), "no packets came"

def one_error_of(s: dict[str, Any], port: int) -> tuple[str, int, int]:
    """Summary `s`'s one error, the device's: why, and the entries that had come from
    and gone to it."""
    assert len(s["errors"]) == 1, s["errors"]
    m = re.fullmatch(rf"remote device remote:a \(127\.0\.0\.1:{port}\): (.*); (\d+) ring "
                     r"entries \(packets\) had come from it and (\d+) gone to it",
                     s["errors"][0])
    assert m, s["errors"]
    return m[1], int(m[2]), int(m[3])


def the_one_error(p: subprocess.Popen[str], port: int) -> tuple[dict[str, Any], str, int, int]:
    """Run `p` ended (it does once its device is gone: no timing asserted) with exit 1
    and one error: its summary, why, and the entries that had come from and gone to the
    device (one_error_of)."""
    o, err = p.communicate(timeout=120)
    s = json.loads(o)
    assert p.returncode == 1, err
    return s, *one_error_of(s, port)

def still_serves(procs: list[subprocess.Popen[str]], srv: subprocess.Popen[str], port: int,
                 secret: Path, folder: Path) -> None:
    """The same serve-device serves a whole new run after the killed one."""
    assert srv.poll() is None
    out = folder / "again.pcap"
    rc, s, err = run(procs, ttl_pipeline(out, "--set", "rx.device=remote:a", "--remote",
                                         f"a=127.0.0.1:{port}", "--secret-file", str(secret)))
    assert rc == 0 and s["ok"], err
    assert len(read_frames(out)) == 1095

def test_a_killed_device_process_whose_server_survives_is_the_runs_one_error(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """The TTL pipeline's NIC part (its source) on the device: its process killed while
    frames flow. The run ends with one error naming the device and what had crossed;
    the accounting balances on what the host saw come (the device's own counts died
    with it)."""
    secret = secret_file(tmp_path)
    srv, port = serve(procs, secret)
    out = tmp_path / "out.pcap"
    p = start(procs, ["run", *ttl_pipeline(out, "--loops", "1000000", "--set",
                                           "rx.device=remote:a", "--remote",
                                           f"a=127.0.0.1:{port}", "--secret-file", str(secret)),
                      "--json", "--timeout", "300"])
    wait_until(p, lambda: out.exists() and out.stat().st_size >= 100_000)
    os.kill(device_pid(srv), signal.SIGKILL)
    s, why, came, gone = the_one_error(p, port)
    assert why == "its process was killed there by signal 9 (Killed)", why
    assert gone == 0 and came > 0 and s["sinks"]["tx"]["packets"] == came, (came, s["sinks"])
    assert len(read_frames(out)) == came
    # what the device made stands beside read (its source's counts died with it): what
    # came, and what its server still held and never sent (a counted drop)
    a = s["accounting"]
    unsent = sum(d["packets"] for d in a["dropped"]
                 if (d["at"], d["reason"]) == ("remote:a", "link_aborted_from_device"))
    assert a["forwarded"] == came and a["unaccounted"] == 0, a
    assert a["from_devices"] == came + unsent and len(a["dropped"]) == (unsent > 0), a
    still_serves(procs, srv, port, secret, tmp_path)

def test_a_killed_device_process_that_copies_the_hosts_frames_is_accounted(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """A user's tap copies every frame the host sends it onto two rings back to the host
    (tests/programs/twin_tap.py); its process is killed while frames flow both ways. One
    error names the device and what had crossed, and every frame the host sent is
    counted: delivered to a sink, a counted drop, or in the error's counts (what went to
    the device and what came from it, copies included)."""
    secret = secret_file(tmp_path)
    srv, port = serve(procs, secret)
    prog = on_remote("twin_tap", tmp_path)
    out = tmp_path / "out.pcap"
    p = start(procs, ["run", str(prog), "--count", "100000000", "--output", str(out),
                      "--remote", f"a=127.0.0.1:{port}", "--secret-file", str(secret),
                      "--json", "--timeout", "300"])
    mirror = tmp_path / "out.mirror.pcap"
    wait_until(p, lambda: mirror.exists() and mirror.stat().st_size >= 100_000)
    os.kill(device_pid(srv), signal.SIGKILL)
    s, why, came, gone = the_one_error(p, port)
    assert why == "its process was killed there by signal 9 (Killed)", why
    a = s["accounting"]
    assert a["unaccounted"] == 0, (a, s["links"])
    at = {(d["at"], d["reason"]): d["packets"] for d in a["dropped"]}
    # what came from it (copies too) is at a sink or dropped with its reason on the host:
    # in a ring the link broke, before or after it was committed there
    left = sum(n for (where, reason), n in at.items()
               if where.startswith("tap->") and reason == "ring_broken")
    sinks = s["sinks"]
    assert came == (sinks["out"]["packets"] + sinks["mirror"]["packets"] + left +
                    at.get(("remote:a", "ring_broken_on_host"), 0)), (came, sinks, at)
    # every frame the host read is a drop at the link with its reason (all that went to
    # the device, the error's count; and what was published for it and never went, when
    # the host's core broke its ring first) or, when the stand-in broke it first, never
    # left the host's ring (its producer's ring_broken)
    at_link = sum(at.get(("remote:a", reason), 0) for reason in (
        "link_aborted_to_device", "ring_broken_on_device", "in_device_when_link_ended"))
    assert 0 < gone <= at_link, (gone, at)
    assert a["read"] == at_link + at.get(("entry->tap", "ring_broken"), 0), (a, at)
    # from the device: what came, and what its server held and never sent
    unsent = at.get(("remote:a", "link_aborted_from_device"), 0)
    assert a["from_devices"] == came + unsent, a
    still_serves(procs, srv, port, secret, tmp_path)


def log_took(window: str) -> int:
    """What the toll_gate run's host segment `exit` (its log) has taken so far, as
    `offlow stats WINDOW` prints it."""
    got = subprocess.run([*CLI, "stats", window], capture_output=True, text=True, timeout=60)
    for line in got.stdout.splitlines():
        if line.startswith("offlow_segment_packets_total{") and 'segment="exit"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_a_link_lost_in_the_middle_of_the_toll_gate_run_is_accounted(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """The toll_gate program (tests/programs/toll_gate.py) with its gate remote, frames
    sent slowly so that its serve-device is killed (the link lost) before the gate's
    500th frame: the run's one error is the lost link, not the gate's, and every frame
    the host read is at its log, a counted drop, or among those gone to the device."""
    secret = secret_file(tmp_path)
    srv, port = serve(procs, secret)
    prog = on_remote("toll_gate", tmp_path)
    out = tmp_path / "out.pcap"
    p = start(procs, ["run", str(prog), "--count", "100000", "--rate", "50", "--output",
                      str(out), "--remote", f"a=127.0.0.1:{port}", "--secret-file",
                      str(secret), "--json", "--timeout", "300", "--window-file",
                      str(tmp_path / "window.json")])
    window = window_in(p, tmp_path / "window.json")
    wait_until(p, lambda: log_took(window) >= 20)
    srv.kill()
    s, why, came, gone = the_one_error(p, port)
    assert "lost" in why, why
    assert 20 <= came == s["sinks"]["log"]["packets"] < 499, (came, s["sinks"])
    a = s["accounting"]
    assert a["unaccounted"] == 0, (a, s["links"])
    at = {(d["at"], d["reason"]): d["packets"] for d in a["dropped"]}
    # each frame once: a drop at the link or its producer's, as above
    at_link = sum(at.get(("remote:a", reason), 0) for reason in (
        "link_aborted_to_device", "in_device_when_link_ended"))
    assert gone <= at_link, (gone, at)
    assert a["read"] == at_link + at.get(("entry->gate", "ring_broken"), 0), (a, at)
    assert a["from_devices"] == came, a
