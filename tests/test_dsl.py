"""The front-end: elements, wiring, composites, programs as values, placement."""

from __future__ import annotations

import pytest

from offlow import Composite, Element, OfflowError, Port, Program, Sink, Source
from offlow.passes import compile_graph
from tests.progs import Pass, SetA, Split, two_segment


def test_two_programs_in_one_process_are_independent() -> None:
    p1, p2 = two_segment("nic"), two_segment("host")
    g1, g2 = p1.to_ir(), p2.to_ir()
    assert g1.segment("rx").device == "nic"
    assert g2.segment("rx").device == "host"
    assert [n.name for n in g1.nodes] == [n.name for n in g2.nodes]


def test_rshift_from_element_with_several_outputs_needs_a_port_name() -> None:
    with pytest.raises(OfflowError, match=r"has 2 output ports \(yes, no\); name one"):
        Split("s") >> Pass("p")


def test_named_port_wiring_records_the_edge() -> None:
    s, a, b = Split("s"), Pass("a"), Pass("b")
    s["yes"] >> a
    s["no"] >> b
    assert s.links["yes"].element is a and s.links["no"].element is b


def test_output_connected_twice_is_rejected() -> None:
    a = Pass("a")
    a >> Pass("b")
    with pytest.raises(OfflowError, match="already connected"):
        a >> Pass("c")


def test_unknown_port_name_lists_the_ports() -> None:
    with pytest.raises(OfflowError, match="no port `maybe`; ports: inp, yes, no"):
        Split("s")["maybe"]


def test_unknown_parameter_names_the_accepted_ones() -> None:
    class P(Element):
        params = {"limit": "uint32_t"}

    with pytest.raises(OfflowError, match="no parameter or table `limt`; it takes: limit"):
        P("p", limt=3)


def test_missing_parameter_is_an_error() -> None:
    class P(Element):
        params = {"limit": "uint32_t"}

    with pytest.raises(OfflowError, match="needs `limit`"):
        P("p")


@pytest.mark.parametrize(("attr", "value", "said"), [
    ("drops", ("over_budget", "discard_port"), r"`drops` must map each name to a string, "
     r"e\.g\. drops = \{\"over_limit\""),
    ("tables", "spent", r"`tables` must be a tuple of names.*write \('spent',\)"),
    ("params", ("limit",), r"`params` must map each name to a string"),
    ("fields", {"hits": int}, r"`fields` must map each name to a string"),
    ("includes", "offlow/lso_nic.h", r"`includes` must be a tuple of names"),
])
def test_a_declaration_of_the_wrong_shape_is_one_error_naming_it(attr: str, value: object,
                                                                  said: str) -> None:
    """A user's element whose class declares `drops` as a tuple of reasons (not what each
    means), or a one-name `tables` without its comma (a string), gets one error naming
    the element and the declaration, not a traceback from the compiler (drops) or
    "needs `s`, `p`, ..." (a string's letters taken for table names)."""
    mine = type("Mine", (Element,), {attr: value, "body": "EMIT(out);"})
    with pytest.raises(OfflowError, match=r"element `m` \(Mine\): " + said):
        mine("m")


def test_field_declared_with_two_types_is_an_error() -> None:
    class Other(Element):
        fields = {"a": "uint16_t"}

    p = Program("x")
    src, a, o, out = Source("src"), SetA("a"), Other("o"), Sink("out")
    src >> a >> o >> out
    p.segment("s", [src, a, o, out])
    with pytest.raises(OfflowError, match="field `a` is `uint32_t` in element `a` but `uint16_t`"):
        p.to_ir()


def test_unsupported_field_type_is_an_error() -> None:
    class Bad(Element):
        fields = {"x": "struct foo"}

    p = Program("x")
    src, b, out = Source("src"), Bad("b"), Sink("out")
    src >> b >> out
    p.segment("s", [src, b, out])
    with pytest.raises(OfflowError, match="C type `struct foo` is not supported"):
        p.to_ir()


def test_element_in_two_segments_is_an_error() -> None:
    p = Program("x")
    src, a, out = Source("src"), Pass("a"), Sink("out")
    src >> a >> out
    p.segment("s1", [src, a])
    with pytest.raises(OfflowError, match="in segments `s1` and `s2`"):
        p.segment("s2", [a, out])
        p.to_ir()


def test_element_with_more_outputs_than_the_mask_has_bits_is_an_error() -> None:
    class Wide(Element):
        outputs = tuple(Port(f"o{k}") for k in range(30))

    p = Program("x")
    src, w, out = Source("src"), Wide("w"), Sink("out")
    src >> w
    w["o0"] >> out
    p.segment("s", [src, w, out])
    with pytest.raises(OfflowError, match=r"`w` \(Wide\) has 30 outputs; at most 29"):
        p.to_ir()


def test_wired_element_outside_every_segment_is_an_error() -> None:
    p = Program("x")
    src, a, out = Source("src"), Pass("a"), Sink("out")
    src >> a >> out
    p.segment("s", [src, a])
    with pytest.raises(OfflowError, match="`out` is wired from `a.out` but is not in any segment"):
        p.to_ir()


def test_place_rejects_unknown_device_and_bad_cores() -> None:
    p = two_segment()
    with pytest.raises(OfflowError, match="unknown device `fpga`"):
        p.place("rx", device="fpga")
    with pytest.raises(OfflowError, match="non-empty list"):
        p.place("rx", cores=[])


def test_setting_moves_a_segment_in_one_line() -> None:
    p = two_segment("nic")
    p.apply_setting("rx.device=host")
    p.apply_setting("app.cores=0,1")
    g = p.to_ir()
    assert g.segment("rx").device == "host"
    assert g.segment("app").cores == (0, 1)


def test_bad_setting_explains_the_syntax() -> None:
    with pytest.raises(OfflowError, match="expected SEGMENT.device=DEV"):
        two_segment().apply_setting("rxdevice")


def test_composite_is_flattened_with_prefixed_names() -> None:
    class Pair(Composite):
        def __init__(self, name: str) -> None:
            super().__init__(name)
            a, b = self.add(Pass("a")), self.add(Pass("b"))
            a >> b
            self.expose(inputs={"inp": a["inp"]}, outputs={"out": b["out"]})

    p = Program("x")
    src, pair, out = Source("src"), Pair("pair"), Sink("out")
    src >> pair >> out
    p.segment("s", [src, pair, out])
    g = p.to_ir()
    assert {str(e) for e in g.edges} == {
        "src.out -> pair.a.inp", "pair.a.out -> pair.b.inp", "pair.b.out -> out.inp"}


def test_port_types_are_checked_nominally() -> None:
    from offlow.ir.types import port_types_compatible

    assert port_types_compatible("ip.v4", "ip")
    assert port_types_compatible("eth", "any")
    assert not port_types_compatible("ip", "ip.v4")
    assert not port_types_compatible("ip.v6", "ip.v4")
    assert Port("x").type == "any"
    assert not port_types_compatible("any", "ip")


def test_queue_geometry_is_a_setting() -> None:
    p = two_segment()
    for setting in ("ring_size=64", "batch=8", "mtu=9018"):
        p.apply_setting(setting)
    q = compile_graph(p.to_ir()).queues[0]
    assert (q.ring_size, q.batch) == (64, 8)
    assert p.mtu == 9018


def test_ordered_makes_a_core_group_and_group_off_ends_it() -> None:
    from tests.programs.sealed import program as sealed

    p = sealed(cores=1)
    seg = p.segments["open"]
    assert (seg.group, seg.ordered) == (False, False)
    p.apply_setting("open.ordered=on")
    assert (seg.group, seg.ordered) == (True, True)
    p.apply_setting("open.group=off")
    assert (seg.group, seg.ordered) == (False, False)
    p.apply_setting("open.group=on")
    assert (seg.group, seg.ordered) == (True, False)
