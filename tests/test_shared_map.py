"""Shared hash maps (dsl SharedMap): bad declarations refused with one error before
anything runs; a map on one core of one device; tests/programs/flow_counts.py (a user's
13-byte 5-tuple key) counting the frames per flow of a capture, its table report equal
to a Python count of the capture (a TCP reset forgetting its flow), with room for
every flow and with 4 entries (the same 4 flows kept and the same `full`), on host, nic
and xdp (a BPF hash map walked through its fd by the host side)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from offlow import Handler, OfflowError, Program, SharedMap, Sink, Source
from offlow.build import build, plan_program
from offlow.codegen.bpf import generate_xdp
from offlow.codegen.c import gen_common
from offlow.dsl.loader import load_program
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.explain import explain
from offlow.metrics import exposition
from offlow.report import format_summary, summarize
from offlow.runner import RunOptions, run
from offlow.targets import xdp
from tests.e2e import QUIC, ROOT, TLS, read_frames
from tests.programs.flow_counts import FIVE_TUPLE, FlowCount, flows_program

FLOWS = ROOT / "tests" / "programs" / "flow_counts.py"
WHY_NOT = xdp.TARGET.unusable()
needs_bpf = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"key": (("a", "uint32_t"), ("b", "float"))},
     r"^shared map `m`: key field `b` has type 'float'; a key field is one of uint8_t, "),
    ({"key": (("a", "uint32_t"), ("a", "uint8_t"))},
     r"^shared map `m`: key field `a` is declared twice$"),
    ({"key": ()}, r"^shared map `m`: key must be \(\(field, type\), \.\.\.\), one pair or more"),
    ({"key": (("2x", "uint8_t"),)},
     r"^shared map `m`: key field '2x' is not a C identifier \(ASCII, not a C keyword\)$"),
    ({"key": tuple((f"f{i}", "uint64_t") for i in range(33))},
     r"^shared map `m`: its key is 264 bytes, more than the 256 a map key may have$"),
    ({"value": "double"}, r"^shared map `m`: value type 'double'; a value is one of "),
    ({"entries": 0}, r"^shared map `m`: entries=0; a map holds 1 to 16777216 entries$"),
    ({"entries": -3}, r"^shared map `m`: entries=-3; a map holds 1 to 16777216 entries$"),
    ({"entries": (1 << 24) + 1}, r"^shared map `m`: entries=16777217; a map holds 1 to "),
    ({"entries": "8"}, r"^shared map `m`: entries='8'; a map holds 1 to "),
], ids=["float-field", "twice", "no-key", "bad-name", "key-too-long", "double-value",
        "no-entries", "negative", "too-many", "string"])
def test_a_bad_declaration_is_one_error(kwargs: dict[str, Any], error: str) -> None:
    args: dict[str, Any] = {"key": FIVE_TUPLE, "value": "uint64_t", "entries": 4, **kwargs}
    with pytest.raises(OfflowError, match=error):
        SharedMap("m", **args)


def test_its_key_is_one_packed_struct_of_the_declared_fields() -> None:
    assert SharedMap("flows", FIVE_TUPLE).key_size == 13
    plan = plan_program(flows_program(4))
    common = gen_common(plan)
    assert ("struct flows_key {\n    uint32_t src;\n    uint32_t dst;\n    uint16_t sport;\n"
            "    uint16_t dport;\n    uint8_t proto;\n} __attribute__((packed));") in common
    assert "sizeof(struct flows_key), sizeof(uint64_t), 4u" in common


@pytest.mark.parametrize(("sets", "error"), [
    (["edge.cores=0,1"], r"^table `flows` is one core's state \(a hash map changed without "
                         r"locks\) but `count` in segment `edge` \(cores 0,1\) would run on 2 "
                         r"cores; place its segment on one core$"),
], ids=["two-cores"])
def test_a_map_lives_on_one_core(sets: list[str], error: str) -> None:
    with pytest.raises(OfflowError, match=error):
        plan_program(load_program(FLOWS, sets))


def test_a_map_used_on_two_devices_is_one_error() -> None:
    flows = SharedMap("flows", FIVE_TUPLE, "uint64_t", 4)
    q = Program("two")
    src, out = Source("rx"), Sink("tx")
    a, b = FlowCount("a", seen=flows), FlowCount("b", seen=flows)
    eth, v4, other = ParseEth("eth"), CheckIPv4("v4"), Discard("other")
    src >> eth
    eth["ipv4"] >> v4 >> a >> b >> out
    eth["ipv6"] >> other
    eth["other"] >> other
    q.segment("near", [src, eth, v4, a, other], device="nic", cores=[0])
    q.segment("far", [b, out], device="host", cores=[1])
    with pytest.raises(OfflowError, match=r"^table `flows` \(struct ofl_map\) is used on host "
                                          r"and nic; a table object lives in one device's "):
        plan_program(q)


class Census(Handler):
    """Answers with the map's count (it would read the map beside the datapath)."""

    tables = ("seen",)
    body = "REPLY(&seen->count, sizeof seen->count);"


def test_a_handler_naming_a_map_is_one_error() -> None:
    p = flows_program(4)
    p.channel("census", Census("census", seen=SharedMap("flows", FIVE_TUPLE, "uint64_t", 4)))
    with pytest.raises(OfflowError, match=r"^channel `census`: its handler census names shared "
                       r"map `flows`, which its elements change without locks on their one "
                       r"core, and a handler runs on the channel manager's thread beside them"):
        plan_program(p)


def python_flows(capture: Path, mtu: int, entries: int) -> tuple[list[list[Any]], int, int]:
    """The program's table counted by Python from the capture's IPv4 frames (raw
    bytes, not offlow's parser): its items sorted by key, `full`, frames counted."""
    flows: dict[tuple[int, ...], int] = {}
    full = seen = 0
    for f in read_frames(capture):
        if len(f) > mtu or f[12:14] != b"\x08\x00":
            continue
        seen += 1
        ip = f[14:]
        ihl, proto = (ip[0] & 15) * 4, ip[9]
        sport = dport = rst = 0
        l4 = 14 + ihl
        if proto in (6, 17) and ip[6] & 0x1F == 0 and ip[7] == 0 and l4 + 14 <= len(f):
            sport, dport = (int.from_bytes(f[at:at + 2], "big") for at in (l4, l4 + 2))
            rst = proto == 6 and f[l4 + 13] & 4
        key = (int.from_bytes(ip[12:16], "little"), int.from_bytes(ip[16:20], "little"),
               sport, dport, proto)
        if rst:
            flows.pop(key, None)
        elif key in flows:
            flows[key] += 1
        elif len(flows) < entries:
            flows[key] = 1
        else:
            full += 1
    return sorted([list(k), v] for k, v in flows.items()), full, seen


def run_flows(sets: list[str], capture: Path, entries: int, out: Path,
              monkeypatch: pytest.MonkeyPatch, spread: bool = False) -> dict[str, Any]:
    """The program's run summary (FLOWS: its entries; `spread`: on xdp, each frame
    sent from the next CPU), and under "metrics" its stats as Prometheus text."""
    monkeypatch.setenv("FLOWS", str(entries))
    b = build(load_program(FLOWS, sets))
    res = run(b, RunOptions(input=capture, output=out, timeout=60, xdp_spread=spread))
    assert res.ok, res.errors
    return {**summarize(b.plan, res.stats), "metrics": exposition(res.stats, up=False)}


@pytest.mark.parametrize(("device", "capture", "entries"), [
    ("nic", TLS, 4096), ("host", QUIC, 4096), ("nic", QUIC, 4), ("nic", TLS, 4)],
    ids=["nic-tls", "host-quic", "nic-quic-4", "nic-tls-4"])
def test_the_flow_table_is_pythons_count(device: str, capture: Path, entries: int,
                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = run_flows([f"edge.device={device}"], capture, entries, tmp_path / "out.pcap", monkeypatch)
    items, full, seen = python_flows(capture, s["mtu"], entries)
    t = s["tables"]["flows"]
    assert s["elements"]["count"]["in"] == seen > 100
    assert (t["pairs"], t["full"], t["items"], t["entries"]) == (items, full, len(items), entries)
    schema = json.loads((ROOT / "docs" / "run-result.schema.json").read_text())
    jsonschema.validate(s["tables"], schema["properties"]["tables"])   # as --json documents
    assert entries > 4 or (len(items) == 4 and full > 0)
    samples = {(x.name, tuple(sorted(x.labels.items()))): x.value
               for fam in text_string_to_metric_families(s["metrics"]) for x in fam.samples}
    at = (("device", device), ("table", "flows"))
    assert samples[("offlow_table_size", at)] == len(items)
    assert samples[("offlow_table_counter", (("counter", "full"), *at))] == full
    lines = format_summary(s).splitlines()
    head = lines.index(f"table flows: a hash map, {len(items)} of {entries} entries, {full} "
                       "updates refused (full)")
    assert lines[head + 1].split() == ["src", "dst", "sport", "dport", "proto", "value"]
    assert [[int(x) for x in r.split()] for r in lines[head + 2:head + 2 + len(items)]] == [
        [*k, v] for k, v in items]


def test_on_xdp_it_is_a_bpf_hash_map_of_the_same_key() -> None:
    src = generate_xdp(plan_program(load_program(FLOWS, ["edge.device=xdp"])), "xdp")
    assert "#include <offlow/map_bpf.h>" in src
    assert ("struct flows_key {\n    uint32_t src;\n    uint32_t dst;\n    uint16_t sport;\n"
            "    uint16_t dport;\n    uint8_t proto;\n} __attribute__((packed));") in src
    assert "OFL_MAP_BPF_MAPS(ofl_flows, struct flows_key, uint64_t, 4096);" in src
    assert "const struct ofl_map_bpf seen = { &ofl_flows, &ofl_flows_full };" in src
    lines = explain(plan_program(load_program(FLOWS, ["edge.device=xdp"]))).splitlines()
    assert ("  flows: struct ofl_map in xdp memory; a hash map of at most 4096 keys (struct "
            "flows_key, 13 B) to uint64_t, empty at start; built at start-up by the xdp "
            "process; used by count; a BPF hash map (its updates refused for want of room "
            "counted full), walked by the xdp process's host side for the table report") in lines


@needs_bpf
@pytest.mark.parametrize(("capture", "entries", "spread"), [
    (TLS, 4096, False), (QUIC, 4096, True), (TLS, 4, True)],
    ids=["tls", "quic-both-cpus", "tls-4-both-cpus"])
def test_xdp_keeps_the_nics_flow_table(capture: Path, entries: int, spread: bool,
                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same table (keys, values, count, `full`) and the same output on xdp as on
    the NIC; `spread`: the frames sent from both CPUs (their `full` counters summed)."""
    got = {d: run_flows([f"edge.device={d}"], capture, entries, tmp_path / f"{d}.pcap",
                        monkeypatch, spread=spread and d == "xdp") for d in ("nic", "xdp")}
    items, full, _ = python_flows(capture, got["nic"]["mtu"], entries)
    assert got["xdp"]["tables"] == got["nic"]["tables"]
    assert (got["xdp"]["tables"]["flows"]["pairs"], got["xdp"]["tables"]["flows"]["full"]) == (
        items, full)
    assert got["xdp"]["elements"] == got["nic"]["elements"]
    assert (tmp_path / "xdp.pcap").read_bytes() == (tmp_path / "nic.pcap").read_bytes()
