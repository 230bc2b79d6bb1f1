"""GNU C in element bodies and helpers (offlow/passes/gnuc.py): what gcc takes with
-std=gnu11 and pycparser does not (case ranges, range designators, `a ?: b`, asm
statements) is analysed for what it reads and writes, and a user's program written with
them builds and runs. Each of these bodies was a parse error (`C does not parse: before:
...`) before."""

from __future__ import annotations

from pathlib import Path

import dpkt
import pytest

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.passes.cbody import BodyError, BodyInfo, analyze_body
from offlow.report import summarize
from offlow.runner import RunOptions, build_for, run
from tests.e2e import QUIC, read_frames

FIELDS = {"ttl": "uint8_t", "proto": "uint8_t", "tag": "uint32_t", "mark": "uint32_t"}


def facts(body: str, helpers: str = "") -> BodyInfo:
    return analyze_body(body, element="user_el", outputs=["out", "slow"], fields=FIELDS,
                        helpers=helpers)


def test_a_case_range_reads_what_its_switch_reads() -> None:
    info = facts("""
    switch (state->ttl) {
    case 0 ... 1:   /* expired */
        DROP();
    case 2 ... 63: state->mark = 1; break;
    default: break;
    }
    """)
    assert info.reads == {"ttl"} and info.writes == {"mark"} and info.drops


def test_a_range_designator_and_the_short_conditional() -> None:
    info = facts("""
    static const uint8_t weight[256] = { [0 ... 127] = 1, [128 ... 255] = 2 };
    state->mark = weight[state->ttl] ?: state->tag;  // GNU: a ?: b
    """)
    assert info.reads == {"ttl", "tag"} and info.writes == {"mark"}


def test_asm_outputs_are_written_inputs_read() -> None:
    info = facts("""
    uint32_t x;
    __asm__ volatile("bswap %0" : "=r"(state->mark) : "0"(state->tag));
    asm("addl %1, %0" : [acc] "+r"(state->ttl) : [v] "r"(x) : "cc", "memory");
    """)
    assert info.writes == {"mark", "ttl"} and info.reads == {"tag", "ttl"}
    assert "mark" not in info.reads  # "=r": written only


def test_asm_without_operands_and_in_helpers() -> None:
    info = facts("relax(); state->ttl = 1;",
                 helpers="static inline void relax(void) { __asm__ __volatile__(\"pause\"); }")
    assert info.writes == {"ttl"} and not info.reads


def test_an_asm_goto_may_jump_to_its_labels() -> None:
    info = facts("""
    asm goto("" :::: slow_path);
    EMIT(out);
    slow_path:
    EMIT(slow);
    """)
    assert info.emits == {"out", "slow"}


@pytest.mark.parametrize("body", [
    "switch (pkt->len) { case 1 ... : break; }",
    "asm volatile(\"\" : : : : : );",
    "asm(\"\" : \"=r\" );",
])
def test_malformed_gnu_c_is_one_parse_error_with_its_line(body: str) -> None:
    with pytest.raises(BodyError, match="C does not parse"):
        facts(body)


class TtlBands(Element):
    """A user's element in GNU C: TTL bands by case ranges, a weight table by a range
    designator, the short conditional and a compiler barrier in asm."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("kept", "ip.v4"), Port("low", "ip.v4"))
    tables = ("bands",)
    body = r"""
    static const uint8_t band_of[256] = { [0 ... 31] = 0, [32 ... 63] = 1,
                                          [64 ... 127] = 2, [128 ... 255] = 3 };
    uint8_t ttl = pkt->data[state->l3_off + 8];
    __atomic_fetch_add(&bands[band_of[ttl]], 1, __ATOMIC_RELAXED);
    __asm__ volatile("" ::: "memory");  /* a barrier, as perf code has */
    switch (ttl) {
    case 0 ... 59:
        EMIT(low);
    default:
        break;
    }
    uint32_t keep = (uint32_t)(ttl == 64 ? ttl : 0u) ?: 0u;
    if (keep) EMIT(kept);
    EMIT(low);
    """


def test_a_users_gnu_c_element_builds_and_runs(tmp_path: Path) -> None:
    p = Program("gnu_bands")
    rx, eth, v4, other = Source("rx"), ParseEth("eth"), CheckIPv4("v4"), Discard("other")
    bands = TtlBands("bands_el", bands=Shared("bands", "uint64_t", 4))
    kept, low = Sink("kept_out"), Discard("low_out")
    rx >> eth
    eth["ipv4"] >> v4 >> bands
    eth["ipv6"] >> other
    eth["other"] >> other
    bands["kept"] >> kept
    bands["low"] >> low
    p.segment("all", [rx, eth, v4, other, bands, kept, low], device="host", cores=[0])
    opts = RunOptions(input=QUIC, output=tmp_path / "out.pcap", timeout=60)
    b = build_for(p, opts, werror=True)
    res = run(b, opts)
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    ttls = [dpkt.ethernet.Ethernet(f).data.ttl for f in read_frames(QUIC)
            if isinstance(dpkt.ethernet.Ethernet(f).data, dpkt.ip.IP)]
    want = [sum(1 for t in ttls if lo <= t <= hi) for lo, hi in
            ((0, 31), (32, 63), (64, 127), (128, 255))]
    assert s["tables"]["bands"] == want
    assert s["sinks"]["kept_out"]["packets"] == sum(1 for t in ttls if t == 64) > 0
    assert s["accounting"]["consumed"]["low_out"] == sum(1 for t in ttls if t != 64)
