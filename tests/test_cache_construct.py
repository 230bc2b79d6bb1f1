"""The caching construct (Program.cache) as the compiler expands it: a lookup before
the region with hit and miss paths, an update after it, both where the cache lives;
write-back adds the path of the entries it evicts. No C is run here
(tests/test_kvs_cache.py runs the designs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from offlow import OfflowError
from offlow.build import compile_program, generate, plan_graph
from offlow.codegen.queuegen import push_fn
from offlow.dsl.loader import load_program
from offlow.explain import explain
from offlow.ir import Edge, Graph
from offlow.passes import compile_graph

ROOT = Path(__file__).resolve().parent.parent
KVS_CACHE = ROOT / "examples" / "kvs_cache.py"


def compiled(*settings: str) -> Graph:
    return compile_program(load_program(KVS_CACHE, settings))


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_expansion_wires_hit_and_miss_paths(policy: str) -> None:
    g = compiled(f"cache.policy={policy}")
    lk, up = g.node("cache_lookup"), g.node("cache_update")
    assert (lk.segment, up.segment) == ("parse", "reply")
    assert [p.name for p in lk.outputs] == ["hit", "miss"]
    edges = set(g.edges)
    assert Edge("key", "out", "cache_lookup", "inp") in edges
    assert Edge("cache_lookup", "miss", "serve", "inp") in edges
    assert Edge("cache_lookup", "hit", "tx", "inp") in edges
    assert Edge("serve", "out", "cache_update", "inp") in edges
    assert Edge("cache_update", "out", "tx", "inp") in edges
    assert Edge("key", "out", "serve", "inp") not in edges
    assert Edge("serve", "out", "tx", "inp") not in edges
    # The ticket crosses to the store and back; the cache lives on the NIC.
    by_edge = {(q.edge.src, q.edge.dst): q for q in g.queues}
    for hop in (("cache_lookup", "serve"), ("serve", "cache_update")):
        assert "cache_ticket" in {f.name for f in by_edge[hop].fields}
    assert "cache_ticket" not in {f.name for f in by_edge["cache_lookup", "tx"].fields}
    table = next(t for t in g.shared if t.name == "cache")
    assert table.home == "nic" and ("policy", policy) in table.options
    # The store tells the update side (on the NIC) that an item expires: the field
    # crosses back with the reply, and only the update's call reads it.
    assert "kv_expiring" in {f.name for f in by_edge["serve", "cache_update"].fields}
    assert "state->kv_expiring" in up.body and "kv_expiring" not in lk.body


def test_reply_args_default_to_args() -> None:
    g = load_program(KVS_CACHE, []).to_ir()
    plain = replace(g.caches[0].ops, reply_args="")
    body = compile_graph(replace(g, caches=(replace(g.caches[0], ops=plain),))).node(
        "cache_update").body
    assert "ofl_kvc_reply(cache, pkt, state->l3_off, state->l4_off, state->cache_ticket)" in body


def test_write_back_sends_evictions_down_the_miss_path() -> None:
    wt, wb = compiled(), compiled("cache.policy=write_back")
    assert not wt.node("cache_lookup").prelude
    assert "NULL, NULL" in wt.node("cache_lookup").body
    pre = wb.node("cache_lookup").prelude
    assert "{target:miss}" in pre and "st.kv_hash = (uint32_t)(hash >> 32);" in pre
    assert "st.cache_ticket = OFL_KVC_INTERNAL;" in pre
    # Made packets are marked for the store (clients' packets keep the zero they
    # start with), and the mark crosses to the host with the misses.
    assert "st.kv_from_cache = 1;" in pre and "kv_from_cache" not in wt.node("cache_lookup").prelude
    assert "state->kv_from_cache" in wb.node("serve").body
    nic = generate(plan_graph(wb))["nic.c"]
    q = next(q for q in wb.queues if q.edge.src == "cache_lookup" and q.edge.src_port == "miss")
    # The made packets take the same function (and ring) as the misses.
    assert f"{push_fn(q, 0)}(e->ctx, pkt, &st);" in nic
    assert "ofl_emit_cache_lookup, &em" in nic
    assert "write-back: written entries stay in the cache" in explain(plan_graph(wb))
    assert "write-through: writes go on to serve" in explain(plan_graph(wt))


def test_the_made_mark_crosses_with_the_misses_and_must_be_declared() -> None:
    wb = compiled("cache.policy=write_back")
    q = next(q for q in wb.queues if q.edge.src == "cache_lookup" and q.edge.src_port == "miss")
    assert "kv_from_cache" in {f.name for f in q.fields}
    g = load_program(KVS_CACHE, ["cache.policy=write_back"]).to_ir()
    bad = replace(g.caches[0].ops, made="kv_mark")
    with pytest.raises(OfflowError, match="marks the entries it writes back with the "
                                          "per-packet field `kv_mark`, which no element"):
        compile_graph(replace(g, caches=(replace(g.caches[0], ops=bad),)))


def test_cache_settings_from_the_command_line() -> None:
    g = compiled("cache.entries=64", "cache.ways=4", "cache.eviction=clock")
    opts = dict(next(t for t in g.shared if t.name == "cache").options)
    assert (opts["entries"], opts["ways"], opts["eviction"]) == ("64", "4", "clock")
    assert "64 entries in sets of 4, clock eviction" in explain(plan_graph(g))


@pytest.mark.parametrize(("settings", "message"), [
    (["cache.policy=write_around"], "policy `write_around`: expected write_through or write_back"),
    (["cache.entries=0"], "entries must be a positive number"),
    (["cache.entries=100", "cache.ways=8"], "entries (100) must be a multiple of ways (8)"),
    (["cache.eviction=fifo"], "eviction `fifo`"),
    (["cache.colour=red"], "unknown setting `colour`"),
    (["reply.device=host"], "the elements before and after the region must be on one device"),
])
def test_bad_cache_settings_are_clear_errors(settings: list[str], message: str) -> None:
    with pytest.raises(OfflowError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compiled(*settings)


def test_a_region_needs_one_way_in_and_out() -> None:
    from offlow import Program, Sink, Source
    from offlow.elements import ParseEth
    from offlow.elements.kvs import MEMCACHED_CACHE

    p = Program("bad")
    src, eth, a, b = Source("rx"), ParseEth("eth"), Sink("a"), Sink("b")
    src >> eth
    eth["ipv4"] >> a
    eth["ipv6"] >> b
    eth["other"] >> Sink("c")
    p.cache("c", around=eth, ops=MEMCACHED_CACHE)
    p.segment("s", [src, eth, a, b, *[n for n in [eth.links["other"].element]]])
    with pytest.raises(OfflowError, match="must have one output, not 3"):
        compile_program(p)
