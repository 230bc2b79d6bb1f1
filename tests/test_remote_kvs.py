"""The key-value store (examples/kvs.py) with its store segment on a remote device
(docs/remote.md): a user's request mix in a capture is answered as a real memcached
answers the same requests over UDP, and as with the store on nic, over 127.0.0.1 and
across two network namespaces (UCX over TCP)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from offlow.errors import OfflowError
from tests.e2e import ROOT, TLS, read_frames
from tests.kvs_replay import memcached_answers, replies_in, request_mix, write_capture
from tests.netns import ADDR_B
from tests.remote_served import Servers
from tests.test_remote import counts, run, secret_file, serve, start

KVS = ROOT / "examples" / "kvs.py"
REQUESTS = request_mix(400, keys=23, seed=28)

pytestmark = pytest.mark.skipif(not Path("/usr/include/ucp/api/ucp.h").exists(),
                                reason="remote: UCX (libucx-dev) is not installed")


@pytest.fixture(scope="module")
def expected() -> Iterator[dict[int, bytes]]:
    """What memcached answers to REQUESTS, request id -> reply."""
    replies = memcached_answers(REQUESTS)
    # one datagram each (a reply that crosses a queue loses its segmentation, docs/kvs.md)
    assert max(map(len, replies.values())) < 1400
    yield replies


def kvs(capture: Path, out: Path, *more: str) -> list[str]:
    return [str(KVS), "--input", str(capture), "--output", str(out), *more]


def test_the_store_on_a_remote_device_answers_as_memcached_and_as_on_nic(
        expected: dict[int, bytes], tmp_path: Path, procs: list[subprocess.Popen[str]],
        served: Servers) -> None:
    capture = tmp_path / "req.pcap"
    write_capture(capture, REQUESTS)
    secret, (port,) = served.secret, served.ports(1)
    rc, nic, err = run(procs, kvs(capture, tmp_path / "nic.pcap", "--set", "store.device=nic"))
    assert rc == 0 and nic["ok"], err
    rc, rem, err = run(procs, kvs(capture, tmp_path / "remote.pcap", "--set",
                                  "store.device=remote:kv1", "--remote",
                                  f"kv1=127.0.0.1:{port}", "--secret-file", str(secret)))
    assert rc == 0 and rem["ok"], err
    assert [x["device"] for x in rem["segments"]] == ["host", "remote:kv1"]
    assert replies_in(tmp_path / "remote.pcap") == expected
    assert read_frames(tmp_path / "remote.pcap") == read_frames(tmp_path / "nic.pcap")
    assert counts(rem) == counts(nic)


def test_the_store_across_two_namespaces_answers_as_memcached(
        expected: dict[int, bytes], two_hosts: tuple[str, str], tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    host, device = two_hosts
    capture = tmp_path / "req.pcap"
    write_capture(capture, REQUESTS)
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret, ADDR_B, device)
    rc, rem, err = run(procs, kvs(capture, tmp_path / "remote.pcap", "--set",
                                  "store.device=remote:b", "--remote", f"b={ADDR_B}:{port}",
                                  "--secret-file", str(secret)), host)
    assert rc == 0 and rem["ok"], err
    assert rem["tables"]["store"]["gets"] > 0
    assert replies_in(tmp_path / "remote.pcap") == expected


# ---- the store sharded by key over several remote devices (scale-out) ---------------

SHARDS = ROOT / "examples" / "kvs_shards.py"
SPREAD = "parse->store.devices=remote:a,remote:b"


def shards(capture: Path, out: Path, ports: dict[str, int], secret: Path,
           addr: str = "127.0.0.1", *more: str) -> list[str]:
    remotes = [x for name, port in ports.items() for x in ("--remote", f"{name}={addr}:{port}")]
    return [str(SHARDS), "--input", str(capture), "--output", str(out), "--set", SPREAD,
            *remotes, "--secret-file", str(secret), *more]


def test_the_store_sharded_over_two_devices_answers_as_memcached(
        expected: dict[int, bytes], tmp_path: Path, procs: list[subprocess.Popen[str]],
        served: Servers) -> None:
    """Every key's requests reach one device, in order: a GET after a SET of its key on
    another device would miss, so equal answers show it."""
    capture = tmp_path / "req.pcap"
    write_capture(capture, REQUESTS)
    secret = served.secret
    ports = dict(zip("ab", served.ports(2), strict=True))
    rc, one, err = run(procs, [str(SHARDS), "--input", str(capture), "--output",
                               str(tmp_path / "one.pcap")])
    assert rc == 0 and one["ok"], err
    rc, s, err = run(procs, shards(capture, tmp_path / "shards.pcap", ports, secret))
    assert rc == 0 and s["ok"], err
    assert [(x["segment"], x["device"]) for x in s["segments"]] == [
        ("parse", "host"), ("store", "remote:a,remote:b"), ("reply", "host")]
    assert replies_in(tmp_path / "shards.pcap") == expected
    by_instance = s["queues"][0]["packets_by_instance"]
    assert len(by_instance) == 4 and all(by_instance), by_instance
    # the shards' items add up to the one store's: no key is held twice
    for k in ("items", "bytes", "gets", "hits", "stores", "deletes", "total_items"):
        assert s["tables"]["shard"][k] == one["tables"]["shard"][k], k


def test_the_store_sharded_over_three_namespaces_answers_as_memcached(
        expected: dict[int, bytes], tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    from benchmarks.common.netns import star_namespaces

    capture = tmp_path / "req.pcap"
    write_capture(capture, REQUESTS)
    secret = secret_file(tmp_path)
    with star_namespaces("ofl-shd", 2) as (host, stores):
        ports = {}
        for name, (ns, addr) in zip("ab", stores, strict=True):
            ports[name] = (addr, serve(procs, secret, addr, ns)[1])
        remotes = [x for n, (a, p) in ports.items() for x in ("--remote", f"{n}={a}:{p}")]
        rc, s, err = run(procs, [str(SHARDS), "--input", str(capture), "--output",
                                 str(tmp_path / "shards.pcap"), "--set", SPREAD, *remotes,
                                 "--secret-file", str(secret)], host)
    assert rc == 0 and s["ok"], err
    assert replies_in(tmp_path / "shards.pcap") == expected


def test_a_killed_shard_ends_the_run_with_one_error_naming_it(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    capture = tmp_path / "req.pcap"
    write_capture(capture, REQUESTS)
    secret = secret_file(tmp_path)
    servers = {name: serve(procs, secret) for name in ("a", "b")}
    out = tmp_path / "out.pcap"
    p = start(procs, ["run", *shards(capture, out, {n: port for n, (_, port) in servers.items()},
                                     secret, "127.0.0.1", "--loops", "1000000"),
                      "--json", "--timeout", "300"])
    deadline = time.monotonic() + 120
    while (not out.exists() or out.stat().st_size < 100_000) and time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        time.sleep(0.05)
    srv, port = servers["b"]
    srv.send_signal(signal.SIGKILL)
    o, err = p.communicate(timeout=120)  # it ends (no timing asserted)
    s = json.loads(o)
    assert p.returncode == 1, err
    named = [e for e in s["errors"] if e.startswith("remote device")]
    # (a killed peer's connection is reset; under load its silence may be noticed first)
    assert len(named) == 1 and re.match(rf"remote device remote:b \(127\.0\.0\.1:{port}\): "
                                        "(the connection to the peer was lost|the peer stopped "
                                        "answering)", named[0]), s["errors"]
    # the run's one error: the surviving shard stops by itself within the runner's grace
    # (its device's store, whose producer on the host was not the first peer gone, did
    # not see the abort and ran until killed: `a process did not stop ...`)
    assert s["errors"] == named, s["errors"]
    # the host's processes stopped by themselves: what they counted is reported
    assert s["sinks"]["tx"]["packets"] > 0 and s["segments"][0]["packets"] > 0


@pytest.mark.parametrize(("setting", "error"), [
    ("parse->store.devices=remote:a,nic", "`nic` is not a remote device"),
    ("parse->store.instances=1", "1 instance for 2 devices; give at least one instance per "
                                 "device"),
    ("parse->store.steer=", "the queue is not steered by key"),
    ("parse->store.devices=remote:a,remote:a", "a device is named twice"),
])
def test_a_spread_that_cannot_work_is_one_error_before_anything_starts(
        setting: str, error: str) -> None:
    from offlow.build import plan_program
    from offlow.dsl.loader import load_program

    settings = [SPREAD, setting] if "devices" not in setting else [setting]
    with pytest.raises(OfflowError, match=re.escape(error)):
        plan_program(load_program(SHARDS, settings))


def test_a_sink_in_a_spread_segment_is_refused() -> None:
    from offlow.build import plan_program
    from offlow.dsl.loader import load_program

    with pytest.raises(OfflowError, match="holds `tx`, a sink, which every device would run"):
        plan_program(load_program(KVS, ["parse->store.devices=remote:a,remote:b"]))


def test_a_shard_without_an_address_is_one_error_before_anything_starts(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    secret = secret_file(tmp_path)
    p = start(procs, ["run", str(SHARDS), "--input", str(TLS), "--output",
                      str(tmp_path / "o.pcap"), "--set", SPREAD, "--remote",
                      "a=127.0.0.1:9", "--secret-file", str(secret)])
    _, err = p.communicate(timeout=300)
    assert p.returncode != 0
    assert "device `remote:b`: no address; give --remote b=ADDR:PORT" in err
    assert "Traceback" not in err


def test_explain_shows_which_instance_runs_where() -> None:
    from offlow.build import plan_program
    from offlow.dsl.loader import load_program
    from offlow.explain import explain

    text = explain(plan_program(load_program(SHARDS, [SPREAD])))
    assert "store: spread by key over remote:a (cores [0]), remote:b (cores [0])" in text
    assert "remote:a core 0 polls instances 0,2; remote:b core 0 polls instances 1,3" in text


def test_the_python_form_spreads_as_the_set_form() -> None:
    from offlow.build import plan_program
    from offlow.dsl.loader import load_program

    prog = load_program(SHARDS)
    prog.queue("parse", "store", devices=["remote:a", "remote:b", "remote:c"])
    plan = plan_program(prog)
    store = plan.graph.segment("store")
    assert store.spread == ("remote:a", "remote:b", "remote:c")
    assert [d.name for d in plan.devices] == ["host", "remote:a", "remote:b", "remote:c"]
    # instance i on device i % 3 (4 instances: a takes 0 and 3)
    q = plan.queue("parse->store")
    assert [store.core_device(r.cons) for r in q.rings] == ["remote:a", "remote:b",
                                                             "remote:c", "remote:a"]
    with pytest.raises(OfflowError, match="devices is a list of devices"):
        prog.queue("parse", "store", devices="remote:a")
