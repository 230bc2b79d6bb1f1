"""Vector elements (Element.batch_body): the compiler runs an element's batch body
where its segment takes packets in batches and every packet leaving the segment
crossed exactly one vector element, else per packet (and says why); either way the
program's output is the same. The router's lookups use the tables' batched lookups."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow.build import build, plan_program
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.explain import explain
from offlow.passes.cbody import BodyError, analyze_body
from tests.e2e import QUIC, ROOT, TLS, read_frames, run_example
from tests.example_outputs import CASES, outputs, recorded

TAGS = ROOT / "tests" / "programs" / "vector_tags.py"
ONE = ROOT / "tests" / "programs" / "vector_one.py"
ROUTER = ROOT / "examples" / "router.py"


def tag_mix(a: int, b: int) -> int:
    """The programs' helper, in Python (the oracle)."""
    x = (a * 31 ^ b) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    return (x ^ (x >> 16)) & 0xFFFF


def expected(frames: list[bytes]) -> tuple[list[bytes], list[int]]:
    """What vector_tags forwards, in input order, and its slots table (dpkt's reading
    of the frames, the tags computed here)."""
    out, slots = [], [0] * 10
    for f in frames:
        ip = dpkt.ethernet.Ethernet(f).data
        if not isinstance(ip, dpkt.ip.IP) or ip.p not in (6, 17) or ip.ttl == 0:
            continue
        src, dst = struct.unpack("!II", ip.src + ip.dst)
        t = tag_mix(src, dst)
        if ip.p == 17 and ip.data.sport == 53:
            continue
        if t & 7 == 3:
            continue
        slots[(5 if ip.p == 17 else 0) + t % 5] += 1
        b = bytearray(f)
        b[14 + 4:14 + 6] = struct.pack("!H", t)
        out.append(bytes(b))
    return out, slots


def mixed_capture(path: Path) -> list[bytes]:
    """The TLS capture's TCP frames and the QUIC capture's UDP frames, interleaved
    (those of an Ethernet MTU: CheckIPv4's own checks are not the oracle's business)."""
    a, b = ([f for f in read_frames(c) if len(f) <= 1514] for c in (TLS, QUIC))
    frames = [f for pair in zip(a, b, strict=False) for f in pair] + a[len(b):]
    with open(path, "wb") as fh:
        w = dpkt.pcap.Writer(fh)
        for k, f in enumerate(frames):
            w.writepkt(f, ts=k * 1e-6)
    return frames


def run_tags(tmp_path: Path, *settings: str, **opts: Any) -> tuple[dict[str, Any], bytes]:
    """Run vector_tags with `settings`; its summary and output capture's bytes."""
    out = tmp_path / f"out-{abs(hash(settings))}.pcap"
    s = run_example(list(settings), program=TAGS, output=out, **opts)
    assert s["ok"], s["errors"]
    return s, out.read_bytes()


@pytest.mark.parametrize("batch", ["7", "32", "1"])
def test_vector_elements_forward_what_the_per_packet_bodies_do(tmp_path: Path,
                                                               batch: str) -> None:
    frames = mixed_capture(tmp_path / "mixed.pcap")
    want, slots = expected(frames)
    runs = {mode: run_tags(tmp_path, f"batch={batch}", f"rx.vector={mode}",
                           input=tmp_path / "mixed.pcap") for mode in ("on", "off")}
    (vec, vec_pcap), (one, one_pcap) = runs["on"], runs["off"]
    (tmp_path / "vec.pcap").write_bytes(vec_pcap)
    assert read_frames(tmp_path / "vec.pcap") == want  # in input order
    assert vec_pcap == one_pcap
    assert vec["tables"]["slots"] == one["tables"]["slots"] == slots
    assert vec["elements"] == one["elements"]
    assert vec["elements"]["udp_tag"]["consumed"] > 0  # DNS answers, CONSUME_AT
    assert vec["elements"]["udp_tag"]["why"]["unlucky"] > 0


@pytest.mark.parametrize("batch", ["7", "32"])
def test_a_batch_whose_packets_all_reach_one_vector_element_gives_the_same(
        tmp_path: Path, batch: str) -> None:
    """TCP alone: each source batch reaches tcp_tag whole (its batch body runs on the
    batch's own entries, nothing copied), but for the packets dropped before it."""
    frames = [f for f in read_frames(TLS) if len(f) <= 1514]
    with open(tmp_path / "tcp.pcap", "wb") as fh:
        w = dpkt.pcap.Writer(fh)
        for k, f in enumerate(frames):
            w.writepkt(f, ts=k * 1e-6)
    want, slots = expected(frames)
    runs = {mode: run_tags(tmp_path, f"batch={batch}", f"rx.vector={mode}",
                           input=tmp_path / "tcp.pcap") for mode in ("on", "off")}
    (vec, vec_pcap), (one, one_pcap) = runs["on"], runs["off"]
    (tmp_path / "vec.pcap").write_bytes(vec_pcap)
    assert read_frames(tmp_path / "vec.pcap") == want
    assert vec_pcap == one_pcap
    assert vec["tables"]["slots"] == one["tables"]["slots"] == slots
    assert vec["elements"] == one["elements"]
    assert vec["elements"]["tcp_tag"]["in"] == len(frames) - vec["elements"]["ip4"]["drop"]


@pytest.mark.parametrize("batch", ["7", "32"])
def test_one_vector_element_in_its_segment_gives_the_same(tmp_path: Path, batch: str) -> None:
    """The TCP packets of a mixed capture through the one vector element of their
    segment (the UDP ones dropped before it): each batch's flush sends its packets on
    in one loop, without the arrival order."""
    frames = mixed_capture(tmp_path / "mixed.pcap")
    tcp = [f for f in frames if isinstance(ip := dpkt.ethernet.Ethernet(f).data, dpkt.ip.IP)
           and ip.p == 6]
    want, slots = expected(tcp)
    runs = {mode: run_example([f"batch={batch}", f"rx.vector={mode}"], program=ONE,
                              input=tmp_path / "mixed.pcap", output=tmp_path / f"{mode}.pcap")
            for mode in ("on", "off")}
    vec, one = runs["on"], runs["off"]
    assert vec["ok"] and one["ok"], (vec["errors"], one["errors"])
    assert plan_program(load_program(ONE)).segment("rx").vector == ("stamp",)
    assert read_frames(tmp_path / "on.pcap") == want  # in input order
    assert (tmp_path / "on.pcap").read_bytes() == (tmp_path / "off.pcap").read_bytes()
    assert vec["tables"]["slots"] == one["tables"]["slots"] == slots
    assert vec["elements"] == one["elements"]
    assert vec["elements"]["stamp"]["why"]["unlucky"] > 0
    assert vec["elements"]["no_udp"]["in"] > 0


def test_the_plan_says_which_elements_run_their_batch_bodies() -> None:
    plan = plan_program(load_program(TAGS))
    rx = plan.segment("rx")
    assert rx.vector == ("tcp_tag", "udp_tag") and rx.per_packet == ""
    assert "rx: vector elements tcp_tag, udp_tag run their batch bodies over each batch" in \
        explain(plan)
    off = plan_program(load_program(TAGS, ["rx.vector=off"]))
    assert off.segment("rx").vector == () and off.segment("rx").per_packet == "vector=off"
    assert "rx: tcp_tag, udp_tag run per packet (vector=off)" in explain(off)
    route = plan_program(load_program(ROUTER)).segment("route")
    assert route.vector == ("lpm4", "lpm6")


def test_the_router_looks_up_in_batches() -> None:
    b = build(load_program(ROUTER))
    nic = b.sources["nic.c"]
    assert "ofl_lpm4_lookup_batch(routes, dst, hop, n);" in nic
    assert "ofl_lpm6_lookup_batch(routes, &dst[0][0], hop, n);" in nic
    # ... on the hot path: the route segment's packets wait for the lookup
    assert "if (ctx->vn_lpm4) {" in nic
    assert "ofl_vbody_lpm4(ctx, ps, ss, ctx->vn_lpm4, m_lpm4);" in nic


def test_the_router_gives_the_same_output_per_packet() -> None:
    c = next(c for c in CASES if c.name == "router-synthetic")
    assert outputs(replace(c, settings=("route.vector=off",))) == recorded()[c.name]


@pytest.mark.parametrize(("variant", "why"), [
    ("leak", "packets reach `by_proto`, where they leave the segment, without crossing a "
             "vector element"),
    ("chain", "packets cross another vector element before `udp_tag`"),
    ("send", "`by_proto` sends copies (SEND)"),
])
def test_where_batches_cannot_keep_the_order_elements_run_per_packet(
        variant: str, why: str, tmp_path: Path) -> None:
    p = load_program(TAGS)
    seg = p.segments["rx"]
    by = next(e for e in seg.elements if e.name == "by_proto")
    tcp = next(e for e in seg.elements if e.name == "tcp_tag")
    udp = next(e for e in seg.elements if e.name == "udp_tag")
    if variant == "leak":  # the rest go to the host untagged
        del by.links["rest"]
        by["rest"] >> p.segments["tx"].elements[0]
        seg.elements.remove(next(e for e in seg.elements if e.name == "rest"))
    elif variant == "chain":  # TCP packets are tagged twice
        del tcp.links["out"]
        tcp >> udp
    else:
        by.body = "SEND(tcp); " + by.body
    plan = plan_program(p)
    assert plan.segment("rx").vector == () and plan.segment("rx").per_packet == why
    assert f"run per packet ({why})" in explain(plan)
    build(p, werror=True)  # udp_tag, without a per-packet body, runs its batch on one


@pytest.mark.parametrize(("body", "vector", "message"), [
    ("EMIT(out);", True, "EMIT() is for a per-packet body; in a batch body say which "
                         "packet: EMIT_AT(i, port)"),
    ("MAKE(out, &pkts[0]);", True, "MAKE() is for a per-packet body; in a batch body it has "
                                   "no MAKE()"),
    ("EMIT_AT(0, out);", False, "EMIT_AT() is for a batch body (batch_body); a per-packet "
                                "body writes EMIT(...)"),
    ("states[0].nope = 1;", True, "`states[i].nope` is not a per-packet state field"),
    ("DROP_WHY_AT(0, late);", True, "DROP_WHY_AT() takes one of the element's drop reasons"),
    ("EMIT_AT(0);", True, "EMIT_AT() takes the packet's index and an output port"),
    ('FAIL("gone");', True, "FAIL() is for a per-packet body; in a batch body say which "
                            "packet: FAIL_AT(i, text, ...)"),
    ('FAIL_AT(0, "gone");', False, "FAIL_AT() is for a batch body (batch_body); a per-packet "
                                   "body writes FAIL(...)"),
    ("FAIL_AT(0);", True, "FAIL_AT() takes the packet's index and a text"),
    ("const char *why = \"gone\"; FAIL(why);", False, "FAIL() takes a text first, a string in "
                                                   "quotes (printf's format)"),
    ("FAIL_AT(0, 7, n);", True, "FAIL_AT() takes a text first"),
])
def test_batch_body_mistakes_are_named(body: str, vector: bool, message: str) -> None:
    with pytest.raises(BodyError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace(".", r"\.")):
        analyze_body(body, element="x", outputs=["out"], fields={"tag": "uint16_t"},
                     reasons=["unlucky"], vector=vector)


def test_a_batch_body_s_fields_cross_the_queues() -> None:
    info = analyze_body("for (uint32_t i = 0; i < n; i++) { states[i].tag = states[i].a + "
                        "pkts[i].len; if (pkts[i].ts_ns) EMIT_AT(i, out); }",
                        element="x", outputs=["out"], fields={"tag": "uint16_t",
                                                             "a": "uint16_t"}, vector=True)
    assert (info.reads, info.writes, info.kills) == ({"a"}, {"tag"}, frozenset())
    assert info.emits == {"out"} and info.uses_pkt and info.reads_ts


def test_an_element_with_a_batch_body_only_still_builds_where_none_runs() -> None:
    with pytest.raises(OfflowError, match="vector must be on or off"):
        load_program(TAGS, ["rx.vector=maybe"])
    b = build(load_program(TAGS, ["rx.vector=off"]), werror=True)
    assert "ofl_vbody_udp_tag(ctx, pkt, state, 1u, ofl_mask_);" in b.sources["nic.c"]
