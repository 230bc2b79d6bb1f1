"""UDP socket ports: a program serves real clients on 127.0.0.1.  The runner binds one
socket and hands it to every device process; sources turn datagrams into
Ethernet/IPv4/UDP frames, sinks send each frame's payload to its destination.  The
echo program (tests/programs/udp_echo.py) swaps addresses and ports, so every
datagram comes back; oversize datagrams and malformed replies are counted drops;
a stopped run exits cleanly with its stats.  The C side (frames, source, sink, stop
signals) has its own program, tests/c/test_udp.c."""

from __future__ import annotations

import signal
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from offlow import cbuild
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.report import format_summary, summarize
from offlow.runner import Run, RunOptions, run
from tests.ctools import C_TESTS, assert_passed, build_c, run_c
from tests.e2e import EXAMPLE

HERE = Path(__file__).resolve().parent
ECHO = HERE / "programs" / "udp_echo.py"
MAX_PAYLOAD = 256 - 42  # the echo program's mtu less the headers the source adds
SANITIZE = cbuild.flags("sanitize")


def client() -> socket.socket:
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    c.bind(("127.0.0.1", 0))
    c.settimeout(20)
    return c


def echo(c: socket.socket, port: int, payloads: list[bytes], burst: int = 32) -> list[bytes]:
    """Send `payloads` in bursts, each burst's echoes received before the next; every
    echo must come from the server's port."""
    got: list[bytes] = []
    for i in range(0, len(payloads), burst):
        part = payloads[i:i + burst]
        for p in part:
            c.sendto(p, ("127.0.0.1", port))
        for _ in part:
            data, addr = c.recvfrom(65536)
            assert addr == ("127.0.0.1", port)
            got.append(data)
    return got


def payloads(n: int) -> list[bytes]:
    """`n` payloads of many sizes, from empty to the largest that fits, most of them
    distinct (numbered)."""
    sizes = (0, 1, 7, 64, 150, MAX_PAYLOAD)
    return [(b"%d:" % i + bytes(range(256)))[:sizes[i % len(sizes)]] for i in range(n)]


def serve(run_: Run, exchange: Any, sig: int = signal.SIGTERM) -> dict[str, Any]:
    """Start the run, talk to it with `exchange(client, port)`, stop it; the summary."""
    run_.start()
    try:
        assert run_.udp_port
        with client() as c:
            exchange(c, run_.udp_port)
    finally:
        run_.stop(sig)
        res = run_.wait()
    assert res.ok, res.errors
    assert set(res.stats) == {"host", "nic"}  # both wrote their stats after the signal
    return summarize(run_.build.plan, res.stats)


def exchange_with_drops(c: socket.socket, port: int) -> None:
    """Echoes of every size, then datagrams that must not come back, then one that must
    (it follows the others through the same socket, core and ring, so once it is
    back they have all been through)."""
    want = payloads(60)
    assert Counter(echo(c, port, want)) == Counter(want)
    for p in (b"x" * (MAX_PAYLOAD + 1), b"y" * 1000, b"bad-eth: reply not IPv4",
              b"bad-len: reply with a bad UDP length"):
        c.sendto(p, ("127.0.0.1", port))
    assert echo(c, port, [b"sync"]) == [b"sync"]


def check_drop_counts(s: dict[str, Any]) -> None:
    src, sink = s["sources"]["rx"], s["sinks"]["tx"]
    assert src["packets"] == 60 + 2 + 1 and src["dropped"] == 2  # the two oversize ones
    assert sink["packets"] == 63
    assert (sink["sent"], sink["dropped"], sink["send_errors"]) == (61, 2, 0)


@pytest.fixture(scope="module")
def echo_build() -> Any:
    return build(load_program(ECHO), werror=True)


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_frames_source_sink_and_stop_signals_in_c(sanitize: bool) -> None:
    exe = build_c([C_TESTS / "test_udp.c"], "test_udp", sanitize=sanitize)
    res = run_c(exe, timeout=60)
    assert_passed(res)


def test_echo_server_answers_clients_and_stops_cleanly(echo_build: Any) -> None:
    s = serve(Run(echo_build, RunOptions(udp_port=0, timeout=60)), exchange_with_drops)
    check_drop_counts(s)
    assert s["elements"]["ip4"]["drop"] == 0  # CheckIPv4 accepts the synthesized headers


def test_two_cores_share_the_socket(echo_build: Any) -> None:
    b = build(load_program(ECHO, ["rx.cores=0,1", "app.cores=0,1"]), werror=True)
    want = payloads(300)

    def exchange(c: socket.socket, port: int) -> None:
        assert Counter(echo(c, port, want, burst=50)) == Counter(want)

    s = serve(Run(b, RunOptions(udp_port=0, timeout=60)), exchange, sig=signal.SIGINT)
    assert s["sources"]["rx"]["packets"] == 300
    assert s["sinks"]["tx"]["sent"] == 300


def test_a_udp_run_ends_after_its_duration(echo_build: Any) -> None:
    r = Run(echo_build, RunOptions(udp_port=0, duration=0.5, timeout=60))
    r.start()
    try:
        assert r.udp_port
        with client() as c:
            assert echo(c, r.udp_port, [b"before the end"]) == [b"before the end"]
    finally:
        res = r.wait()  # no stop: the sources end after half a second
    assert res.ok, res.errors
    assert summarize(echo_build.plan, res.stats)["sinks"]["tx"]["sent"] == 1


def test_a_forwarding_program_never_loops_a_datagram_into_its_own_socket() -> None:
    """The TTL pipeline forwards each frame to its destination, which under --udp is
    the server's own socket: the sink must refuse it (counted, with its reason), or
    the source reads it in again with fresh headers, for ever (921,587 packets from
    one datagram in 6 s), and every datagram anyone sends starts another loop."""
    b = build(load_program(EXAMPLE), werror=True)
    r = Run(b, RunOptions(udp_port=0, duration=1.5, timeout=60))
    r.start()
    try:
        assert r.udp_port
        with client() as c:
            c.sendto(b"once", ("127.0.0.1", r.udp_port))
    finally:
        res = r.wait()
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    assert s["sources"]["rx"]["packets"] == 1
    assert s["sinks"]["tx"]["to_self"] == 1 and s["sinks"]["tx"]["sent"] == 0
    assert "1 refused (addressed to the server's own socket: a loop)" in format_summary(s)
    # the run's accounting says where the packet went: dropped at the sink, not forwarded
    a = s["accounting"]
    assert (a["read"], a["forwarded"], a["unaccounted"]) == (1, 0, 0)
    assert [(d["at"], d["reason"], d["packets"]) for d in a["dropped"]] == [("tx", "to_self", 1)]


def test_udp_run_option_errors(echo_build: Any, tmp_path: Path) -> None:
    with pytest.raises(OfflowError, match="takes no input or output capture"):
        run(echo_build, RunOptions(udp_port=0, output=tmp_path / "out.pcap"))
    with pytest.raises(OfflowError, match="not within 0..65535"):
        run(echo_build, RunOptions(udp_port=70000))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        with pytest.raises(OfflowError, match="cannot bind UDP port"):
            run(echo_build, RunOptions(udp_port=taken.getsockname()[1]))


def test_echo_is_clean_under_asan_and_ubsan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runtime and generated code with sanitizers: datagrams of every size, oversize
    ones, malformed replies and the stop; any bad access or leak fails a process."""
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    monkeypatch.setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    b = build(load_program(ECHO), werror=True, extra_flags=SANITIZE)
    check_drop_counts(serve(Run(b, RunOptions(udp_port=0, timeout=120)), exchange_with_drops))
