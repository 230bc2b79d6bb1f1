"""The key-value store with its store remote, served on a socket of the host
(docs/remote.md, "Sockets"): the host's sources and sinks read and answer the run's UDP
socket while the store answers from remote devices; a user's request mix is answered as
a real memcached answers it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.kvs.tools import memcached, setup_memcached
from offlow.runner import Run, RunOptions
from tests.e2e import ROOT
from tests.kvs_replay import memcached_replies, request_mix
from tests.test_remote import TCP, secret_file, serve

SHARDS = ROOT / "examples" / "kvs_shards.py"
KVS = ROOT / "examples" / "kvs.py"
REQUESTS = request_mix(300, keys=19, seed=2811)

pytestmark = pytest.mark.skipif(not Path("/usr/include/ucp/api/ucp.h").exists(),
                                reason="remote: UCX (libucx-dev) is not installed")


@pytest.fixture(scope="module")
def expected() -> Iterator[dict[int, bytes]]:
    """What memcached answers to REQUESTS over UDP, request id -> reply."""
    path, why = setup_memcached()
    if not path:
        pytest.skip(f"memcached unavailable: {why}")
    with memcached(threads=1) as m:
        yield memcached_replies(m.port, REQUESTS)


@pytest.fixture
def remote_run(tmp_path: Path, procs: list[subprocess.Popen[str]],
               monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A function that starts examples/kvs_shards.py with its store on the remote devices
    named, each a serve-device on 127.0.0.1, with the run options given; every run it
    started is stopped on leaving and its result checked ok."""
    for k, v in TCP.items():
        monkeypatch.setenv(k, v)
    secret = secret_file(tmp_path)
    runs: list[Run] = []

    def start(names: list[str], **opts: object) -> Run:
        ports = {n: serve(procs, secret)[1] for n in names}
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
        r.stop()
        res = r.wait()
        assert res.ok, res.errors


@pytest.mark.parametrize("names", [["a"], ["a", "b"]], ids=["one", "sharded"])
def test_udp_clients_of_a_remote_store_get_memcacheds_answers(
        expected: dict[int, bytes], remote_run: object, names: list[str]) -> None:
    r = remote_run(names, udp_port=0)  # type: ignore[operator]
    assert r.udp_port
    assert memcached_replies(r.udp_port, REQUESTS) == expected


def test_a_socket_run_with_a_sink_on_the_remote_device_is_refused(tmp_path: Path) -> None:
    b = build(load_program(KVS, ["store.device=remote:kv1"]))
    with pytest.raises(OfflowError, match="`tx` is on a remote device, which takes no sockets"):
        Run(b, RunOptions(udp_port=0, remotes=("kv1=127.0.0.1:9",),
                          secret_file=secret_file(tmp_path)))
