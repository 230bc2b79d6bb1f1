"""Logical queues (Floem's queue construct): every edge from one segment to another is
a channel of one queue, mapped onto `instances` rings per producer core and steered
by a per-packet field. Checked in the IR, in explain and in the C, and end to end:
each key always reaches the same instance (and the consumer core that polls it),
order is kept per instance across channels, each channel moves only its own fields,
enqueue=drop drops and counts on a full ring, more instances than cores work."""

from __future__ import annotations

import runpy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from offlow import OfflowError, Program
from offlow.build import build, compile_program, generate, plan_graph
from offlow.dsl.loader import load_program
from offlow.explain import explain
from offlow.ir import Edge, Graph
from offlow.ir.layout import channel_layouts
from offlow.report import summarize
from offlow.runner import RunOptions, run
from tests.e2e import EXAMPLE, read_frames

PROG = Path(__file__).resolve().parent / "programs" / "logical_queue.py"
KEYS = 16


def program(*settings: str, spin: int = 0) -> Program:
    p = runpy.run_path(str(PROG))["program"](spin=spin)
    assert isinstance(p, Program)
    for s in settings:
        p.apply_setting(s)
    return p


def compiled(*settings: str) -> Graph:
    return compile_program(program(*settings))


# ---- the IR ----------------------------------------------------------------------------

def test_every_edge_between_two_segments_is_a_channel_of_one_queue() -> None:
    (q,) = compiled().queues
    assert (q.name, q.src_segment, q.dst_segment) == ("rx->app", "rx", "app")
    assert [c.edge for c in q.channels] == [Edge("cls", "count", "cnt", "inp"),
                                            Edge("cls", "get", "get", "inp"),
                                            Edge("cls", "put", "put", "inp")]
    # each channel carries only what its own element reads after the queue
    assert [[f.name for f in c.fields] for c in q.channels] == [
        ["key"], ["key", "seq"], ["key", "seq", "val"]]
    assert [c.carries_data for c in q.channels] == [False, True, True]
    assert (q.instances, q.steer, q.enqueue) == (2, "key", "block")
    # the example's IPv4 and IPv6 paths into the host now share one queue
    (ttl,) = compile_program(load_program(EXAMPLE)).queues
    assert len(ttl.channels) == 2


def test_each_channel_has_its_own_entry_layout() -> None:
    (q,) = compiled().queues
    cnt, get, put = channel_layouts(q, 2048)
    assert (cnt.size, cnt.data_cap, cnt.bytes_for(64)) == (16, 0, 16)  # key + length
    # get and put reach the sink, which writes the packet's timestamp: it crosses (8 B)
    assert (get.carries_ts, put.carries_ts, cnt.carries_ts) == (True, True, False)
    assert (get.data_off, get.bytes_for(64)) == (32, 96)
    assert (put.data_off, put.bytes_for(64)) == (40, 104)


def test_mapping_from_the_command_line() -> None:
    (q,) = compiled("rx:app.instances=3", "rx->app.enqueue=drop", "rx:app.steer=seq").queues
    assert (q.instances, q.steer, q.enqueue) == (3, "seq", "drop")
    (q,) = compiled("rx:app.steer=").queues  # explicitly round robin
    assert q.steer == ""
    (q,) = compiled("app.cores=0,1,2,3").queues  # default: one instance per consumer core
    assert q.instances == 4


def test_a_queue_without_settings_keeps_the_segment_steering() -> None:
    p = program()
    p.queue_specs.clear()
    p.apply_setting("app.steer=key")
    (q,) = compile_program(p).queues
    assert (q.instances, q.steer) == (2, "key")
    p.apply_setting("app.cores=0,1,2")
    p.apply_setting("app.group=on")
    p.apply_setting("app.steer=")
    (q,) = compile_program(p).queues
    assert (q.instances, q.steer) == (1, "")  # a core group's master takes every batch


@pytest.mark.parametrize(("settings", "message"), [
    (["rx:app.instances=0"], "instances must be a number from 1 to 256"),
    (["rx:app.instances=many"], "instances must be a number"),
    (["rx:app.enqueue=sometimes"], "enqueue `sometimes`: expected block or drop"),
    (["rx:app.depth=3"], "unknown queue attribute `depth`"),
    (["rx:nowhere.instances=2"], "no segment `nowhere`"),
    (["rx:app.steer=nosuch"], "queue `rx->app` is steered by `nosuch`, which is not an "
                              "integer per-packet field"),
    (["app:rx.instances=2"], "no element of segment `app` sends to segment `rx`"),
])
def test_mapping_errors(settings: list[str], message: str) -> None:
    with pytest.raises(OfflowError, match=message):
        compiled(*settings)


def test_steering_field_must_be_written_before_the_queue() -> None:
    p = program()
    p.queue("rx", "app", steer="kind")  # written by num, before cls: fine
    compile_program(p)
    from offlow import Element, Sink, Source

    class Late(Element):
        fields = {"late": "uint32_t"}
        body = "state->late = 1;"

    q = Program("late")
    src, late, out = Source("rx"), Late("late"), Sink("tx")
    src >> late >> out
    q.segment("rx", [src], device="nic")
    q.segment("app", [late, out], device="host", cores=[0, 1])
    q.queue("rx", "app", steer="late")
    with pytest.raises(OfflowError, match=r"queue `rx->app` is steered by `late`, but packets "
                                          r"from `rx.out -> late.inp` enter it before any "
                                          r"element writes `state->late`"):
        compile_program(q)


# ---- explain and the C -------------------------------------------------------------------

def test_explain_shows_channels_and_mapping() -> None:
    text = explain(plan_graph(compiled("rx:app.instances=3", "rx:app.enqueue=drop")))
    assert "rx->app: rx (nic) -> app (host), 3 channels" in text
    assert "channel 0: cls.count -> cnt.inp" in text
    assert "carries key:uint32_t: 4 B of the 24 B state (no packet bytes)" in text
    assert ("entry 16 B (8 B header + 8 B fields + 2 B length); per 64 B packet 16 B cross "
            "the interconnect") in text
    assert "channel 2: cls.put -> put.inp" in text
    assert "carries key:uint32_t, seq:uint64_t, val:uint64_t: 20 B" in text
    assert "per 64 B packet 104 B cross the interconnect" in text  # put: fields, time, data
    assert "3 instances per producer core (steered by key % 3): 3 ring(s)" in text
    assert "consumers: core 0 polls instances 0,2; core 1 polls instance 1" in text
    assert "enqueue: drop (a full ring drops the packet, counted per queue)" in text
    text = explain(plan_graph(compiled("rx:app.instances=1")))
    assert "consumers: core 0 polls instance 0; core 1 polls none" in text


def test_generated_code_tags_entries_and_dispatches_them() -> None:
    files = generate(plan_graph(compiled("rx:app.instances=3", "rx:app.enqueue=drop")))
    nic, host, common = files["nic.c"], files["host.c"], files["common.h"]
    for k, (port, dst) in enumerate((("count", "cnt"), ("get", "get"), ("put", "put"))):
        assert f"static void ofl_push_rx__app_c{k}(" in nic, port
        assert f"en->h.flags = {k}u;" in nic
        assert f"case {k}: {{ /* cls.{port} -> {dst}.inp */" in host
    assert "&ctx->out_rx__app[(uint32_t)state->key % 3u]" in nic
    assert "en->ofl_len = (uint16_t)pkt->len;" in nic  # the count channel's length
    # the NIC core's three rings, each dropping when full (enqueue=drop), their consumer
    # the host process (its peer 0: the one liveness pipe it watches for this queue)
    assert ('{ "rx->app", &ofl_ctxs[0].out_rx__app, NULL, NULL, ofl_rings_0_0, 3u, false, '
            "true, 0 }") in nic
    assert "union ofl_q_rx__app {" in common
    assert ("sizeof(struct ofl_entry_hdr) }, /* 2: rx->app core 0 -> instance 2 (core 0) */"
            in common)
    # host core 0 polls instances 0 and 2 (rings 0 and 2), core 1 instance 1
    assert ("static const struct ofl_ring_use ofl_rings_0_0[] = {\n"
            "    { 0u, 0u, 0u, 0u, false },\n    { 2u, 0u, 2u, 0u, false },\n};") in host
    assert "&ofl_ctxs[0].nin_rx__app, ofl_rings_0_0, 2u, false, false, 0 }" in host
    assert "&ofl_ctxs[1].nin_rx__app, ofl_rings_1_0, 1u, false, false, 0 }" in host


# ---- end to end --------------------------------------------------------------------------

def run_program(tmp_path: Path, *settings: str, count: int = 20_000, spin: int = 0
                ) -> tuple[dict[str, Any], list[dict[str, int]]]:
    """Run the program on `count` synthetic 64-byte packets; the summary and, per
    output frame (in file order), what Get/Put wrote into it."""
    b = build(program(*settings, spin=spin), werror=True)
    out = tmp_path / "out.pcap"
    res = run(b, RunOptions(count=count, sizes="64", output=out, timeout=120))
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    rows = [{"seq": int.from_bytes(f[50:58], "big"), "core": f[58], "channel": f[59],
             "key": f[60], "val": f[61]} for f in read_frames(out)]
    return s, rows


def check_order_per_instance(rows: list[dict[str, int]], instances: int,
                             both_channels: bool = True) -> None:
    """The frames of each instance are in the order the NIC numbered them, across the
    get and put channels (each instance is one ring, taken by one core, written out
    in order by it); with `both_channels`, each instance had frames of both."""
    for i in range(instances):
        seqs = [r["seq"] for r in rows if r["key"] % instances == i]
        assert seqs == sorted(seqs), f"instance {i} out of order"
        if both_channels:
            assert len({r["channel"] for r in rows if r["key"] % instances == i}) == 2


@pytest.mark.parametrize("instances", [2, 3, 1], ids=["per-core", "more-than-cores",
                                                      "fewer-than-cores"])
def test_each_key_reaches_one_instance_in_order(tmp_path: Path, instances: int) -> None:
    n = 20_000
    s, rows = run_program(tmp_path, f"rx:app.instances={instances}", count=n)
    assert len(rows) == n
    assert sorted(r["seq"] for r in rows) == list(range(n))
    for r in rows:
        # the key reached instance key % instances, taken by core instance % 2
        assert r["core"] == r["key"] % instances % 2, r
        # each channel went to its own element with its own fields intact
        assert r["channel"] == (r["seq"] // 3 + r["seq"] // 7) & 1, r
        assert r["val"] == ((r["seq"] * 3 + 1) & 0xFF if r["channel"] else 0), r
    check_order_per_instance(rows, instances)
    (q,) = s["queues"]
    per_key = Counter(r["key"] for r in rows)
    # two entries per packet (the count copy and get or put) on the key's instance
    assert q["packets_by_instance"] == [
        2 * sum(c for k, c in per_key.items() if k % instances == i) for i in range(instances)]
    assert q["packets"] == q["delivered"] == 2 * n and q["dropped"] == 0
    # the count channel (no packet bytes) delivered every copy with its key
    assert s["tables"]["counts"] == [per_key[k] for k in range(KEYS)]
    # what crossed: 16 B per count entry, header + fields + timestamp + the 64 packet
    # bytes otherwise
    gets = sum(1 for r in rows if r["channel"] == 0)
    assert q["bytes"] == 16 * n + 96 * gets + 104 * (n - gets)


def test_enqueue_drop_drops_and_counts_on_a_full_ring(tmp_path: Path) -> None:
    n = 5_000
    s, rows = run_program(tmp_path, "rx:app.enqueue=drop", "ring_size=4", "batch=2",
                          count=n, spin=5_000)
    (q,) = s["queues"]
    assert q["dropped"] > 0
    assert q["packets"] + q["dropped"] == 2 * n
    assert q["delivered"] == q["packets"] == sum(q["packets_by_instance"])
    assert len(rows) + sum(s["tables"]["counts"]) == q["delivered"]
    check_order_per_instance(rows, 2, both_channels=False)
    assert q["full_waits"] == 0  # the producer never waited for room


def test_enqueue_block_with_the_same_tiny_ring_loses_nothing(tmp_path: Path) -> None:
    n = 2_000
    s, rows = run_program(tmp_path, "ring_size=4", "batch=2", count=n, spin=2_000)
    (q,) = s["queues"]
    assert q["dropped"] == 0 and q["delivered"] == 2 * n and len(rows) == n
    check_order_per_instance(rows, 2)
