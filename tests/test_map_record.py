"""A shared map whose value is a record (dsl SharedMap value=((field, type), ...)): a
user's flow table (tests/programs/flow_records.py: a 13-byte 5-tuple key with address
fields, a 33-byte record of frames, bytes, TTL sum, first, last and longest length, last
IP id and a SYN flag, filled by a helper for a new flow, comments in the body) run over
a capture on host, nic and xdp, its table report equal to dpkt's count of the same
flows; the record read, set, walked and deleted with `offlow ctl` while it runs; bad
declarations and bad record text one error each; a body taking the record's value as
another type refused; a record member bumped plainly on xdp said to lose updates."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dpkt
import jsonschema
import pytest

from offlow import Element, OfflowError, Port, Program, SharedMap, Sink, Source
from offlow.build import build, plan_program
from offlow.codegen.bpf import generate_xdp
from offlow.codegen.c import gen_common
from offlow.dsl.loader import load_program
from offlow.explain import explain
from offlow.layout import describe, differences
from offlow.mapctl import Layout, format_value, parse_value
from offlow.races import lost_updates
from offlow.report import format_summary, summarize
from offlow.runner import RunOptions, run
from offlow.session import attach
from offlow.targets import remote, xdp
from tests.e2e import ROOT, TLS, offlow_cli, read_frames, window_in
from tests.programs.flow_records import RECORD, TUPLE, records_program
from tests.remote_served import Servers

RECORDS = ROOT / "tests" / "programs" / "flow_records.py"
WHY_NOT = xdp.TARGET.unusable()
needs_bpf = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")
NAMES = [f for f, _ in RECORD]
SCHEMA = json.loads((ROOT / "docs" / "run-result.schema.json").read_text())


@pytest.mark.parametrize(("value", "error"), [
    ((("n", "uint64_t"), ("n", "uint8_t")), r"^shared map `m`: value field `n` is declared "
                                            r"twice$"),
    ((("2n", "uint64_t"),),
     r"^shared map `m`: value field '2n' is not a C identifier \(ASCII, not a C keyword\)$"),
    ((("n", "double"),), r"^shared map `m`: value field `n` has type 'double'; a value field "
                         r"is one of uint8_t, "),
    ((), r"^shared map `m`: value must be \(\(field, type\), \.\.\.\), one pair or more"),
    ((("n",),), r"^shared map `m`: value must be \(\(field, type\), \.\.\.\)"),
    (tuple((f"f{i}", "uint64_t") for i in range(33)),
     r"^shared map `m`: its value is 264 bytes, more than the 256 a map value may have$"),
    ({"n": "uint64_t"}, r"^shared map `m`: value type \{'n': 'uint64_t'\}; a value is one of "
                        r"uint8_t, .*, or a record \(\(field, type\), \.\.\.\)$"),
    ((("n", ["uint8_t"]),), r"^shared map `m`: value field `n` has type \['uint8_t'\]; a "
                            r"value field is one of "),
], ids=["twice", "bad-name", "float-field", "empty", "not-a-pair", "too-long", "a-dict",
        "a-list-type"])
def test_a_bad_record_is_one_error(value: Any, error: str) -> None:
    with pytest.raises(OfflowError, match=error):
        SharedMap("m", TUPLE, value, 4)


def test_a_record_is_one_packed_struct_of_its_fields_on_every_target() -> None:
    m = SharedMap("flows", TUPLE, RECORD, 8)
    assert (m.value_size, m.value_ctype) == (33, "struct flows_value")
    struct = ("struct flows_value {\n    uint64_t packets;\n    uint64_t bytes;\n"
              "    uint64_t ttl_sum;\n    uint16_t first_len;\n    uint16_t last_len;\n"
              "    uint16_t max_len;\n    uint16_t last_id;\n    uint8_t syn;\n"
              "} __attribute__((packed));\n_Static_assert(sizeof(struct flows_value) == 33, "
              "\"struct flows_value is packed\");")
    common = gen_common(plan_program(load_program(RECORDS, [])))
    assert struct in common
    assert "sizeof(struct flows_key), sizeof(struct flows_value), 4096u" in common
    assert ('(*m)->layout = "src:ipv4,dst:ipv4,sport:uint16_t,dport:uint16_t,proto:uint8_t;'
            'packets:uint64_t,bytes:uint64_t,ttl_sum:uint64_t,first_len:uint16_t,'
            'last_len:uint16_t,max_len:uint16_t,last_id:uint16_t,syn:uint8_t"; '
            "(*m)->ctl_type = 'r';") in common
    plan = plan_program(load_program(RECORDS, ["edge.device=xdp"]))
    src = generate_xdp(plan, "xdp")
    assert struct in src
    assert "OFL_MAP_BPF_MAPS(ofl_flows, struct flows_key, struct flows_value, 4096);" in src
    assert ("  flows: struct ofl_map in xdp memory; a hash map of at most 4096 keys (struct "
            "flows_key, 13 B) to struct flows_value (33 B: packets uint64_t, bytes uint64_t, "
            "ttl_sum uint64_t, first_len uint16_t, last_len uint16_t, max_len uint16_t, "
            "last_id uint16_t, syn uint8_t), empty at start;") in explain(plan)


class Peek(Element):
    """A body given per test: what it does with the record map's lookup."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    tables = ("tally",)
    body = ""


def _peek(body: str, helpers: str = "", device: str = "nic") -> Program:
    p = Program("peek")
    e = Peek("peek", tally=SharedMap("per_len", (("len", "uint16_t"),), (
        ("hits", "uint64_t"), ("last", "uint8_t"), ("peer", "ipv4")), 64))
    e.body, e.helpers = body, helpers
    src, out = Source("rx"), Sink("tx")
    src >> e >> out
    p.segment("edge", [src, e, out], device=device, cores=[0])
    return p


KEY = "struct per_len_key k = { .len = (uint16_t)pkt->len };\n"


@pytest.mark.parametrize(("body", "helpers"), [
    (KEY + "struct per_len_value *r = ofl_map_lookup(tally, &k);\n"
     "if (r) { r->hits++; r->last = 1; }  /* its own struct */", ""),
    (KEY + "hit_t *r = (hit_t *)ofl_map_lookup(tally, &k);\nif (r) r->hits += 2;",
     "typedef struct per_len_value hit_t;  /* a typedef of it */"),
    (KEY + "const struct per_len_value *r = ofl_map_lookup(tally, &k);\n"
     "if (r && r->hits) EMIT(out);", ""),
    (KEY + "struct per_len_value v = { .hits = 1, .last = 0 };\n"
     "(void)ofl_map_update(tally, &k, &v);", ""),
    (KEY + "uint8_t *raw = ofl_map_lookup(tally, &k);   // a byte view\nif (raw) raw[0]++;", ""),
], ids=["struct-pointer", "typedef", "const", "update-struct", "byte-view"])
def test_a_record_taken_as_its_struct_is_accepted(body: str, helpers: str) -> None:
    plan_program(_peek(body, helpers))


@pytest.mark.parametrize(("body", "error"), [
    (KEY + "uint64_t *n = ofl_map_lookup(tally, &k);\nif (n) (*n)++;",
     r"map `per_len` holds `struct per_len_value` values \(13 bytes\), but the body takes "
     r"ofl_map_lookup\(tally, \.\.\.\) as `uint64_t \*`; take it as `struct per_len_value \*` "
     r"\(or `const struct per_len_value \*`, `void \*`\)$"),
    (KEY + "struct per_len_key *n = ofl_map_lookup(tally, &k);\nif (n) n->len++;",
     r"takes ofl_map_lookup\(tally, \.\.\.\) as `struct per_len_key \*`"),
    (KEY + "uint64_t one = 1;\n(void)ofl_map_update(tally, &k, &one);",
     r"map `per_len` holds `struct per_len_value` values \(13 bytes\), but the body passes "
     r"ofl_map_update\(tally, \.\.\., &one\) a `uint64_t` \(8 bytes\); pass the address of a "
     r"`struct per_len_value`$"),
    (KEY + "struct tally_value v = {0};\n(void)ofl_map_update(tally, &k, &v);",
     r"`struct tally_value`: the value of map `per_len` \(this body's `tally`\) is `struct "
     r"per_len_value`, named after the map$"),
    (KEY + "struct per_len_value v = { .hits = 1, .peer = pkt->len };\n"
     "(void)ofl_map_update(tally, &k, &v);",
     r"`pkt->len` sets field `peer` of map `per_len`'s value, an `ipv4` address \(its 4 bytes "
     r"as on the wire, a `uint8_t peer\[4\]`\), from one number: C sets its first byte alone\. "
     r"Copy the address's bytes, `memcpy\(v\.peer, pkt->data \+ state->l3_off \+ 12, 4\)`, or "
     r"declare the field an integer type to hold a number$"),
], ids=["uint64-pointer", "key-struct-pointer", "update-scalar", "named-after-local",
        "address-from-a-number"])
def test_a_record_taken_as_another_type_is_one_error(body: str, error: str) -> None:
    with pytest.raises(OfflowError, match=error):
        plan_program(_peek(body))


def test_on_xdp_a_record_member_bumped_plainly_is_said_to_lose_updates() -> None:
    body = KEY + ("struct per_len_value *r = ofl_map_lookup(tally, &k);\n"
                  "if (r) r->hits++;   /* plain */")
    [w] = lost_updates(plan_program(_peek(body, device="xdp")))
    assert w.startswith("table `per_len`: `peek` (body line 3) updates it with a plain "
                        "read-modify-write (`+=`, `++`, `|=`, ...; `peek` through its "
                        "pointer `r`) on several CPUs at once (xdp: every CPU that "
                        "receives): updates made at the same time are lost; its value is "
                        "a record, whose members are packed and take no atomic add"), w
    assert lost_updates(plan_program(_peek(body, device="nic"))) == []
    stored = KEY + ("struct per_len_value *r = ofl_map_lookup(tally, &k);\n"
                    "if (r) r->last = 1;   /* a store, no read */")
    assert lost_updates(plan_program(_peek(stored, device="xdp"))) == []


def dpkt_flows(capture: Path, mtu: int) -> tuple[list[list[Any]], int]:
    """The program's table counted from the capture by dpkt: each flow's key and record
    (sorted by key: addresses by their bytes) and the IPv4 frames counted."""
    flows: dict[tuple[bytes, bytes, int, int, int], list[int]] = {}
    seen = 0
    for f in read_frames(capture):
        eth = dpkt.ethernet.Ethernet(f)
        if len(f) > mtu or not isinstance(eth.data, dpkt.ip.IP):
            continue
        seen += 1
        ip = eth.data
        sport = dport = syn = 0
        l4 = ip.data
        if isinstance(l4, dpkt.tcp.TCP | dpkt.udp.UDP) and ip.offset == 0:
            sport, dport = l4.sport, l4.dport
            syn = int(isinstance(l4, dpkt.tcp.TCP) and bool(l4.flags & dpkt.tcp.TH_SYN))
        key = (ip.src, ip.dst, sport, dport, ip.p)
        r = flows.get(key)
        if r is None:
            flows[key] = [1, len(f), ip.ttl, len(f), len(f), len(f), ip.id, syn]
        else:
            r[0] += 1
            r[1] += len(f)
            r[2] += ip.ttl
            r[4] = len(f)
            r[5] = max(r[5], len(f))
            r[6] = ip.id
            r[7] |= syn
    return [[[socket.inet_ntoa(k[0]), socket.inet_ntoa(k[1]), *k[2:]], v]
            for k, v in sorted(flows.items())], seen


@pytest.mark.parametrize("device", ["host", "nic", pytest.param("xdp", marks=needs_bpf)])
def test_the_flow_records_are_dpkts_count(device: str, tmp_path: Path) -> None:
    b = build(load_program(RECORDS, [f"edge.device={device}"]))
    res = run(b, RunOptions(input=TLS, output=tmp_path / "out.pcap", timeout=60))
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    items, seen = dpkt_flows(TLS, s["mtu"])
    t = s["tables"]["flows"]
    assert s["elements"]["book"]["in"] == seen > 1000
    assert len(items) > 100 and any(v[7] for _, v in items)
    assert (t["key"], t["value"], t["items"], t["full"]) == (
        [f for f, _ in TUPLE], NAMES, len(items), 0)
    assert t["pairs"] == items
    jsonschema.validate(s["tables"], SCHEMA["properties"]["tables"])   # as --json documents
    lines = format_summary(s).splitlines()
    head = lines.index(f"table flows: a hash map, {len(items)} of 4096 entries, 0 updates "
                       "refused (full)")
    assert lines[head + 1].split() == ["src", "dst", "sport", "dport", "proto", *NAMES]
    assert [r.split() for r in lines[head + 2:head + 2 + len(items)]] == [
        [*map(str, k), *map(str, v)] for k, v in items]


@pytest.mark.skipif(remote.TARGET.unusable() is not None,
                    reason=f"remote: {remote.TARGET.unusable()}")
def test_on_a_remote_device_the_records_are_dpkts_count(
        tmp_path: Path, served: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same program on `remote:m`: its map lives in the device's process, its report
    comes back over the link."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    (port,) = served.ports(1)
    b = build(load_program(RECORDS, ["edge.device=remote:m"]))
    res = run(b, RunOptions(input=TLS, output=tmp_path / "out.pcap", timeout=60,
                            remotes=(f"m=127.0.0.1:{port}",), secret_file=served.secret))
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    items, _ = dpkt_flows(TLS, s["mtu"])
    assert (s["tables"]["flows"]["pairs"], s["tables"]["flows"]["value"]) == (items, NAMES)


LAYOUT = Layout.parse("src:ipv4,proto:uint8_t;packets:uint64_t,peer:ipv4,syn:uint8_t")


def test_a_record_is_written_and_printed_by_its_field_names() -> None:
    assert LAYOUT.record == (("packets", "uint64_t"), ("peer", "ipv4"), ("syn", "uint8_t"))
    raw = parse_value(LAYOUT, "syn=1, packets=0x10,peer=192.0.2.7")
    assert raw == (16).to_bytes(8, "little") + bytes([192, 0, 2, 7, 1])
    assert format_value(LAYOUT, {"packets": 16, "peer": "192.0.2.7", "syn": 1}) == (
        "packets=16,peer=192.0.2.7,syn=1")


@pytest.mark.parametrize(("text", "error"), [
    ("packets=3,peer=192.0.2.7", r"^value `packets=3,peer=192\.0\.2\.7`: no value for syn$"),
    ("packets=3,peer=192.0.2.7,syn=1,bytes=2",
     r"the map's record value has no field `bytes`; fields: packets, peer, syn$"),
    ("packets=3,packets=4,peer=192.0.2.7,syn=1", r"field `packets` given twice$"),
    ("packets=3,peer=192.0.2.7,syn=256", r"field `syn` 256 does not fit uint8_t \(0\.\.255\)$"),
    ("7", r"^value `7`: want FIELD=VALUE,\.\.\. with fields packets, peer, syn$"),
], ids=["missing", "unknown", "twice", "too-big", "a-number"])
def test_bad_record_text_is_one_error(text: str, error: str) -> None:
    with pytest.raises(OfflowError, match=error):
        parse_value(LAYOUT, text)


def _ctl(window: str, *args: str) -> subprocess.CompletedProcess[str]:
    return offlow_cli("ctl", window, "map", "flows", *args)


OWN = "src=198.51.100.9,dst=203.0.113.1,sport=7,dport=9,proto=17"
MINE = ("packets=3,bytes=1500,ttl_sum=192,first_len=500,last_len=400,max_len=600,"
        "last_id=65535,syn=1")


@pytest.mark.parametrize("device", ["host", pytest.param("xdp", marks=needs_bpf)])
def test_offlow_ctl_sets_gets_walks_and_deletes_a_record(device: str, tmp_path: Path) -> None:
    out, wfile = tmp_path / "out.pcap", tmp_path / "w.json"
    proc = subprocess.Popen([sys.executable, "-m", "offlow.cli", "run", str(RECORDS), "--set",
                             f"edge.device={device}", "--input", str(TLS), "--output",
                             str(out), "--loops", "1000000", "--rate", "20000",
                             "--window-file", str(wfile)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        window = window_in(proc, wfile, within=240)
        with attach(window) as prog:   # (one client at a time: this one, then offlow ctl's)
            m = prog.tables["flows"].map()
            end = time.monotonic() + 60   # (the core learns the capture's flows)
            while len(dict(m.items())) < 100 and time.monotonic() < end:
                time.sleep(0.05)
            learned = dict(m.items())
            assert len(learned) >= 100 and all(
                set(v) == set(NAMES) and v["packets"] >= 1 for v in learned.values())
            for value, error in [(MINE.replace(",syn=1", ""), "no value for syn"),
                                 (MINE + ",rtt=3", "has no field `rtt`"), ("5", "want FIELD=")]:
                with pytest.raises(OfflowError, match=error):
                    m.set(OWN, value)
            assert m.get(OWN) is None   # (the bad ones changed nothing)
        assert _ctl(window, "set", OWN, MINE).returncode == 0
        got = _ctl(window, "get", OWN)
        assert (got.returncode, got.stdout) == (0, MINE + "\n"), got.stderr
        listed = _ctl(window, "list").stdout.splitlines()
        assert f"{OWN} {MINE}" in listed and len(listed) > len(learned), listed[:3]
        bad = _ctl(window, "set", OWN, MINE + ",rtt=3")
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
        assert "the map's record value has no field `rtt`" in bad.stderr, bad.stderr
        info = _ctl(window, "info").stdout
        assert info.startswith("kind map, type r, size 33, "), info
        assert _ctl(window, "delete", OWN).returncode == 0
        gone = _ctl(window, "get", OWN)
        assert gone.returncode == 2 and "has no key" in gone.stderr, gone.stderr
        proc.send_signal(signal.SIGINT)   # stops as Ctrl-C does: the run's counts kept
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err


def test_a_reload_that_changes_a_records_fields_is_refused() -> None:
    """A map keeps its entries across `offlow reload`: new code that reads them as
    another record (a field added: 35 bytes where each slot holds 33) is a layout
    difference, refused as any other; the same record with other code is not."""
    running = describe(plan_program(records_program(4096)))
    wider = records_program(4096, (*RECORD, ("mss", "uint16_t")))
    assert differences(running, describe(plan_program(records_program(4096)))) == []
    [said] = differences(running, describe(plan_program(wider)))
    assert said.startswith("table `flows`: running struct ofl_map[1] in nic (ofl_mapopen_flows), "
                           "map src:ipv4,dst:ipv4,sport:uint16_t,dport:uint16_t,proto:uint8_t;"
                           "packets:uint64_t,"), said
    assert said.endswith("last_id:uint16_t,syn:uint8_t,mss:uint16_t"), said
