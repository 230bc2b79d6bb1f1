"""The key-value store with its store remote, served on a socket of the host
(docs/remote.md, "Sockets"): the host's sources and sinks read and answer the run's UDP
socket while the store answers from remote devices; a user's request mix is answered as
a real memcached answers it."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.kvs.tools import memcached, setup_memcached
from offlow.runner import Run, RunOptions
from tests.e2e import ROOT
from tests.kvs_replay import memcached_answers, memcached_replies
from tests.netns import ADDR_B
from tests.remote_served import Servers
from tests.test_remote import TCP, secret_file, serve, start
from tests.test_remote_kvs import REQUESTS

SHARDS = ROOT / "examples" / "kvs_shards.py"
KVS = ROOT / "examples" / "kvs.py"

pytestmark = pytest.mark.skipif(not Path("/usr/include/ucp/api/ucp.h").exists(),
                                reason="remote: UCX (libucx-dev) is not installed")


@pytest.fixture(scope="module")
def memcached_udp() -> dict[int, bytes]:
    """What memcached answers to REQUESTS over UDP."""
    return memcached_answers(REQUESTS)


@pytest.fixture
def remote_run(served: Servers, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A function that starts examples/kvs_shards.py with its store on the remote devices
    named, each one of the module's shared serve-devices on 127.0.0.1, with the run
    options given (one run at a time: a serve-device serves one); every run it started
    is stopped on leaving and its result checked ok."""
    for k, v in TCP.items():
        monkeypatch.setenv(k, v)
    secret = served.secret
    runs: list[Run] = []

    def start(names: list[str], **opts: object) -> Run:
        ports = dict(zip(names, served.ports(len(names)), strict=True))
        spread = (f"parse->store.devices={','.join(f'remote:{n}' for n in names)}"
                  if len(names) > 1 else f"store.device=remote:{names[0]}")
        r = Run(build(load_program(SHARDS, [spread])),
                RunOptions(remotes=tuple(f"{n}=127.0.0.1:{p}" for n, p in ports.items()),
                           secret_file=secret, timeout=300, **opts))  # type: ignore[arg-type]
        runs.append(r)
        r.start()
        return r

    yield start
    for r in runs:
        if all(p.poll() is not None for p in r.procs.values()):
            continue  # the test waited for it
        r.stop()
        res = r.wait()
        assert res.ok, res.errors


@pytest.mark.parametrize("names", [["a"], ["a", "b"]], ids=["one", "sharded"])
def test_udp_clients_of_a_remote_store_get_memcacheds_answers(
        memcached_udp: dict[int, bytes], remote_run: object, names: list[str]) -> None:
    r = remote_run(names, udp_port=0)  # type: ignore[operator]
    assert r.udp_port
    assert memcached_replies(r.udp_port, REQUESTS) == memcached_udp


def test_a_socket_run_with_a_sink_on_the_remote_device_is_refused(tmp_path: Path) -> None:
    b = build(load_program(KVS, ["store.device=remote:kv1"]))
    with pytest.raises(OfflowError, match="`tx` is on a remote device, which takes no sockets"):
        Run(b, RunOptions(udp_port=0, remotes=("kv1=127.0.0.1:9",),
                          secret_file=secret_file(tmp_path)))


# ---- pymemcache over TCP: the connections end on the host, the store is remote ------


def pymemcache_mix(seed: int) -> list[tuple[str, bytes, bytes]]:
    """A user's request mix for pymemcache: keys of odd lengths, values of 0..900 B,
    gets of keys never set, deletes, adds and appends."""
    rng = random.Random(seed)
    keys = [b"k%d:%s" % (i, b"z" * (i * 7 % 23)) for i in range(17)]
    ops = []
    for _ in range(250):
        op = rng.choice(["set", "get", "get", "delete", "add", "append", "missing"])
        key = rng.choice(keys)
        value = bytes(rng.randrange(33, 127) for _ in range(rng.choice([0, 1, 77, 900])))
        ops.append((op, b"never-set-%d" % rng.randrange(99) if op == "missing" else key, value))
    return ops


def replay(port: int, ops: list[tuple[str, bytes, bytes]]) -> list[object]:
    """Each op by a pymemcache client on 127.0.0.1:`port`, its answers in order."""
    from pymemcache.client.base import Client

    c = Client(("127.0.0.1", port), connect_timeout=10, timeout=10)
    out: list[object] = []
    try:
        for op, key, value in ops:
            if op in ("get", "missing"):
                out.append(c.get(key))
            elif op == "delete":
                out.append(c.delete(key, noreply=False))
            else:
                out.append(getattr(c, op)(key, value, noreply=False))
        out.append(c.get_many([k for _, k, _ in ops[:20]]))
    finally:
        c.close()
    return out


OPS = pymemcache_mix(2812)


@pytest.fixture(scope="module")
def memcached_tcp() -> list[object]:
    """What a real memcached answers to OPS over TCP."""
    path, why = setup_memcached()
    if not path:
        pytest.skip(f"memcached unavailable: {why}")
    with memcached(threads=1) as m:
        return replay(m.port, OPS)


@pytest.mark.parametrize("names", [["a"], ["a", "b"]], ids=["one", "sharded"])
def test_pymemcache_over_tcp_to_a_remote_store_answers_as_memcached(
        memcached_tcp: list[object], remote_run: object, names: list[str]) -> None:
    r = remote_run(names, tcp_port=0)  # type: ignore[operator]
    assert r.front is not None and r.tcp_port
    assert replay(r.tcp_port, OPS) == memcached_tcp
    r.stop()
    res = r.wait()
    assert res.ok, res.errors
    assert res.tcp["forwarded"] > len(OPS) // 2 and res.tcp["unanswered"] == 0
    assert res.tcp["accepted"] == 1 and res.tcp["open"] == 0


def test_a_client_gone_mid_request_is_a_counted_drop(remote_run: object) -> None:
    r = remote_run(["a"], tcp_port=0)  # type: ignore[operator]
    with socket.create_connection(("127.0.0.1", r.tcp_port), timeout=10) as s:
        s.sendall(b"set cut 0 0 100\r\nonly part of the value")
    from pymemcache.client.base import Client

    c = Client(("127.0.0.1", r.tcp_port), connect_timeout=10, timeout=10)
    assert c.get(b"cut") is None  # the server goes on; the cut set was not run
    assert c.set(b"after", b"v", noreply=False) and c.get(b"after") == b"v"
    c.close()
    r.stop()
    res = r.wait()
    assert res.ok, res.errors
    assert res.tcp["cut"] == 1 and res.tcp["accepted"] == 2 and res.tcp["unanswered"] == 0


def test_pymemcache_to_a_store_across_two_namespaces_answers_as_memcached(
        memcached_tcp: list[object], two_hosts: tuple[str, str], tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    """The run and its pymemcache client in one namespace, the store's device in the
    other (UCX over TCP across the veth pair)."""
    host, device = two_hosts
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret, ADDR_B, device)
    p = start(procs, ["run", str(SHARDS), "--tcp", "0", "--set", "store.device=remote:b",
                      "--remote", f"b={ADDR_B}:{port}", "--secret-file", str(secret),
                      "--timeout", "300"], host)
    assert p.stderr is not None
    seen = ""
    for line in p.stderr:
        seen += line
        if "serving TCP on 127.0.0.1:" in line:
            tcp = int(line.split("127.0.0.1:")[1].split()[0])
            break
    else:
        raise AssertionError(f"the run did not serve TCP:\n{seen}")
    client = subprocess.run(
        ["ip", "netns", "exec", host, sys.executable, "-c",
         "import sys; from tests.test_remote_kvs_sockets import OPS, replay; "
         "print(repr(replay(int(sys.argv[1]), OPS)))", str(tcp)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)
    assert client.returncode == 0, client.stderr
    assert client.stdout.strip() == repr(memcached_tcp)


def test_a_request_longer_than_the_programs_datagram_gets_memcacheds_oom_answer(
        remote_run: object) -> None:
    """A request the program could not take (longer than its mtu less the headers) gets
    memcached's answer for an item it cannot store, and the connection goes on."""
    from pymemcache.client.base import Client
    from pymemcache.exceptions import MemcacheServerError

    r = remote_run(["a"], tcp_port=0)  # type: ignore[operator]
    c = Client(("127.0.0.1", r.tcp_port), connect_timeout=10, timeout=10)
    with pytest.raises(MemcacheServerError, match="out of memory storing object"):
        c.set(b"big", b"v" * 4000, noreply=False)
    assert c.set(b"small", b"s" * 900, noreply=False) and c.get(b"small") == b"s" * 900
    assert c.get(b"big") is None
    c.close()
    r.stop()
    res = r.wait()
    assert res.ok, res.errors
    assert res.tcp["too_long"] == 1 and res.tcp["unanswered"] == 0
