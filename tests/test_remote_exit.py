"""A remote device's own process that exits by itself with a non-zero status, without
its stats (its own fatal error at start: here a capture it cannot open on its side),
while its `offlow serve-device` lives on (docs/remote.md, Faults): the run ends with
one error naming the device, the status and what the process said, every packet is
accounted, and the same server serves the next run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from offlow.targets import remote
from tests.e2e import EXAMPLE, TLS
from tests.test_remote import on_remote, run, secret_file, serve
from tests.test_remote_kill import one_error_of

pytestmark = pytest.mark.skipif(remote.TARGET.unusable() is not None,
                                reason=f"remote: {remote.TARGET.unusable()}")


def test_a_device_process_that_cannot_open_its_capture_is_the_runs_one_error(
        tmp_path: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The TTL pipeline's source on the device, reading `--input in.pcap`: a relative
    path the host finds (it checks the capture) but the device's process, in its
    server's folder, does not, so it exits with status 1 before any frame moves. One
    error says so with the process's own words; nothing is unaccounted; the server
    serves a whole new run with the capture's absolute path."""
    secret = secret_file(tmp_path)
    srv, port = serve(procs, secret)
    shutil.copy(TLS, tmp_path / "in.pcap")
    monkeypatch.chdir(tmp_path)
    remote_a = ["--set", "rx.device=remote:a", "--remote", f"a=127.0.0.1:{port}",
                "--secret-file", str(secret)]
    rc, s, err = run(procs, [str(EXAMPLE), "--input", "in.pcap", "--output",
                             str(tmp_path / "out.pcap"), *remote_a])
    assert rc == 1 and not s["ok"], err
    why, came, gone = one_error_of(s, port)
    assert why == ("its process exited there with status 1: source rx: cannot open "
                   "in.pcap: No such file or directory"), why
    # the process's words once, in the error (they were also a raw line before it)
    assert err.count("cannot open in.pcap") == 1, err
    assert (came, gone) == (0, 0)
    a = s["accounting"]
    assert (a["read"], a["forwarded"], a["unaccounted"], a["dropped"]) == (0, 0, 0, []), a
    assert s["sinks"]["tx"]["packets"] == 0, s["sinks"]
    assert srv.poll() is None
    rc, s, err = run(procs, [str(EXAMPLE), "--input", str(tmp_path / "in.pcap"), "--output",
                             str(tmp_path / "again.pcap"), *remote_a])
    assert rc == 0 and s["ok"], err
    assert s["sinks"]["tx"]["packets"] == 1095, s["sinks"]


def test_a_device_process_that_fails_at_start_while_the_host_sends_to_it_is_accounted(
        tmp_path: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's tap (tests/programs/probe_tap.py): the host's wire sends frames through
    the device's `stamp` while the device's own source `probe` cannot open the relative
    `--input` on its side, so its process exits with status 1. One error says so; every
    frame the host read never left its broken ring or went to the device and is a drop
    there with its reason; nothing is unaccounted; the server serves the next run."""
    secret = secret_file(tmp_path)
    srv, port = serve(procs, secret)
    shutil.copy(TLS, tmp_path / "in.pcap")
    prog = on_remote("probe_tap", tmp_path)
    monkeypatch.chdir(tmp_path)
    remote_a = ["--remote", f"a=127.0.0.1:{port}", "--secret-file", str(secret)]
    rc, s, err = run(procs, [str(prog), "--input", "in.pcap", "--loops", "100", "--output",
                             str(tmp_path / "out.pcap"), *remote_a])
    assert rc == 1 and not s["ok"], err
    why, came, gone = one_error_of(s, port)
    assert why == ("its process exited there with status 1: source probe: cannot open "
                   "in.pcap: No such file or directory"), why
    a = s["accounting"]
    assert came == 0 and a["unaccounted"] == 0 and a["forwarded"] == 0, (a, s["links"])
    assert a["read"] > 0 and "from_devices" not in a, a
    at = {(d["at"], d["reason"]): d["packets"] for d in a["dropped"]}
    # each frame once: a drop at the link with its reason (what went; and what was
    # published for the device and never went, when the host's core broke its ring
    # first) or, when the stand-in broke it first, its producer's (never left the
    # ring: ring_broken)
    at_link = sum(at.get(("remote:a", reason), 0) for reason in (
        "link_aborted_to_device", "ring_broken_on_device", "in_device_when_link_ended"))
    assert gone <= at_link, (gone, at)
    assert a["read"] == at_link + at.get(("entry->tap", "ring_broken"), 0), (a, at)
    assert srv.poll() is None
    rc, s, err = run(procs, [str(prog), "--input", str(tmp_path / "in.pcap"), "--loops", "2",
                             "--output", str(tmp_path / "again.pcap"), *remote_a])
    assert rc == 0 and s["ok"], err
    assert {k: v["packets"] for k, v in s["sinks"].items()} == {"out": 2190, "seen": 2190}
