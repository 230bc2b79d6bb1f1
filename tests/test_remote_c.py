"""runtime/lib/remote's C tests over UCX (runtime/lib/remote/tests/test_remote.c): in one
process on 127.0.0.1, plain and under ASan+UBSan (the handshake proof, a wrong secret
refused with nothing delivered, rings carried both ways in order under backpressure, a
bad message refused, a dropped or silent peer noticed); and as two processes in two
network namespaces joined by a veth pair the test makes and removes, UCX over TCP
between them (a ring carried across, a wrong secret refused, a killed device noticed)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from offlow import cbuild
from tests.ctools import C_TESTS, assert_passed, build_c, lib_test, run_c

SECRET = b"a shared secret of the test, 40 bytes.."


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_remote_c(sanitize: bool) -> None:
    exe = build_c([lib_test("remote", "test_remote")], "test_remote", ["remote"], sanitize)
    res = run_c(exe, timeout=300)
    assert_passed(res)


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_remote_chan_c(sanitize: bool) -> None:
    """The relay's channels without a link (tests/c/test_remote_chan.c): handed on in
    order; once the local end closed, nothing more is handed to it, each counted once."""
    tools = cbuild.RUNTIME / "tools"
    exe = build_c([C_TESTS / "test_remote_chan.c", tools / "remote_chan.c"],
                  "test_remote_chan", ["remote"], sanitize, includes=[tools])
    res = run_c(exe, timeout=120)
    assert_passed(res)
    assert "closed end: nothing more handed on, the three counted once" in res.stdout


def _start(procs: list[subprocess.Popen[str]], ns: str, exe: Path,
           *args: str) -> subprocess.Popen[str]:
    # UCX over TCP only: across namespaces of one machine it would otherwise take
    # shared memory, and the test is about the network path
    env = dict(os.environ, UCX_TLS="tcp", ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.Popen(["ip", "netns", "exec", ns, str(exe), *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(p)
    return p


def _serve(procs: list[subprocess.Popen[str]], ns: str, exe: Path,
           secret: Path) -> tuple[subprocess.Popen[str], str]:
    srv = _start(procs, ns, exe, "serve", "10.231.0.1", str(secret), "0")
    assert srv.stdout is not None
    line = srv.stdout.readline()
    assert line.startswith("port "), line + srv.stderr.read() if srv.stderr else ""
    return srv, line.split()[1]


@pytest.fixture
def exe() -> Path:
    return build_c([lib_test("remote", "test_remote")], "test_remote", ["remote"], False)


def _secret(tmp_path: Path, name: str, value: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(value)
    p.chmod(0o600)
    return p


def test_a_ring_crosses_two_namespaces_over_ucx_tcp(
        two_hosts: tuple[str, str], exe: Path, tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    a, b = two_hosts
    secret = _secret(tmp_path, "secret", SECRET)
    srv, port = _serve(procs, a, exe, secret)
    cli = _start(procs, b, exe, "client", "10.231.0.1", port, str(secret), "100000")
    c_out, c_err = cli.communicate(timeout=120)
    s_out, s_err = srv.communicate(timeout=120)
    assert cli.returncode == 0 and "sent 100000" in c_out, c_out + c_err
    assert srv.returncode == 0 and "got 100000" in s_out, s_out + s_err


def test_a_wrong_secret_is_refused_across_namespaces(
        two_hosts: tuple[str, str], exe: Path, tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    a, b = two_hosts
    srv, port = _serve(procs, a, exe, _secret(tmp_path, "secret", SECRET))
    wrong = _secret(tmp_path, "wrong", SECRET.replace(b"test", b"best"))
    cli = _start(procs, b, exe, "client", "10.231.0.1", port, str(wrong), "10")
    c_out, c_err = cli.communicate(timeout=120)
    srv.send_signal(signal.SIGKILL)
    s_out, s_err = srv.communicate(timeout=120)
    assert cli.returncode == 3 and "refused" in c_out and "up" not in c_out.split(), c_out
    assert "refused a peer: wrong proof of the shared secret" in s_err, s_err
    assert "got" not in s_out, s_out


def test_a_killed_device_ends_the_peer_with_what_it_sent(
        two_hosts: tuple[str, str], exe: Path, tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    a, b = two_hosts
    secret = _secret(tmp_path, "secret", SECRET)
    srv, port = _serve(procs, a, exe, secret)
    cli = _start(procs, b, exe, "client", "10.231.0.1", port, str(secret), "0")  # forever
    assert cli.stdout is not None
    assert cli.stdout.readline().strip() == "up"
    srv.send_signal(signal.SIGKILL)
    srv.communicate(timeout=120)
    c_out, c_err = cli.communicate(timeout=120)  # generous: it ends, no timing asserted
    assert cli.returncode == 3, c_out + c_err
    assert ("lost" in c_out or "stopped answering" in c_out) and "entries sent" in c_out, c_out
