"""Each compiler pass, one behaviour per test; every error message is pinned."""

from __future__ import annotations

import pytest

from offlow import Element, OfflowError, Port, Program, Shared, Sink, Source
from offlow.ir import Graph
from offlow.ir.types import port_types_compatible
from offlow.passes import analyze_bodies, check_ports, compile_graph, insert_queues, place
from offlow.passes.check import types_fed
from offlow.passes.fuse import fuse
from offlow.passes.liveness import liveness
from offlow.passes.loops import check_loops
from offlow.passes.state_check import check_state
from tests.progs import NoPkt, Pass, ReadA, ReadB, SetA, Split, two_segment


def ir(p: Program) -> Graph:
    return p.to_ir()


def chain(*elements: Element, segments: dict[str, list[Element]] | None = None) -> Program:
    p = Program("t")
    for a, b in zip(elements, elements[1:], strict=False):
        a >> b
    for name, members in (segments or {"s": list(elements)}).items():
        p.segment(name, members, device="nic" if name == "rx" else "host")
    return p


# ---- check_ports -------------------------------------------------------------

def test_unconnected_input_names_element_port_and_fix() -> None:
    p = Program("t")
    src, a, b, out = Source("src"), Pass("a"), Pass("b"), Sink("out")
    src >> a >> out
    b >> Sink("out2")
    p.segment("s", [src, a, b, out, *[e.element for e in b.links.values()]])
    with pytest.raises(OfflowError, match="element `b` input `inp` is not connected; connect it "
                       "or remove the element"):
        check_ports(ir(p))


def test_unconnected_output_suggests_a_sink() -> None:
    src, s, a = Source("src"), Split("split"), Sink("a")
    src >> s
    s["yes"] >> a
    p = Program("t")
    p.segment("s", [src, s, a])
    with pytest.raises(OfflowError, match="element `split` output `no` is not connected; "
                       r"connect it \(to a Sink or Discard"):
        check_ports(ir(p))


def test_type_mismatch_names_both_ports_and_types() -> None:
    class V6(Element):
        outputs = (Port("out", "ip.v6"),)

    class V4(Element):
        inputs = (Port("inp", "ip.v4"),)

    p = chain(Source("src"), V6("six"), V4("four"), Sink("out"))
    with pytest.raises(OfflowError, match=r"type mismatch: `six.out` carries `ip.v6` packets but "
                       r"`four.inp` takes `ip.v4`; declare the input as one of `ip.v6`, `ip`, "
                       r"`any` \(the types `ip.v6` feeds\), or put an element between them "
                       r"whose output is `ip.v4`$"):
        check_ports(ir(p))


@pytest.mark.parametrize("t", ["ip.v4", "eth", "tuple", "ip.v6.ext", "any"])
def test_the_types_a_mismatch_names_are_those_the_packets_feed(t: str) -> None:
    """Each type the message offers takes `t` packets, and no other type the elements
    use does (the message's list is port_types_compatible's rule, not a guess)."""
    used = {"any", "eth", "ip", "ip.v4", "ip.v6", "ip.v6.ext", "tuple", "l4"}
    fed = types_fed(t)
    assert all(port_types_compatible(t, x) for x in fed)
    assert {x for x in used if port_types_compatible(t, x)} <= set(fed)


def test_program_without_source_is_rejected() -> None:
    p = chain(Pass("a"), Sink("out"))
    with pytest.raises(OfflowError, match="has no Source"):
        check_ports(ir(p))


# ---- analyze_bodies ------------------------------------------------------------

def test_body_facts_record_reads_writes_and_emits() -> None:
    g = analyze_bodies(ir(two_segment()))
    seta, reada = g.node("seta").facts, g.node("reada").facts
    assert seta is not None and reada is not None
    assert seta.writes == {"a", "b", "c"} and seta.kills == {"a", "b", "c"}
    assert reada.reads == {"a"} and not reada.uses_pkt


def test_body_error_becomes_a_user_error_naming_the_element() -> None:
    class Typo(Element):
        body = "state->aa = 1;"

    p = chain(Source("src"), SetA("seta"), Typo("typo"), Sink("out"))
    with pytest.raises(OfflowError, match="element `typo`.*`state->aa` is not a per-packet"):
        analyze_bodies(ir(p))


# ---- place ---------------------------------------------------------------------

def _counting_program(devices: tuple[str, str]) -> Program:
    class Bump(Element):
        tables = ("t",)
        body = "t[0]++;"

    table = Shared("hits", "uint64_t", 4)
    src, b1, b2, out = Source("src"), Bump("b1", t=table), Bump("b2", t=table), Sink("out")
    src >> b1 >> b2 >> out
    p = Program("t")
    p.segment("one", [src, b1], device=devices[0])
    p.segment("two", [b2, out], device=devices[1])
    return p


def test_table_used_on_one_device_lives_there() -> None:
    g = place(ir(_counting_program(("nic", "nic"))))
    assert g.shared[0].home == "nic"


def test_table_used_on_two_devices_lives_in_the_window() -> None:
    g = place(ir(_counting_program(("nic", "host"))))
    assert g.shared[0].home == "window"


# ---- check_loops -----------------------------------------------------------------

class Merge(Element):
    inputs = (Port("inp"),)


def test_loop_inside_a_segment_needs_a_queue() -> None:
    src, m, s, out = Source("src"), Merge("m"), Split("split"), Sink("out")
    src >> m >> s
    s["yes"] >> m
    s["no"] >> out
    p = Program("t")
    p.segment("s", [src, m, s, out])
    with pytest.raises(OfflowError, match="loop with no queue in segment `s`: m -> split -> m"):
        check_loops(ir(p))


def test_loop_through_segments_is_reported_as_unsupported() -> None:
    src, m, s, out = Source("src"), Merge("m"), Split("split"), Sink("out")
    src >> m >> s
    s["yes"] >> m
    s["no"] >> out
    p = Program("t")
    p.segment("a", [src, m])
    p.segment("b", [s, out])
    with pytest.raises(OfflowError, match="segments form a cycle: a -> b -> a"):
        check_loops(ir(p))


# ---- check_state ------------------------------------------------------------------

def test_field_read_but_never_written_is_an_error() -> None:
    p = chain(Source("src"), ReadA("reada"), Sink("out"))
    p2 = Program("t2")
    src, w, r, out = Source("src"), SetA("seta"), ReadA("reada"), Sink("out")
    src >> r >> w >> out  # written only after it is read
    p2.segment("s", [src, w, r, out])
    for prog in (p2,):
        with pytest.raises(OfflowError, match="element `reada` reads per-packet field `a` but no "
                           "element before it writes it"):
            check_state(analyze_bodies(ir(prog)))
    del p


def test_field_written_upstream_passes() -> None:
    g = check_state(analyze_bodies(ir(two_segment())))
    assert g.node("reada").facts is not None


# ---- insert_queues and liveness -----------------------------------------------------

def test_queue_is_inserted_only_on_edges_between_segments() -> None:
    g = insert_queues(place(analyze_bodies(ir(two_segment()))))
    assert [str(q.edge) for q in g.queues] == ["seta.out -> reada.inp"]
    assert g.queues[0].crosses_device


def test_queue_between_segments_on_one_device_does_not_cross_the_interconnect() -> None:
    g = insert_queues(place(analyze_bodies(ir(two_segment("host")))))
    assert not g.queues[0].crosses_device


def test_queue_carries_only_live_fields() -> None:
    g = compile_graph(ir(two_segment()))
    (q,) = g.queues
    assert [f.name for f in q.fields] == ["a", "b"]  # c is written but never read
    assert q.carries_data  # readb writes the packet and a sink follows


def test_field_overwritten_after_the_queue_does_not_cross() -> None:
    class Overwrite(Element):
        body = "state->a = 5;"

    src, a, o, r, out = Source("src"), SetA("seta"), Overwrite("ow"), ReadA("reada"), NoPkt("np")
    src >> a >> o >> r >> out
    p = Program("t")
    p.segment("rx", [src, a], device="nic")
    p.segment("app", [o, r, out])
    (q,) = compile_graph(ir(p)).queues
    assert q.fields == ()


def test_packet_bytes_do_not_cross_when_nothing_after_uses_them() -> None:
    src, a, r, np_ = Source("src"), SetA("seta"), ReadA("reada"), NoPkt("np")
    src >> a >> r >> np_
    p = Program("t")
    p.segment("rx", [src, a], device="nic")
    p.segment("app", [r, np_])
    (q,) = liveness(insert_queues(place(analyze_bodies(ir(p))))).queues
    assert not q.carries_data
    assert [f.name for f in q.fields] == ["a"]


# ---- fuse -----------------------------------------------------------------------------

def test_fuse_defines_callees_before_callers_and_finds_entries() -> None:
    g = compile_graph(ir(two_segment()))
    rx, app = fuse(g)
    assert rx.nodes == ("seta", "src") and rx.sources == ("src",)
    assert app.nodes == ("out", "readb", "reada")
    assert [q.name for q in app.inputs] == [q.name for q in rx.outputs] == [g.queues[0].name]


def test_pipeline_keeps_program_order_of_segments() -> None:
    g = compile_graph(ir(two_segment()))
    assert [s.name for s in g.segments] == ["rx", "app"]
    assert ReadB("x").body  # the shared elements have bodies to analyse
