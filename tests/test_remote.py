"""The remote target end to end (docs/remote.md): `offlow serve-device` on one side,
`offlow run --remote NAME=ADDR:PORT` on the other, over 127.0.0.1 and across two
network namespaces joined by a veth pair (UCX over TCP): the same output capture and
counters as with the segment on nic; a wrong secret, a secret on the command line, a
killed device each one clear error."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from offlow.errors import OfflowError
from offlow.paths import DATA
from offlow.remote import ON_COMMAND_LINE
from offlow.targets import remote
from tests.e2e import EXAMPLE, ROOT, TLS, read_frames
from tests.netns import ADDR_B
from tests.remote_served import TCP, Servers

BGP = DATA / "bgp-full-table.txt.gz"
SECRET = b"the remote tests' shared secret, 44 bytes.."
CLI = [sys.executable, "-m", "offlow.cli"]

pytestmark = pytest.mark.skipif(remote.TARGET.unusable() is not None,
                                reason=f"remote: {remote.TARGET.unusable()}")


def secret_file(folder: Path, value: bytes = SECRET, name: str = "secret") -> Path:
    p = folder / name
    p.write_bytes(value)
    p.chmod(0o600)
    return p


def start(procs: list[subprocess.Popen[str]], args: list[str], ns: str = "",
          env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`offlow ARGS`, in namespace `ns` when given, UCX over TCP."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + CLI + args
    p = subprocess.Popen(cmd, env={**os.environ, **TCP, **(env or {})}, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    procs.append(p)
    return p


def serve(procs: list[subprocess.Popen[str]], secret: Path, addr: str = "127.0.0.1",
          ns: str = "", *more: str) -> tuple[subprocess.Popen[str], int]:
    """A serve-device listening on a free port of `addr` (with options `more`): it and
    the port."""
    return serve_env(procs, secret, {}, addr, ns, *more)


def serve_env(procs: list[subprocess.Popen[str]], secret: Path, env: dict[str, str],
              addr: str = "127.0.0.1", ns: str = "",
              *more: str) -> tuple[subprocess.Popen[str], int]:
    """serve() with `env` added to its environment."""
    srv = start(procs, ["serve-device", "--listen", f"{addr}:0", "--secret-file", str(secret),
                        *more], ns, env)
    assert srv.stderr is not None
    seen = ""
    for line in srv.stderr:
        seen += line
        if "listening on" in line:
            return srv, int(line.rsplit(":", 1)[1])
    raise AssertionError(f"serve-device did not listen:\n{seen}")


def run(procs: list[subprocess.Popen[str]], args: list[str], ns: str = "",
        env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    """`offlow run ARGS --json`: its status, summary and stderr."""
    p = start(procs, ["run", *args, "--json", "--timeout", "120"], ns, env)
    out, err = p.communicate(timeout=300)
    try:
        summary = json.loads(out)
    except json.JSONDecodeError:
        raise AssertionError(f"no summary (status {p.returncode}):\n{out}\n{err}") from None
    return p.returncode, summary, err


def counts(s: dict[str, Any]) -> dict[str, Any]:
    """What a run counted, without where it ran or how fast."""
    seg = {x["segment"]: (x["packets"], x["bytes"], x["drops"], x["drops_by_element"])
           for x in s["segments"]}
    queues = {q["queue"]: (q["packets"], q["dropped"], q["delivered"], q["bytes"],
                           q["packets_by_instance"]) for q in s["queues"]}
    return {"segments": seg, "queues": queues, "elements": s["elements"],
            "tables": s.get("tables"),
            "sinks": {k: (v["packets"], v["bytes"]) for k, v in s["sinks"].items()}}


def ttl_pipeline(out: Path, *more: str) -> list[str]:
    return [str(EXAMPLE), "--input", str(TLS), "--output", str(out), *more]


@pytest.fixture(scope="module")
def ttl_on_nic(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[bytes]]:
    """The TTL pipeline with its nic part on nic, run once for the module's comparisons:
    what it counted and the frames it sent."""
    out = tmp_path_factory.mktemp("ttl_on_nic") / "nic.pcap"
    procs: list[subprocess.Popen[str]] = []
    try:
        rc, nic, err = run(procs, ttl_pipeline(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert rc == 0 and nic["ok"], err
    return counts(nic), read_frames(out)


def test_ttl_pipeline_with_its_nic_part_remote_is_the_same_as_on_nic(
        tmp_path: Path, procs: list[subprocess.Popen[str]], served: Servers,
        ttl_on_nic: tuple[dict[str, Any], list[bytes]]) -> None:
    secret, (port,) = served.secret, served.ports(1)
    nic_counts, nic_frames = ttl_on_nic
    rc, rem, err = run(procs, ttl_pipeline(tmp_path / "remote.pcap", "--set",
                                           "rx.device=remote:dev1", "--remote",
                                           f"dev1=127.0.0.1:{port}", "--secret-file",
                                           str(secret)))
    assert rc == 0 and rem["ok"], err
    assert [x["device"] for x in rem["segments"]] == ["remote:dev1", "host"]
    jsonschema.validate(rem, json.loads((ROOT / "docs" / "run-result.schema.json").read_text()))
    assert counts(rem) == nic_counts
    frames = read_frames(tmp_path / "remote.pcap")
    assert len(frames) == 1095 and frames == nic_frames


def test_ttl_pipeline_across_two_namespaces(
        two_hosts: tuple[str, str], tmp_path: Path, procs: list[subprocess.Popen[str]],
        ttl_on_nic: tuple[dict[str, Any], list[bytes]]) -> None:
    host, device = two_hosts
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret, ADDR_B, device)
    nic_counts, nic_frames = ttl_on_nic
    rc, rem, err = run(procs, ttl_pipeline(tmp_path / "remote.pcap", "--set",
                                           "rx.device=remote:b", "--remote",
                                           f"b={ADDR_B}:{port}", "--secret-file",
                                           str(secret)), host)
    assert rc == 0 and rem["ok"], err
    assert counts(rem) == nic_counts
    assert read_frames(tmp_path / "remote.pcap") == nic_frames


def test_targets_lists_remote_and_says_why_it_cannot_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from offlow import targets

    row = next(r for r in targets.listing() if r["name"] == "remote")
    assert row["usable"] and "serve-device" in str(row["runs"])
    monkeypatch.setattr(remote, "UCX_HEADER", tmp_path / "ucp.h")
    row = next(r for r in targets.listing() if r["name"] == "remote")
    assert not row["usable"] and "missing package `libucx-dev`" in str(row["why_not"])


@pytest.mark.parametrize("cmd", [["run", str(EXAMPLE), "--remote", "a=127.0.0.1:1"],
                                 ["serve-device"]], ids=["run", "serve-device"])
def test_a_secret_on_the_command_line_is_refused(cmd: list[str]) -> None:
    p = subprocess.run([*CLI, *cmd, "--secret", "sixteen or more bytes"], text=True,
                       capture_output=True, timeout=120)
    assert p.returncode != 0 and p.stderr.strip().splitlines() == [
        f"offlow: error: --secret: {ON_COMMAND_LINE}"], p.stderr


def test_serve_device_listens_on_every_interface_only_when_asked(tmp_path: Path) -> None:
    from offlow.remote import serve_device

    with pytest.raises(OfflowError, match=r"every interface; say so with --all-interfaces"):
        serve_device("0.0.0.0:7000", secret_file(tmp_path), False)


def test_a_secret_file_others_can_read_is_refused(tmp_path: Path) -> None:
    from offlow.remote import load_secret

    f = secret_file(tmp_path)
    f.chmod(0o644)
    with pytest.raises(OfflowError, match=r"readable by others \(mode 0644\); chmod 600 it"):
        load_secret(f)
    f.chmod(0o600)
    f.write_bytes(b"short\n")
    with pytest.raises(OfflowError, match=r"must be 16\.\.4096 bytes without NUL \(it has 5\)"):
        load_secret(f)


@pytest.mark.parametrize(("remotes", "message"), [
    ((), r"device `remote:a`: no address; give --remote a=ADDR:PORT"),
    (("a=127.0.0.1:7000", "b=127.0.0.1:7001"),
     r"--remote b=\.\.\.: the program places no segment on `remote:b`"),
    (("a=localhost:7000",), r"--remote `localhost:7000`: expected ADDR:PORT"),
], ids=["missing", "unused", "not-an-address"])
def test_remote_addresses_are_checked_before_anything_starts(
        tmp_path: Path, remotes: tuple[str, ...], message: str) -> None:
    from offlow.dsl.loader import load_program
    from offlow.runner import Run, RunOptions, build_for

    o = RunOptions(input=TLS, remotes=remotes, secret_file=secret_file(tmp_path))
    with pytest.raises(OfflowError, match=message):
        Run(build_for(load_program(EXAMPLE, ["rx.device=remote:a"]), o), o)


PROGRAMS = Path(__file__).resolve().parent / "programs"


def on_remote(program: str, folder: Path, name: str = "a") -> Path:
    """tests/programs/PROGRAM with its device moved to `remote:NAME`, as a user does."""
    mine = folder / f"{program}_remote.py"
    mine.write_text((PROGRAMS / f"{program}.py").read_text().replace('device="nic"',
                                                                     f'device="remote:{name}"'))
    return mine


def talk(procs: list[subprocess.Popen[str]], kind: str, program: Path, *remote: str,
         ns: str = "") -> dict[str, Any]:
    """tests/chan_talk.py (a host program) against `program`: what it got."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [sys.executable, "-m",
                                                         "tests.chan_talk", kind, str(program),
                                                         *remote]
    p = subprocess.Popen(cmd, env={**os.environ, **TCP}, text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=PROGRAMS.parent.parent)
    procs.append(p)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, f"{' '.join(cmd)}\n{out}\n{err}"   # (which half failed)
    got: dict[str, Any] = json.loads(out)
    assert got["ok"], err
    return got


@pytest.fixture(scope="module")
def talk_on_nic() -> Iterator[Callable[[str], dict[str, Any]]]:
    """tests/chan_talk.py against tests/programs/KIND.py on nic, as `talk`: each kind
    talked to once for the module's comparisons."""
    procs: list[subprocess.Popen[str]] = []
    got: dict[str, dict[str, Any]] = {}

    def on_nic(kind: str) -> dict[str, Any]:
        if kind not in got:
            got[kind] = talk(procs, kind, PROGRAMS / f"{kind}.py")
        return got[kind]

    yield on_nic
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("kind", ["echo", "ledger"])
def test_a_channel_to_a_remote_device_answers_as_on_nic(
        kind: str, tmp_path: Path, procs: list[subprocess.Popen[str]], served: Servers,
        talk_on_nic: Callable[[str], dict[str, Any]]) -> None:
    """Direct messages of every size (0..56 bytes, odd ones), the oversize message's and
    a timed-out receive's errors, answers in bulk (300,000 and 131,071 bytes) between
    direct messages, a bulk receive of another size: the same with the handler on
    `remote:a` as on `nic`, and the handler's tables end the same."""
    secret, (port,) = served.secret, served.ports(1)
    nic = talk_on_nic(kind)
    rem = talk(procs, kind, on_remote(kind, tmp_path), f"a=127.0.0.1:{port}", str(secret))
    assert rem["got"] == nic["got"] and rem["tables"] == nic["tables"]
    if kind == "echo":
        assert nic["got"]["oversize"] == "ChannelError EMSGSIZE"
        assert nic["got"]["timeout"] == "ChannelTimeout"
        assert all(b[2] for b in nic["got"]["bulk"] if isinstance(b, list))


def test_more_channels_than_the_link_carries_are_refused_before_anything_starts(
        tmp_path: Path) -> None:
    from offlow.build import plan_program
    from offlow.dsl.loader import load_program

    mine = tmp_path / "many.py"
    mine.write_text(
        "from offlow import Handler, Program, Sink, Source\n"
        "class H(Handler):\n    body = 'REPLY(msg, len);'\n"
        "def program():\n    p = Program('many')\n    s, o = Source('rx'), Sink('tx')\n"
        "    s >> o\n    p.segment('rx', [s, o], device='remote:a')\n"
        "    for i in range(65):\n"
        "        p.channel(f'c{i}', H(f'h{i}'), device='remote:a')\n    return p\n")
    with pytest.raises(OfflowError, match="a remote device carries at most 64 channels across "
                                          "the link; `remote:a` has 65"):
        plan_program(load_program(mine))


def test_a_channel_across_two_namespaces(
        two_hosts: tuple[str, str], tmp_path: Path, procs: list[subprocess.Popen[str]],
        talk_on_nic: Callable[[str], dict[str, Any]]) -> None:
    host, device = two_hosts
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret, ADDR_B, device)
    nic = talk_on_nic("echo")
    rem = talk(procs, "echo", on_remote("echo", tmp_path, "b"), f"b={ADDR_B}:{port}",
               str(secret), ns=host)
    assert rem["got"] == nic["got"] and rem["tables"] == nic["tables"]


def remote_session(program: Path, port: int, secret: Path) -> Any:
    from offlow.dsl.loader import load_program
    from offlow.runner import RunOptions
    from offlow.session import session
    return session(load_program(program), RunOptions(count=10, remotes=(f"a=127.0.0.1:{port}",),
                                                     secret_file=secret))


def test_a_bulk_transfer_corrupted_on_the_link_is_detected_at_the_far_end(
        tmp_path: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The device's server flips a byte of its next bulk message after its CRC32C (the
    test hook OFFLOW_REMOTE_TEST_CORRUPT): the host's end finds the CRC wrong, hands
    nothing on, and the run's one error says so, naming the device and the channel."""
    from offlow.channels import ChannelError
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret = secret_file(tmp_path)
    _, port = serve_env(procs, secret, {"OFFLOW_REMOTE_TEST_CORRUPT": "12345"})
    with pytest.raises(OfflowError) as e:
        with remote_session(on_remote("echo", tmp_path), port, secret) as s:
            ch = s.channel("echo")
            assert ch.request(b"ab", timeout=60) == b"ba"   # (the device may start slowly)
            ch.send(b"bulk\x05", timeout=60)
            with pytest.raises(ChannelError):   # EPIPE: the stand-in ended
                ch.bulk_recv(300_000, timeout=20)
    assert re.search(r"remote device remote:a \(127\.0\.0\.1:\d+\): channel `echo`: a bulk "
                     r"transfer of 300000 bytes arrived corrupted \(CRC32C [0-9a-f]{8}, the "
                     r"sender's [0-9a-f]{8}\): not handed on", str(e.value)), str(e.value)


def test_a_device_that_dies_mid_request_ends_the_run_with_one_error(
        tmp_path: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The host waits for an answer when the device's serve-device is killed: the wait
    ends (EPIPE, not the 60 s timeout) and the run's one error names the device."""
    from offlow.channels import ChannelError
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret = secret_file(tmp_path)
    srv, port = serve(procs, secret)
    with pytest.raises(OfflowError) as e:
        with remote_session(on_remote("echo", tmp_path), port, secret) as s:
            ch = s.channel("echo")
            assert ch.request(b"ab", timeout=60) == b"ba"   # (the device may start slowly)
            ch.send(b"quiet", timeout=60)   # never answered
            srv.kill()
            t0 = time.monotonic()
            with pytest.raises(ChannelError) as err:
                ch.recv(timeout=60)
            assert err.value.errno == errno.EPIPE and time.monotonic() - t0 < 30
    assert re.fullmatch(r"the program failed: remote device remote:a \(127\.0\.0\.1:\d+\): "
                        r"(the connection to the peer was lost|the peer stopped answering) "
                        r"\(.*\); \d+ ring entries \(packets\) had come from it and \d+ gone "
                        r"to it", str(e.value)), str(e.value)


def test_a_message_the_far_end_cannot_take_is_the_runs_one_error_not_a_silent_loss(
        tmp_path: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The device's server cannot hand its second direct message on to the device's end
    (the test hook OFFLOW_REMOTE_TEST_POST_FAIL: as if its end had closed): the message
    is counted as dropped and the run's one error says so, naming the channel; the host's
    receive ends (EPIPE) instead of waiting out its timeout for an answer that cannot come
    (the relay dropped such a message without a word)."""
    from offlow.channels import ChannelError
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret = secret_file(tmp_path)
    _, port = serve_env(procs, secret, {"OFFLOW_REMOTE_TEST_POST_FAIL": "2"})
    with pytest.raises(OfflowError) as e:
        with remote_session(on_remote("echo", tmp_path), port, secret) as s:
            ch = s.channel("echo")
            assert ch.request(b"ab", timeout=60) == b"ba"   # (the device may start slowly)
            ch.send(b"xyz", timeout=60)   # taken by the host's stand-in
            t0 = time.monotonic()
            with pytest.raises(ChannelError) as err:
                ch.recv(timeout=60)
            assert err.value.errno == errno.EPIPE and time.monotonic() - t0 < 30
    assert re.fullmatch(r"the program failed: remote device remote:a \(127\.0\.0\.1:\d+\): "
                        r"channel `echo`: a direct message of 3 bytes could not be handed on "
                        r"\(Broken pipe\): dropped", str(e.value)), str(e.value)


def test_channel_messages_still_queued_at_the_stop_are_counted_in_the_report(
        tmp_path: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The device's server holds every direct message from the host (the test hook
    OFFLOW_REMOTE_TEST_HOLD: as if the device's end never took them); when the session
    stops, the three it holds are counted in the run's report (`links`), not freed
    without a word, and the device's handler saw none; nothing else is counted."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret = secret_file(tmp_path)
    _, port = serve_env(procs, secret, {"OFFLOW_REMOTE_TEST_HOLD": "1"})
    with remote_session(on_remote("echo", tmp_path), port, secret) as s:
        ch = s.channel("echo")
        for msg in (b"one", b"two", b"three"):
            ch.send(msg, timeout=60)   # taken by the host's stand-in, held on the device
    assert s.result is not None and s.result.ok, s.result
    assert s.result.stats["remote:a"]["tables"]["seen"] == [0]
    assert s.result.stats["remote:a"]["link"] == {
        "entries_to_device": 0, "entries_from_device": 0, "chan_to_device": 3,
        "chan_from_device": 0, "lost_sends": 0, "dropped_in_device": 0, "dropped_in_host": 0,
        "in_device_uncounted": 0, "from_device_uncounted": 0}


def test_answers_the_host_never_took_are_counted_in_the_report(
        tmp_path: Path, served: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host sends three requests and takes none of their answers, then stops: each
    request is either answered by the device's handler or counted as not delivered to
    the device, and each answer is counted as not delivered to the host: the first,
    handed to the host's end, is withdrawn when it closes (it was freed without a word),
    the others are still queued in the stand-in. The device's end takes a request only
    once its answer to the last was taken (its handler's reply had failed, closing the
    channel: the answer and the request after it lost, none counted)."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret, (port,) = served.secret, served.ports(1)
    with remote_session(on_remote("echo", tmp_path), port, secret) as s:
        ch = s.channel("echo")
        assert ch.request(b"ab", timeout=60) == b"ba"   # (the device may start slowly)
        for msg in (b"one", b"two", b"three"):
            ch.send(msg, timeout=60)   # taken by the host's stand-in
        time.sleep(1)   # (lets the answers come back: the counts add up either way)
    assert s.result is not None and s.result.ok, s.result
    seen = s.result.stats["remote:a"]["tables"]["seen"][0] - 1
    link = s.result.stats["remote:a"]["link"]
    assert (link["chan_from_device"], link["chan_to_device"]) == (seen, 3 - seen), (seen, link)
    assert link["entries_to_device"] == link["entries_from_device"] == link["lost_sends"] == 0


def test_an_answer_the_devices_server_never_took_is_counted_in_the_report(
        tmp_path: Path, procs: list[subprocess.Popen[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The device's server takes nothing the device's end sends (the test hook
    OFFLOW_REMOTE_TEST_HOLD_UP: as if its manager were too slow to take the answer
    before the device's process stops), and the host sends two requests: the device's
    end takes the second only once its answer to the first was taken, so it is never
    taken, and is counted (`chan_to_device`); the handler's answer is withdrawn when the
    device's process stops, counted there, and the report has it (`chan_from_device`).
    Both were lost without a word: the device's end took the second request, the
    handler's answer to it failed (ENOBUFS) and closed the channel."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret = secret_file(tmp_path)
    _, port = serve_env(procs, secret, {"OFFLOW_REMOTE_TEST_HOLD_UP": "1"})
    with remote_session(on_remote("echo", tmp_path), port, secret) as s:
        for msg in (b"ab", b"cd"):
            s.channel("echo").send(msg, timeout=60)   # (the device may start slowly)
        time.sleep(1)   # (lets the handler answer: the counts add up either way)
    assert s.result is not None and s.result.ok, s.result
    seen = s.result.stats["remote:a"]["tables"]["seen"][0]
    link = s.result.stats["remote:a"]["link"]
    assert (link["chan_from_device"], link["chan_to_device"]) == (seen, 2 - seen), (seen, link)


def test_a_message_the_link_could_not_deliver_ends_the_run_with_one_error(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """UCX completes the host's third message to the device with an error (the test hook
    OFFLOW_REMOTE_TEST_SEND_FAIL in the stand-in's environment): the link fails, the run's
    one error names the device and says a message was lost, and the report counts it
    (it was only counted in the link, and the run went on with a hole in the device's
    stream)."""
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret)
    rc, s, err = run(procs, ttl_pipeline(tmp_path / "out.pcap", "--set", "rx.device=remote:a",
                                         "--remote", f"a=127.0.0.1:{port}", "--secret-file",
                                         str(secret)),
                     env={"OFFLOW_REMOTE_TEST_SEND_FAIL": "3"})
    assert rc == 1 and len(s["errors"]) == 1, err
    assert re.fullmatch(rf"remote device remote:a \(127\.0\.0\.1:{port}\): a message to the "
                        r"peer was lost \(.+\); \d+ ring entries \(packets\) had come from it "
                        r"and 0 gone to it", s["errors"][0]), s["errors"]
    assert s["links"]["remote:a"]["lost_sends"] == 1, s.get("links")
    jsonschema.validate(s, json.loads((ROOT / "docs" / "run-result.schema.json").read_text()))


def test_entries_for_a_ring_the_devices_failed_core_broke_are_counted_in_the_report(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """A user's gate on the remote device FAILs on its 500th frame while the host keeps
    sending (100,000 frames): its core breaks the ring it takes from, and the entries
    that come for it after that are not taken there but counted (the device's
    dropped_in and what it had committed): the report's `links` says them, within what
    the device never took, and the accounting says them apart from the rest. Every
    frame is counted once on every run (5 runs: how many the host's log takes before
    the abort reaches it, and how many come to the device after the break, depend on
    the link's timing): each link count is what the queues' own producers and
    consumers say was not taken, and nothing is unaccounted (it was -32 to -416 in 2
    or 3 of 5 runs: a frame the host's log or the device's gate took after the last
    credit was counted as taken and as not taken; +32 once under CI's load: a batch the
    host's entry core committed after the host's end had read the ring's tail)."""
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret)
    prog = on_remote("toll_gate", tmp_path)
    schema = json.loads((ROOT / "docs" / "run-result.schema.json").read_text())
    seen = []
    for _ in range(5):
        rc, s, err = run(procs, [str(prog), "--count", "100000", "--remote",
                                 f"a=127.0.0.1:{port}", "--secret-file", str(secret)])
        assert rc == 1 and s["errors"] == [
            "remote:a: segment gate core 0: element toll_gate: no ticket for frame 500: "
            "failed by the element"], err
        jsonschema.validate(s, schema)
        link, a = s["links"]["remote:a"], s["accounting"]
        assert a["unaccounted"] == 0, (a, link)
        q = {x["queue"]: x for x in s["queues"]}
        to_dev, from_dev = q["entry->gate"], q["gate->exit"]
        # The host's end breaks the ring it sends from before it counts: what it sent and
        # the device never took is the link's, what never left the host ring (committed
        # or still staged in the entry core: one batch at most) its producer's.
        staged = (link["entries_to_device"] + to_dev["dropped_why"].get("ring_broken", 0)
                  - (to_dev["packets"] - to_dev["delivered"]))
        assert 0 <= staged <= 32, (link, q)
        assert link["entries_from_device"] == (from_dev["packets"] - from_dev["delivered"]), (
            link, q)
        assert 0 <= link["dropped_in_device"] <= link["entries_to_device"], link
        assert 0 <= link["dropped_in_host"] <= link["entries_from_device"], link
        at_link = {d["reason"]: d["packets"] for d in a["dropped"] if d["at"] == "remote:a"}
        assert at_link.get("ring_broken_on_device", 0) == link["dropped_in_device"], at_link
        assert (at_link.get("link_aborted_to_device", 0) ==
                link["entries_to_device"] - link["dropped_in_device"]), (at_link, link)
        assert (at_link.get("ring_broken_on_host", 0) ==
                link["dropped_in_host"]), (at_link, link)
        # the gate stops at its 500th frame: the frames its core held then never pass it
        assert s["sinks"]["log"]["packets"] <= 499, s["sinks"]["log"]
        seen.append((link["dropped_in_device"], s["sinks"]["log"]["packets"]))
    assert any(d for d, _ in seen), seen


def test_a_device_slow_to_start_is_not_taken_for_a_dead_one(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """The device's window takes 2 s to make (the test hook
    OFFLOW_REMOTE_TEST_SLOW_INIT_MS, as under load): longer than the link's 800 ms
    silence limit, yet the run goes on and gives the usual capture, since serve-device
    keeps the link beating while it waits (it waited blocked, silent, and the host took
    it for dead: `stopped answering` once under load 10). A silent device still ends
    the run: test_a_killed_or_silent_device_ends_the_run_with_one_error_and_the_counts_so_far."""
    secret = secret_file(tmp_path)
    _, port = serve_env(procs, secret, {"OFFLOW_REMOTE_TEST_SLOW_INIT_MS": "2000"})
    rc, s, err = run(procs, ttl_pipeline(tmp_path / "out.pcap", "--set", "rx.device=remote:a",
                                         "--remote", f"a=127.0.0.1:{port}", "--secret-file",
                                         str(secret)))
    assert rc == 0 and s["ok"], err
    assert len(read_frames(tmp_path / "out.pcap")) == 1095


def test_a_wrong_secret_ends_the_run_before_any_packet_moves(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    srv, port = serve(procs, secret_file(tmp_path))
    wrong = secret_file(tmp_path, SECRET.replace(b"tests", b"bests"), "wrong")
    rc, s, err = run(procs, ttl_pipeline(tmp_path / "out.pcap", "--set", "rx.device=remote:a",
                                         "--remote", f"a=127.0.0.1:{port}", "--secret-file",
                                         str(wrong)))
    assert rc == 1 and len(s["errors"]) == 1, err
    assert s["errors"][0].startswith(f"remote device remote:a (127.0.0.1:{port}): refused "
                                     "before any packet moved"), s["errors"]
    assert all(x["packets"] == 0 for x in s["segments"]) and s["sinks"]["tx"]["packets"] == 0
    srv.send_signal(signal.SIGTERM)
    _, serr = srv.communicate(timeout=60)
    assert "refused a peer: wrong proof of the shared secret" in serr, serr
    assert "a run starts" not in serr, serr


@pytest.mark.parametrize(("sig", "why"), [(signal.SIGKILL, "lost"),
                                          (signal.SIGSTOP, "stopped answering")],
                         ids=["killed", "silent"])
def test_a_killed_or_silent_device_ends_the_run_with_one_error_and_the_counts_so_far(
        tmp_path: Path, procs: list[subprocess.Popen[str]], sig: int, why: str) -> None:
    """A serve-device killed (its connection resets) or stopped (connected, silent:
    noticed after the link's silence limit) ends the run; the host's processes report
    what had come, and the run's one error says so; the accounting balances on what the
    host saw cross the link."""
    secret = secret_file(tmp_path)
    # its own work folder: a serve-device another test starts meanwhile sweeps /tmp, and
    # took what this killed one left there before the check below once
    work = tmp_path / "work"
    work.mkdir()
    srv, port = serve(procs, secret, "127.0.0.1", "", "--work-dir", str(work))
    out = tmp_path / "out.pcap"
    p = start(procs, ["run", *ttl_pipeline(out, "--loops", "1000000", "--set",
                                           "rx.device=remote:a", "--remote",
                                           f"a=127.0.0.1:{port}", "--secret-file", str(secret)),
                      "--json", "--timeout", "300"])
    deadline = time.monotonic() + 120  # generous: packets reach the host's sink
    while (not out.exists() or out.stat().st_size < 100_000) and time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        time.sleep(0.05)
    folders = list(work.glob(f"offlow-remote-dev-{srv.pid}-*"))
    assert len(folders) == 1  # where the device runs (its executable, its stats)
    assert (folders[0] / "device").exists()
    srv.send_signal(sig)
    o, err = p.communicate(timeout=120)  # it ends (no timing asserted)
    s = json.loads(o)
    assert p.returncode == 1 and len(s["errors"]) == 1, err
    m = re.fullmatch(rf"remote device remote:a \(127\.0\.0\.1:{port}\): (.*); (\d+) ring "
                     r"entries \(packets\) had come from it and 0 gone to it", s["errors"][0])
    assert m and why in m[1], s["errors"]
    came = int(m[2])
    assert came > 0 and s["segments"][1]["packets"] == came == s["sinks"]["tx"]["packets"]
    assert len(read_frames(out)) == came
    # the device's own counts never came: what came from it stands for them (it read
    # them), so the equation holds (it was -came: forwarded, never read)
    a = s["accounting"]
    assert (a.get("from_devices"), a["forwarded"], a["unaccounted"]) == (came, came, 0), a
    assert s["links"]["remote:a"]["from_device_uncounted"] == came, s["links"]
    if sig == signal.SIGKILL:  # the next serve-device removes what the killed one left
        srv.wait(timeout=60)
        assert folders[0].exists()
        serve(procs, secret)  # (in /tmp: not this one's)
        assert folders[0].exists()
        serve(procs, secret, "127.0.0.1", "", "--work-dir", str(work))
        assert not folders[0].exists()


def test_an_option_the_devices_source_never_reads_is_one_error_before_it_starts(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """A misspelt key for a source on the remote device is refused before anything is
    built or sent there (offlow.optkeys; it was refused by the device's process at
    start, its server passing the reason back): `--opt rx.loop=2` was silently
    unread before either."""
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret)
    p = start(procs, ["run", *ttl_pipeline(tmp_path / "out.pcap", "--set", "rx.device=remote:a",
                                           "--remote", f"a=127.0.0.1:{port}", "--secret-file",
                                           str(secret), "--opt", "rx.loop=2"), "--json"])
    out, err = p.communicate(timeout=300)
    assert p.returncode == 2 and out == "", err
    assert err == ("offlow: error: --opt `rx.loop=2`: source `rx` (kind=pcap) reads no option "
                   "`loop` (did you mean `loops`?); it reads advance_ts, count, duration_ns, "
                   "kind, loops, path, rate, seed\n")


def test_a_start_failure_of_the_devices_process_is_the_runs_one_error(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """What the device's process refuses at start (here a source's rate that is no
    number: only the process parses it) is passed back by its server and is the run's
    one error (as a misspelt key and an unknown kind were, before offlow.optkeys refused
    them up front)."""
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret)
    rc, s, err = run(procs, ttl_pipeline(tmp_path / "out.pcap", "--set", "rx.device=remote:a",
                                         "--remote", f"a=127.0.0.1:{port}", "--secret-file",
                                         str(secret), "--opt", "rx.rate=abc"))
    assert rc == 1 and s["errors"] == [
        f"remote device remote:a (127.0.0.1:{port}): its process exited there with status 1: "
        "source rx: rate=abc is not a rate (packets a second, 0 or more); 0 ring entries "
        "(packets) had come from it and 0 gone to it"], (s["errors"], err)


def test_a_work_folder_gone_after_start_is_said_and_ends_the_run(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """serve-device's work folder removed while it waits (checked only at its start):
    the run it cannot make a folder for ends with one error naming why, said on the
    server's stderr too (the host saw only `the connection to the peer was lost`)."""
    secret = secret_file(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    srv, port = serve(procs, secret, "127.0.0.1", "", "--work-dir", str(work))
    work.rmdir()
    rc, s, err = run(procs, ttl_pipeline(tmp_path / "out.pcap", "--set", "rx.device=remote:a",
                                         "--remote", f"a=127.0.0.1:{port}", "--secret-file",
                                         str(secret)))
    why = f"cannot make a run's folder in {work}: No such file or directory"
    assert rc == 1 and s["errors"] == [f"remote device remote:a (127.0.0.1:{port}): {why}"], (
        s["errors"], err)
    srv.terminate()
    _, said = srv.communicate(timeout=60)
    assert f"offlow serve-device: {why}" in said, said


@pytest.mark.parametrize("kind", ["missing", "a file", "noexec"])
def test_serve_device_refuses_a_work_folder_it_cannot_run_devices_in(
        tmp_path: Path, procs: list[subprocess.Popen[str]], kind: str) -> None:
    """serve-device --work-dir: a folder that is missing, a file, or on a file system
    mounted noexec (where the device's executable could never run) is one clear error
    before it listens."""
    secret = secret_file(tmp_path)
    work = tmp_path / "work"
    if kind == "a file":
        work.write_text("not a folder")
    elif kind == "noexec":
        work.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=1m", "tmpfs",
                                  str(work)], capture_output=True, text=True)
        if mounted.returncode:
            pytest.skip(f"cannot mount a noexec tmpfs here: {mounted.stderr.strip()}")
    try:
        p = start(procs, ["serve-device", "--listen", "127.0.0.1:0", "--secret-file",
                          str(secret), "--work-dir", str(work)])
        out, err = p.communicate(timeout=60)
    finally:
        if kind == "noexec":
            subprocess.run(["umount", str(work)], check=True)
    why = {"missing": "no such folder", "a file": "not a folder",
           "noexec": "its file system is mounted noexec, so the device's executable could "
                     "not run there; give a folder on another"}[kind]
    assert p.returncode == 2 and err.strip() == f"offlow: error: --work-dir {work}: {why}", err
    assert "listening" not in err


ROUTER = EXAMPLE.with_name("router.py")


def test_the_router_with_its_lookup_segment_remote_is_the_same_as_on_nic(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """The route segment (both LPM tables, built there from the BGP table) on a remote
    device between rx on nic and tx on host: rings cross both ways. One serve-device
    serves both runs (it listens again after each)."""
    secret = secret_file(tmp_path)
    srv, port = serve(procs, secret)
    routed = ["--count", "20000", "--seed", "3", "--prefixes", str(BGP)]
    on = ["--set", "route.device=remote:r1", "--remote", f"r1=127.0.0.1:{port}",
          "--secret-file", str(secret)]
    for name, more in (("tls", ["--input", str(TLS)]), ("routed", routed)):
        rc, nic, err = run(procs, [str(ROUTER), *more, "--output", str(tmp_path / "nic.pcap")])
        assert rc == 0 and nic["ok"], err
        rc, rem, err = run(procs, [str(ROUTER), *more, "--output",
                                   str(tmp_path / "remote.pcap"), *on])
        assert rc == 0 and rem["ok"], err
        assert [x["device"] for x in rem["segments"]] == ["nic", "remote:r1", "host"]
        assert counts(rem) == counts(nic), name
        frames = read_frames(tmp_path / "remote.pcap")
        assert frames == read_frames(tmp_path / "nic.pcap"), name
    assert len(frames) == 20000  # the synthetic traffic is routed: the tables were built
    srv.send_signal(signal.SIGTERM)
    _, serr = srv.communicate(timeout=60)
    assert serr.count("a run starts") == 2, serr


def test_the_remote_device_answers_live_stats_while_it_runs(served: Servers) -> None:
    """What `offlow stats`, the progress lines and --metrics read (live.h) comes from the
    device too: the request word crosses, its live stats come back."""
    from offlow.dsl.loader import load_program
    from offlow.runner import Run, RunOptions, build_for

    secret, (port,) = served.secret, served.ports(1)
    o = RunOptions(input=TLS, duration=60, rate=20000, timeout=120,
                   remotes=(f"a=127.0.0.1:{port}",), secret_file=secret)
    r = Run(build_for(load_program(EXAMPLE, ["rx.device=remote:a"]), o), o)
    r.start()
    try:
        seen: list[int] = []
        deadline = time.monotonic() + 60  # generous; it answers once packets flowed
        while len(seen) < 2 and time.monotonic() < deadline:
            stats, up = r.live_stats(timeout=5)
            cores = stats.get("remote:a", {}).get("cores", [])
            read = sum(s["packets"] for c in cores for s in c.get("sources", {}).values())
            if up and read and (not seen or read > seen[-1]):
                seen.append(read)
            time.sleep(0.2)
    finally:
        r.stop()
        res = r.wait()
    assert len(seen) == 2 and seen[0] < seen[1], seen  # counts read while it ran, growing
    assert res.ok, res.errors
    assert res.stats["remote:a"]["cores"][0]["sources"]["rx"]["packets"] >= seen[1]


def test_a_users_logical_queue_from_a_remote_device_is_the_same_as_from_nic(
        tmp_path: Path, procs: list[subprocess.Popen[str]], served: Servers) -> None:
    """A program written as users write them (its own elements, C bodies with comments, a
    queue of three channels, one without packet bytes, steered by key to two host
    cores), odd frame sizes and a small ring: every ring of the queue comes from the
    remote device."""
    prog = Path(__file__).resolve().parent / "programs" / "logical_queue.py"
    secret, (port,) = served.secret, served.ports(1)
    common = [str(prog), "--count", "3001", "--sizes", "64:3,65:1,1001:2", "--seed", "7",
              "--set", "ring_size=64"]
    rc, nic, err = run(procs, [*common, "--output", str(tmp_path / "nic.pcap")])
    assert rc == 0 and nic["ok"], err
    rc, rem, err = run(procs, [*common, "--output", str(tmp_path / "remote.pcap"), "--set",
                               "rx.device=remote:q", "--remote", f"q=127.0.0.1:{port}",
                               "--secret-file", str(secret)])
    assert rc == 0 and rem["ok"], err
    assert counts(rem) == counts(nic)
    frames = sorted(read_frames(tmp_path / "remote.pcap"))  # two host cores: any order
    assert len(frames) == 3001 and frames == sorted(read_frames(tmp_path / "nic.pcap"))


def test_a_stop_before_the_device_started_stops_it_cleanly(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """The runner's stop (Ctrl-C, a failure elsewhere) while the stand-in is still
    connecting reaches the device's process once it runs, which then ends cleanly: its
    stats come back, no error (it had been lost, and the run went on to its end)."""
    from offlow.dsl.loader import load_program
    from offlow.runner import Run, RunOptions, build_for

    secret = secret_file(tmp_path)
    _, port = serve(procs, secret)
    o = RunOptions(input=TLS, duration=600, timeout=120,
                   remotes=(f"a=127.0.0.1:{port}",), secret_file=secret)
    r = Run(build_for(load_program(EXAMPLE, ["rx.device=remote:a"]), o), o)
    r.start()
    r.stop()
    res = r.wait()
    assert res.ok, res.errors
    assert "remote:a" in res.stats and "host" in res.stats
