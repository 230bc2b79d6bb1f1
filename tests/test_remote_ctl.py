"""Operating a remote device (docs/remote.md): `offlow ctl` changes a table that lives
on a remote device while packets flow (the control message crosses the link to the
device's process and its answer comes back): a route table, and a user's hash map (`offlow
ctl ... map`); and `offlow reload` of a remote device's code is refused with the reason."""

from __future__ import annotations

import ipaddress
import json
import re
import signal
import subprocess
from pathlib import Path

import pytest

from offlow.control import ControlError
from offlow.dsl import Program
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.reload import reload
from offlow.runner import Run, RunOptions, build_for
from offlow.session import attach, session
from offlow.targets import remote
from tests.netns import ADDR_B
from tests.programs import reload_mark
from tests.remote_served import Servers
from tests.test_control import (
    ROUTER,
    Reference,
    _check_replay,
    _hop_rule,
    _updates,
    apply_log,
)
from tests.test_map_ctl import (
    AFTER,
    LAYOUT,
    MARKED,
    MARKS,
    _capture,
    _check_marks,
    _forward_past_the_mark,
    _learned,
    _stopped_if_failing,
)
from tests.test_remote import secret_file, serve, start

pytestmark = pytest.mark.skipif(remote.TARGET.unusable() is not None,
                                reason=f"remote: {remote.TARGET.unusable()}")


def test_routes_added_and_deleted_on_a_remote_device_while_it_forwards(
        tmp_path: Path, served: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The router with its route segment (and so its route tables) on `remote:r1`: 1,000
    route adds and deletes through the tables' control channel while the device
    forwards; every forwarded packet's next hop is the table's answer before or after
    the update it raced with (the NIC test's reference, replaying the update log), and
    the device counted every update."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret, (port,) = served.secret, served.ports(1)
    prefixes = tmp_path / "routes.txt"
    prefixes.write_text("# the table at start\n10.0.0.0/8\n")
    out = tmp_path / "out.pcap"
    log = _updates(1000, seed=11)
    opts = RunOptions(count=100_000, rate=50_000, sizes="64:1", prefixes=prefixes, output=out,
                      opts=(f"routes4.path={prefixes}", f"routes6.path={prefixes}"),
                      remotes=(f"r1=127.0.0.1:{port}",), secret_file=secret)
    prog = load_program(ROUTER)
    prog.apply_setting("route.device=remote:r1")
    with session(prog, opts) as s:
        routes = s.tables["routes4"]
        before = routes.info()   # (waits for the device, which starts after the run)
        info = apply_log(routes, log)
        s.wait_drained(timeout=120)
    assert s.result is not None and s.result.ok, s.result
    assert before.kind == "lpm4" and info.updates == before.updates + len(log)
    assert s.result.stats["remote:r1"]["link"]["chan_to_device"] == 0
    start = {(10 << 24, 8): _hop_rule(ipaddress.IPv4Network("10.0.0.0/8"))}
    _check_replay(out, log, Reference(start))


def test_routes_changed_on_a_remote_device_in_another_namespace(
        two_hosts: tuple[str, str], tmp_path: Path,
        procs: list[subprocess.Popen[str]]) -> None:
    """As above across two namespaces joined by a veth pair (UCX over TCP), as a user
    runs it: `offlow run --serve` in the host's namespace, the routes changed by a host
    program attached to its window, the run stopped with Ctrl-C."""
    host, device = two_hosts
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret, ADDR_B, device)
    prefixes = tmp_path / "routes.txt"
    prefixes.write_text("10.0.0.0/8  # the table at start\n")
    out = tmp_path / "out.pcap"
    log = _updates(600, seed=12)
    p = start(procs, ["run", str(ROUTER), "--serve", "--count", "60000", "--rate", "30000",
                      "--sizes", "64:1", "--prefixes", str(prefixes), "--output", str(out),
                      "--opt", f"routes4.path={prefixes}", "--opt", f"routes6.path={prefixes}",
                      "--set", "route.device=remote:b", "--remote", f"b={ADDR_B}:{port}",
                      "--secret-file", str(secret), "--json"], host)
    assert p.stderr is not None
    window = ""
    for line in p.stderr:
        m = re.search(r"attach\('([^']+)'\)", line)
        if m:
            window = m[1]
            break
    assert window, p.communicate()
    with attach(window) as a:
        routes = a.tables["routes4"]
        before = routes.info()   # (waits for the device, which starts after the run)
        info = apply_log(routes, log)
    p.send_signal(signal.SIGINT)
    o, err = p.communicate(timeout=120)
    s = json.loads(o)
    assert p.returncode == 0 and s["ok"], err
    assert info.updates == before.updates + len(log)
    assert s["links"]["remote:b"]["chan_to_device"] == 0
    start_table = {(10 << 24, 8): _hop_rule(ipaddress.IPv4Network("10.0.0.0/8"))}
    _check_replay(out, log, Reference(start_table))


def _marked_remote(mark: int) -> Program:
    """tests/programs/reload_mark.py with its NIC segment on `remote:a`."""
    p = reload_mark.program(mark=mark)
    p.apply_setting("edge.device=remote:a")
    return p


def test_a_reload_of_a_remote_devices_code_is_refused_with_the_reason(
        tmp_path: Path, served: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that takes reloads, its stamping segment on a remote device: a reload that
    changes that segment's code is refused, naming the device, why and what to do,
    before anything is sent; the run goes on and ends cleanly."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret, (port,) = served.secret, served.ports(1)
    o = RunOptions(duration=60.0, rate=15000, count=1000, seed=3, output=tmp_path / "out.pcap",
                   remotes=(f"a=127.0.0.1:{port}",), secret_file=secret)
    run = Run(build_for(_marked_remote(7), o), o)
    run.start()
    try:
        with pytest.raises(OfflowError) as e:
            reload(run.window, _marked_remote(9))
    finally:
        run.stop()
        res = run.wait()
    assert str(e.value) == (
        f"{run.window} runs `reload_mark`; the code of remote:a changed, and remote:a takes "
        "no reloads: its process runs on another machine, where the new build's code is not "
        "(a reload would need it sent across the link: not built); stop the run and start "
        "it again with the new program")
    assert res.ok, res.errors


def test_a_users_map_on_a_remote_device_changed_while_it_runs(
        tmp_path: Path, served: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/programs/dscp_marks.py (a user's 7-byte key with an address field, 1-byte
    marks) with its one segment on `remote:m`: the map's requests cross the link to the
    device's core and back. Four flows learned; a flow's mark set, a key of the client's
    own added, the full map refusing another, a delete, a bad key: each answered as on the
    host (test_map_ctl), and the frames that come back carry the mark from some frame on,
    never the old one after it."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    secret, (port,) = served.secret, served.ports(1)
    cap, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    _capture(cap)
    # the frames flow at 20,000 a second until the output shows the change and AFTER
    # frames past it, however long the requests take (up to 200 s of input)
    opts = RunOptions(input=cap, output=out, loops=1_000_000, rate=20_000,
                      remotes=(f"m=127.0.0.1:{port}",), secret_file=secret)
    with session(load_program(MARKS, ["edge.device=remote:m"]), opts) as s, \
            _stopped_if_failing(s):
        t = s.tables["marks"]
        m = t.map()   # (waits for the device, which starts after the run)
        assert m.layout == LAYOUT
        assert _learned(m, 4) == {f"peer=192.0.2.{k + 1},proto=17,port={53 + k}": 0
                                  for k in range(4)}
        m.set(MARKED, 46)
        assert m.get(MARKED) == 46
        m.set("peer=198.51.100.9,proto=6,port=443", 255)
        assert m.get("port=443,proto=6,peer=198.51.100.9") == 255
        with pytest.raises(ControlError, match="the map is full \\(5 keys\\)"):
            m.set("peer=203.0.113.1,proto=1,port=0", 1)
        m.delete("peer=198.51.100.9,proto=6,port=443")
        assert m.get("peer=198.51.100.9,proto=6,port=443") is None
        with pytest.raises(ControlError, match="no such key"):
            m.delete("peer=198.51.100.9,proto=6,port=443")
        with pytest.raises(OfflowError, match="not an ipv4 address"):
            m.get("peer=192.0.2,proto=17,port=53")
        info = t.info()
        assert (info.kind, info.updates, info.entries, info.full) == ("map", 3, 5, 1)
        _forward_past_the_mark(s, out, AFTER)
    assert s.result is not None and s.result.ok, s.result
    _check_marks(out, s.result.stats)
