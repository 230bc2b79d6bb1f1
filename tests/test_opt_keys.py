"""A user's `offlow run --opt NAME.KEY=VALUE` whose object (a source, sink or table
object of a built-in kind) does not read KEY is one error before anything is built or
started, naming the object, the key, a close match and the keys it reads
(offlow.optkeys); before 2026-11-28 it was refused only once the device processes had
started (gen.h's ofl_args_check_unread), which stays the backstop for a user's own
table that declares no keys. The declarations are held to the keys the C code asks
for: with the up-front check taken out, each object's misspelt key reaches its device
process, whose refusal lists the keys its code asked for.

So is a source's or sink's kind (`--opt rx.kind=bogus`) that its process has not: one
error before anything is built (until 2026-11-28 the device process refused it at its
start), held the same way to the kinds the C code takes (gen.c's ofl_source_open and
ofl_sink_open: the core's, a table's, the linked port libraries', an xdp device's)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import offlow.build
from offlow import optkeys
from offlow.cli import main
from offlow.lso.port import SendPort
from offlow.paths import DATA
from tests.e2e import TLS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ROUTER = EXAMPLES / "router.py"
OBJECTS = ROOT / "tests" / "programs" / "opt_key_objects.py"
KROA100 = DATA / "kroA100.tsp"
SOURCE = "advance_ts, count, duration_ns, kind, loops, rate, seed"  # (a udp source's)
SYNTH = "advance_ts, count, duration_ns, kind, loops, prefixes, rate, seed, sizes"
PCAP = "advance_ts, count, duration_ns, kind, loops, path, rate, seed"
PORT = "advance_ts, count, duration_ns, kind, loops, port, rate, seed"
TTL = EXAMPLES / "ttl_pipeline.py"
LSO = EXAMPLES / "lso.py"
needs_dpdk = pytest.mark.skipif(
    subprocess.run(["pkg-config", "--exists", "libdpdk"]).returncode != 0,
    reason="libdpdk-dev is not installed (benchmarks/common/peers.setup_dpdk installs it)")


class _Started(Exception):
    pass


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str],
             monkeypatch: pytest.MonkeyPatch) -> str:
    """The one error of `offlow run ARGV`, which must come before the program's code is
    generated (so before it is compiled, and before any of its processes starts)."""
    def generated(*_a: object, **_k: object) -> None:
        raise _Started("the program's code was generated")

    monkeypatch.setattr(offlow.build, "generate", generated)
    rc = main(["run", *argv])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert rc == 2 and out == "" and len(lines) == 1, (rc, out, err)
    assert lines[0].startswith("offlow: error: "), err
    return lines[0].removeprefix("offlow: error: ")


# (what, argv of `offlow run`, the one error)
MISSPELT = {
    "lpm4-table": ([str(ROUTER), "--opt", "routes4.pathh=bgp.txt"],
                   "--opt `routes4.pathh=bgp.txt`: table `routes4` reads no option `pathh` "
                   "(did you mean `path`?); it reads nports, path"),
    "lpm6-table": ([str(ROUTER), "--opt", "routes6.nprts=4"],
                   "--opt `routes6.nprts=4`: table `routes6` reads no option `nprts` (did you "
                   "mean `nports`?); it reads nports, path"),
    "kv-store": ([str(EXAMPLES / "kvs.py"), "--opt", "store.capcity=5"],
                 "--opt `store.capcity=5`: table `store` reads no option `capcity` (did you "
                 "mean `capacity`?); it reads capacity, mem, tcp_threads, value_max"),
    # the runner's own keys (ofl_args_get_own) are no user's: neither taken nor listed
    "kv-store-socket": ([str(EXAMPLES / "kvs.py"), "--opt", "store.tcp_fd=0"],
                        "--opt `store.tcp_fd=0`: table `store` reads no option `tcp_fd`; it "
                        "reads capacity, mem, tcp_threads, value_max"),
    "kv-cache": ([str(EXAMPLES / "kvs_cache.py"), "--opt", "cache.evicton=lru"],
                 "--opt `cache.evicton=lru`: table `cache` reads no option `evicton` (did you "
                 "mean `eviction`?); it reads entries, eviction, policy, value_max, ways"),
    "cbc-keys": ([str(EXAMPLES / "crypto.py"), "--opt", "keys.ciphr=bf-cbc"],
                 "--opt `keys.ciphr=bf-cbc`: table `keys` reads no option `ciphr` (did you "
                 "mean `cipher`?); it reads cipher, path"),
    "tsp-climbers": ([str(EXAMPLES / "tsp.py"), "--opt", "cities.climbrs=2"],
                     "--opt `cities.climbrs=2`: table `cities` reads no option `climbrs` (did "
                     "you mean `climbers`?); it reads climbers, path"),
    "lso-send-port": ([str(EXAMPLES / "lso.py"), "--opt", "port.dma_mn=64"],
                      "--opt `port.dma_mn=64`: table `port` reads no option `dma_mn` (did you "
                      "mean `dma_min`?); it reads dma_cpu, dma_min, move, mtu, path"),
    "balancer": ([str(ROOT / "tests" / "programs" / "balanced.py"), "--opt",
                  "mix_balance.shar=0.3"],
                 "--opt `mix_balance.shar=0.3`: table `mix_balance` reads no option `shar` "
                 "(did you mean `share`?); it reads adapt, epoch_us, max_step, min_step, share, "
                 "time"),
    "stream-aggregate": ([str(OBJECTS), "--opt", "sums_windows.fnn=avg"],
                         "--opt `sums_windows.fnn=avg`: table `sums_windows` reads no option "
                         "`fnn` (did you mean `fn`?); it reads advance, fn, groups, size"),
    "stream-bsort": ([str(OBJECTS), "--opt", "order_held.slak=3"],
                     "--opt `order_held.slak=3`: table `order_held` reads no option `slak` "
                     "(did you mean `slack`?); it reads slack"),
    "stream-join": ([str(OBJECTS), "--opt", "pairs_kept.caps=9"],
                    "--opt `pairs_kept.caps=9`: table `pairs_kept` reads no option `caps` (did "
                    "you mean `cap`?); it reads cap, size"),
    "stream-resample": ([str(OBJECTS), "--opt", "steps_kept.sise=9"],
                        "--opt `steps_kept.sise=9`: table `steps_kept` reads no option `sise` "
                        "(did you mean `size`?); it reads cap, size"),
    "synthetic-source": ([str(ROUTER), "--opt", "rx.rat=5"],
                         "--opt `rx.rat=5`: source `rx` (kind=synth) reads no option `rat` "
                         f"(did you mean `rate`?); it reads {SYNTH}"),
    # a key of another kind: refused as the process, which knows the kind, refuses it
    "synthetic-source-given-a-path": (
        [str(ROUTER), "--opt", "rx.path=in.pcap"],
        "--opt `rx.path=in.pcap`: source `rx` (kind=synth) reads no option `path`; it reads "
        f"{SYNTH}; `path` is read by a source of kind=pcap"),
    "capture-source": ([str(ROUTER), "--input", str(TLS), "--opt", "rx.sizes=64:1"],
                       "--opt `rx.sizes=64:1`: source `rx` (kind=pcap) reads no option `sizes`; "
                       f"it reads {PCAP}; `sizes` is read by a source of kind=synth"),
    # the user's kind= sets the keys, as in the processes (the last given wins)
    "source-made-a-capture-by-hand": (
        [str(ROUTER), "--opt", "rx.kind=pcap", "--opt", "rx.prefixes=p.txt"],
        "--opt `rx.prefixes=p.txt`: source `rx` (kind=pcap) reads no option `prefixes`; it "
        f"reads {PCAP}; `prefixes` is read by a source of kind=synth"),
    "udp-source": ([str(EXAMPLES / "kvs.py"), "--udp", "0", "--opt", "rx.sizes=64:1"],
                   "--opt `rx.sizes=64:1`: source `rx` (kind=udp) reads no option `sizes`; it "
                   f"reads {SOURCE}; `sizes` is read by a source of kind=synth"),
    "port-source": ([str(ROUTER), "--duration", "1", "--port", "dpdk:net_null0", "--opt",
                     "rx.prot=x"],
                    "--opt `rx.prot=x`: source `rx` (kind=dpdk) reads no option `prot` (did you "
                    f"mean `port`?); it reads {PORT}"),
    "capture-sink": ([str(ROUTER), "--opt", "tx.paht=out.pcap"],
                     "--opt `tx.paht=out.pcap`: sink `tx` (no kind=) reads no option `paht` "
                     "(did you mean `path`?); it reads kind, path"),
    "port-sink": ([str(ROUTER), "--duration", "1", "--port", "afpacket:lo", "--opt",
                   "tx.path=out.pcap"],
                  "--opt `tx.path=out.pcap`: sink `tx` (kind=afpacket) reads no option `path`; "
                  "it reads kind, port; `path` is read by a sink of no kind= or kind=pcap or "
                  "kind=udp"),
    "xdp-source-on-an-interface": (
        [str(EXAMPLES / "ttl_pipeline.py"), "--set", "rx.device=xdp", "--iface", "lo",
         "--opt", "rx.count=5"],
        "--opt `rx.count=5`: source `rx` (on xdp with --iface) reads no option `count`; it "
        "reads duration_ns"),
}


@pytest.mark.parametrize("case", list(MISSPELT))
def test_a_key_its_object_does_not_read_is_one_error_before_anything_is_built(
        case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv, want = MISSPELT[case]
    assert _refusal(argv, capsys, monkeypatch) == want


def test_the_first_bad_key_of_several_is_the_one_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # (a right key first, then two wrong ones: the first wrong one is said)
    said = _refusal([str(ROUTER), "--opt", "routes4.nports=3", "--opt", "tx.knd=pcap",
                     "--opt", "rx.rat=1"], capsys, monkeypatch)
    assert said.startswith("--opt `tx.knd=pcap`: sink `tx` (no kind=) reads no option `knd` "
                           "(did you mean `kind`?)"), said


def _run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    rc = main(["run", *argv, "--json"])
    out, err = capsys.readouterr()
    return rc, json.loads(out) if out.strip() else {}, err


def test_a_users_own_table_without_keys_is_refused_by_its_process(
        capsys: pytest.CaptureFixture[str]) -> None:
    # `mine` declares no keys: its device process, which asked for `slack`, refuses
    rc, s, err = _run_json([str(OBJECTS), "--count", "20", "--opt", "mine.slak=3"], capsys)
    assert rc == 1 and s["errors"] == [
        "--opt mine.slak=3: table mine (on host) takes no option `slak` (it takes slack)"], err


def test_the_keys_objects_read_run(capsys: pytest.CaptureFixture[str]) -> None:
    rc, s, err = _run_json([str(OBJECTS), "--count", "20", "--opt", "mine.slack=3", "--opt",
                            "order_held.slack=3", "--opt", "sums_windows.groups=8", "--opt",
                            "pairs_kept.cap=8", "--opt", "steps_kept.size=10", "--opt",
                            "rx.sizes=64:1", "--opt", "tx.kind=pcap"], capsys)
    assert rc == 0 and not s["errors"], (s.get("errors"), err)
    assert s["sources"]["rx"]["packets"] == 20


# (what, argv of `offlow run`, the object, a key no kind reads): each run with the
# up-front check taken out, so that the object's process refuses the key, listing what
# its code asked for
ASKED = {
    "lpm4-table-sent-to-the-nic": ([str(ROUTER)], "routes4"),
    "lpm6-table-on-the-host": ([str(ROUTER), "--set", "route.device=host"], "routes6"),
    "kv-store": ([str(EXAMPLES / "kvs.py")], "store"),
    "kv-cache": ([str(EXAMPLES / "kvs_cache.py")], "cache"),
    "cbc-keys": ([str(EXAMPLES / "crypto.py")], "keys"),
    "tsp-climbers": ([str(EXAMPLES / "tsp.py"), "--opt", f"cities.path={KROA100}"], "cities"),
    "tsp-climbers-sent": ([str(ROOT / "tests" / "programs" / "climbers_sent.py"), "--opt",
                           f"cities.path={KROA100}"], "cities"),
    "balancer": ([str(ROOT / "tests" / "programs" / "balanced.py")], "mix_balance"),
    "stream-aggregate": ([str(OBJECTS)], "sums_windows"),
    "stream-bsort": ([str(OBJECTS)], "order_held"),
    "stream-join": ([str(OBJECTS)], "pairs_kept"),
    "stream-resample": ([str(OBJECTS)], "steps_kept"),
    "synthetic-source": ([str(ROUTER)], "rx"),
    "capture-source": ([str(ROUTER), "--input", str(TLS)], "rx"),
    "udp-source": ([str(EXAMPLES / "kvs.py"), "--udp", "0", "--duration", "1"], "rx"),
    "udp-sink": ([str(EXAMPLES / "kvs.py"), "--udp", "0", "--duration", "1"], "tx"),
    "counting-sink": ([str(ROUTER)], "tx"),
    "capture-sink": ([str(ROUTER), "--opt", "tx.kind=pcap"], "tx"),
}


@pytest.mark.parametrize("case", list(ASKED))
def test_the_declared_keys_are_the_keys_the_c_code_asks_for(
        case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv, name = ASKED[case]
    declared: dict[str, optkeys.Reads] = {}
    # (the balancer's own check of its values leaves its keys to this one: until
    # 2026-11-28 it refused an unknown key too, a user's never reaching it)
    monkeypatch.setattr(optkeys, "check", lambda _user, reads: declared.update(reads))
    rc, s, err = _run_json([*argv, "--count", "20", "--opt", f"{name}.zz_no_such_key=1"],
                           capsys)
    said = s.get("errors", [])
    assert rc == 1 and len(said) == 1, (said, err)
    m = re.fullmatch(rf"--opt {name}\.zz_no_such_key=1: \w+ {name} \(on [\w:]+\) takes no "
                     r"option `zz_no_such_key` \(it takes (.*)\)", said[0])
    assert m, said
    assert sorted(declared[name].keys) == m.group(1).split(", ")


# (what, argv of `offlow run`, the one error): a kind the object's process has not
UNKNOWN_KIND = {
    "source": ([str(TTL), "--opt", "rx.kind=bogus"],
               "--opt `rx.kind=bogus`: source `rx` has no kind `bogus`; its kinds: afpacket, "
               "pcap, synth, udp"),
    "sink": ([str(TTL), "--opt", "tx.kind=bogus"],
             "--opt `tx.kind=bogus`: sink `tx` has no kind `bogus`; its kinds: afpacket, pcap, "
             "udp"),
    "misspelt-source-kind": ([str(ROUTER), "--opt", "rx.kind=pcpa"],
                             "--opt `rx.kind=pcpa`: source `rx` has no kind `pcpa` (did you "
                             "mean `pcap`?); its kinds: afpacket, pcap, synth, udp"),
    "sink-given-no-kind-by-an-empty-value": (
        [str(ROUTER), "--opt", "tx.kind="],
        "--opt `tx.kind=`: sink `tx` has no kind ``; its kinds: afpacket, pcap, udp"),
    # a source kind only some processes have: a send-port table adds `lso` to its program
    "misspelt-send-port-kind": ([str(LSO), "--opt", "sends.kind=lsso"],
                                "--opt `sends.kind=lsso`: source `sends` has no kind `lsso` "
                                "(did you mean `lso`?); its kinds: afpacket, lso, pcap, synth, "
                                "udp"),
    "send-port-kind-in-a-program-without-one": (
        [str(ROUTER), "--opt", "rx.kind=lso"],
        "--opt `rx.kind=lso`: source `rx` has no kind `lso`; its kinds: afpacket, pcap, "
        "synth, udp"),
    "sink-given-a-source-only-kind": (
        [str(LSO), "--opt", "tx.kind=lso"],
        "--opt `tx.kind=lso`: sink `tx` has no kind `lso`; its kinds: afpacket, pcap, udp"),
    # a port library's kind: linked only when a --port names it
    "port-kind-without-its-port": (
        [str(ROUTER), "--opt", "rx.kind=dpdk"],
        "--opt `rx.kind=dpdk`: source `rx` has no kind `dpdk`; its kinds: afpacket, pcap, "
        "synth, udp; `dpdk` is a port's kind: give --port rx=dpdk:ARGS"),
    "port-kind-on-xdp": (
        [str(TTL), "--set", "rx.device=xdp", "--duration", "1", "--port", "tx=dpdk:net_null0",
         "--opt", "rx.kind=dpdk"],
        "--opt `rx.kind=dpdk`: source `rx` on xdp has no kind `dpdk`; its kinds: afpacket, "
        "pcap, synth, udp; `dpdk` is a port library's kind, which an xdp device's process "
        "has not"),
    # a kind the process has, whose socket only --udp opens (the sink's process said
    # "sink tx: kind=udp needs --udp-fd" once started, before 2026-11-28)
    "udp-without-its-socket": (
        [str(TTL), "--opt", "tx.kind=udp"],
        "--opt `tx.kind=udp`: a udp source or sink takes the run's UDP socket, which only "
        "--udp PORT opens (it puts every source and sink of the program on it)"),
    # (the first of several: a wrong kind overridden by a right one is still refused)
    "wrong-then-right": ([str(ROUTER), "--opt", "rx.kind=bogus", "--opt", "rx.kind=pcap"],
                         "--opt `rx.kind=bogus`: source `rx` has no kind `bogus`; its kinds: "
                         "afpacket, pcap, synth, udp"),
}


@pytest.mark.parametrize("case", list(UNKNOWN_KIND))
def test_a_kind_its_process_has_not_is_one_error_before_anything_is_built(
        case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv, want = UNKNOWN_KIND[case]
    assert _refusal(argv, capsys, monkeypatch) == want


@needs_dpdk
def test_a_port_librarys_kind_is_taken_where_a_port_links_it(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # tx's --port links dpdk into the program: rx may take it too (the checks pass and
    # the program's code is generated)
    def generated(*_a: object, **_k: object) -> None:
        raise _Started("the program's code was generated")

    monkeypatch.setattr(offlow.build, "generate", generated)
    with pytest.raises(_Started):
        main(["run", str(ROUTER), "--duration", "1", "--port", "tx=dpdk:net_null0", "--opt",
              "rx.kind=dpdk", "--opt", "rx.port=net_null1"])
    assert capsys.readouterr().err.count("offlow: error") == 0


@pytest.fixture
def send_port(tmp_path: Path) -> str:
    """The path of a send port's file (what examples/lso.py's table opens before its
    source: the port must be real for the process to reach the source)."""
    port = SendPort.create(tmp_path / "port")
    return str(port.path)


# (what, argv of `offlow run`, the source or sink; {port} is a send port's file): each
# run with the up-front kind check taken out, so that the object's process refuses a kind
# none has, listing those it has
KINDS_ASKED = {
    "source-on-the-nic": ([str(ROUTER)], "rx"),
    "sink-on-the-host": ([str(ROUTER)], "tx"),
    "source-on-xdp": ([str(TTL), "--set", "rx.device=xdp"], "rx"),
    "source-beside-a-send-port": ([str(LSO), "--opt", "port.path={port}"], "sends"),
    "sink-beside-a-send-port": ([str(LSO), "--opt", "port.path={port}"], "tx"),
    "source-beside-a-port-library": ([str(ROUTER), "--duration", "1", "--port",
                                      "tx=dpdk:net_null0"], "rx"),
    "sink-beside-a-port-library": ([str(ROUTER), "--duration", "1", "--port",
                                    "rx=dpdk:net_null0"], "tx"),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=needs_dpdk) if "port-library" in c
                                  else c for c in KINDS_ASKED])
def test_the_kinds_known_are_the_kinds_the_c_code_takes(
        case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    argv, name = KINDS_ASKED[case]
    if any("{port}" in a for a in argv):
        port = request.getfixturevalue("send_port")
        argv = [a.replace("{port}", port) for a in argv]
    known: dict[str, optkeys.Kinds] = {}
    monkeypatch.setattr(optkeys, "check_kind", lambda _user, kinds: known.update(kinds))
    rc, s, err = _run_json([*argv, "--count", "20", "--opt", f"{name}.kind=zz_no_such_kind"],
                           capsys)
    said = s.get("errors", [])
    assert rc == 1 and len(said) == 1, (said, err)
    m = re.fullmatch(rf"(source|sink) {name}: unknown kind `zz_no_such_kind` \((.*)\)", said[0])
    assert m and m.group(1) == known[name].what, said
    assert sorted(known[name].kinds) == sorted(m.group(2).split(", "))
