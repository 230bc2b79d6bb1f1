"""Every remaining user error of the front-end and the passes: a clear message that
names the element, port or segment and says what to do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from offlow import (
    Composite,
    Element,
    Handler,
    OfflowError,
    Program,
    Shared,
    SharedMap,
    Sink,
    Source,
)
from offlow.passes import compile_graph
from tests.progs import Pass, Split, two_segment


def segment_twice() -> None:
    p = Program("x")
    p.segment("a", [Pass("p")])
    p.segment("a", [Pass("q")])


def members_by_name() -> None:
    # a user's `p.segment("tx", [dec, "out"])`: the sink's name where the sink goes
    p = Program("x")
    p.segment("tx", [Pass("dec"), "out"])


def map_field_a_c_keyword() -> None:
    SharedMap("flows", (("src", "ipv4"), ("for", "uint16_t")))  # (passed to gcc's error)


def table_named_with_a_quote() -> None:
    Shared('we"ird', "uint64_t", 2)  # (its name went into C strings as it is: a cascade)


def route_table_named_with_a_dot() -> None:
    from offlow.elements.router import lpm4_table
    lpm4_table("routes.v4")  # (--opt routes.v4.path=... would name table `routes`)


def source_named_with_a_quote() -> None:
    Source('r"x')  # (its name went into the generated C's strings: a cascade of errors)


def sink_named_with_a_dot() -> None:
    Sink("tx.v4")  # (--opt tx.v4.path=... would name sink `tx`)


def map_named_with_a_backslash() -> None:
    SharedMap("fl\\ows", (("src", "ipv4"),))


def record_field_not_ascii() -> None:
    SharedMap("flows", (("src", "ipv4"),), value=(("größe", "uint32_t"),))


def parameter_named_like_a_c_keyword() -> None:
    class Gate(Element):
        params = {"default": "uint32_t"}
        body = "if (pkt->len > default) DROP();"

    Gate("gate", default=1)


def state_field_a_c_keyword() -> None:
    class Mark(Element):
        fields = {"int": "uint8_t"}
        body = "state->int = 1;"

    p = Program("x")
    src, m, out = Source("rx"), Mark("m"), Sink("tx")
    src >> m >> out
    p.segment("a", [src, m, out])
    p.to_ir()


def program_name_a_path() -> None:
    Program("edge/v2")  # (it names the run's window: /dev/shm/offlow-NAME-PID-TAG)


def program_name_with_a_space() -> None:
    Program("my router")


def connect_to_a_name() -> None:
    Pass("dec") >> "out"


def connect_to_a_number() -> None:
    Pass("dec") >> 3


def cores_a_number() -> None:
    Program("x").segment("rx", [Pass("dec")], cores=0)


def members_not_a_list() -> None:
    Program("x").segment("tx", Pass("dec"))


def members_a_class() -> None:
    Program("x").segment("tx", [Pass])


def members_none() -> None:
    Program("x").segment("tx", [Pass("dec"), None])


def empty_segment() -> None:
    p = two_segment()
    p.segment("idle", [], device="host")
    compile_graph(p.to_ir())


def core_twice() -> None:
    two_segment().place("rx", cores=[1, 1])


def unknown_segment_setting() -> None:
    two_segment().apply_setting("nosuch.device=host")


def unknown_attribute() -> None:
    two_segment().apply_setting("rx.colour=blue")


def no_segments() -> None:
    Program("x").to_ir()


def ports_as_strings() -> None:
    from offlow import Element

    class OddOnly(Element):  # a user's element naming its ports by strings
        inputs = ("inp",)
        outputs = ("keep", "rest")
        body = "if (pkt->len & 1) EMIT(keep); else EMIT(rest);"

    OddOnly("odd")


def table_not_shared() -> None:
    from offlow.elements import Count

    p = Program("x")
    src, c, out = Source("src"), Count("c", slot=0, counts=[0, 0]), Sink("out")
    src >> c >> out
    p.segment("s", [src, c, out])
    p.to_ir()


def two_tables_one_name() -> None:
    from offlow.elements import Count

    p = Program("x")
    src, out = Source("src"), Sink("out")
    c1 = Count("c1", slot=0, counts=Shared("t", "uint64_t", 2))
    c2 = Count("c2", slot=0, counts=Shared("t", "uint32_t", 2))
    src >> c1 >> c2 >> out
    p.segment("s", [src, c1, c2, out])
    p.to_ir()


def bad_parameter_value() -> None:
    from offlow.elements import Count

    Count("c", slot="zero", counts=Shared("t", "uint64_t", 2))


class Limit(Element):
    """A user's element with a parameter of each width."""

    params = {"most": "uint32_t", "step": "int8_t", "scale": "double", "on": "bool"}
    body = "if (on && pkt->len * scale > most + step) DROP();"


def parameter_below_its_type() -> None:
    Limit("lim", most=-1, step=0, scale=1.0, on=1)  # (a uint32_t: C would make it 2**32-1)


def parameter_above_its_type() -> None:
    Limit("lim", most=2**40, step=0, scale=1.0, on=1)  # (C would keep its low 32 bits: 0)


def parameter_above_a_signed_type() -> None:
    Limit("lim", most=1, step=128, scale=1.0, on=1)


def parameter_a_fraction_for_an_integer() -> None:
    Limit("lim", most=1.5, step=0, scale=1.0, on=1)


def parameter_not_finite() -> None:
    Limit("lim", most=1, step=0, scale=float("inf"), on=1)


def parameter_bool_of_two() -> None:
    Limit("lim", most=1, step=0, scale=1.0, on=2)


def composite_unknown_port() -> None:
    c = Composite("comp")
    a = c.add(Pass("a"))
    c.expose(inputs={"inp": a["inp"]}, outputs={"out": a["out"]})
    c["nope"]


def composite_two_inputs() -> None:
    c = Composite("comp")
    a, b = c.add(Pass("a")), c.add(Pass("b"))
    c.expose(inputs={"i1": a["inp"], "i2": b["inp"]}, outputs={"o": a["out"]})
    Source("src") >> c


def ring_not_power_of_two() -> None:
    two_segment().apply_setting("ring_size=1000")


def batch_above_ring() -> None:
    Program("x", ring_size=16, batch=32).to_ir()


def group_with_source() -> None:
    p = two_segment()
    p.place("rx", cores=[0, 1], group=True)
    compile_graph(p.to_ir())


def group_not_a_flag() -> None:
    two_segment().apply_setting("app.group=maybe")


class Answer(Handler):
    tables = ("t",)
    body = "REPLY(msg, len);"


def channel_twice() -> None:
    p = two_segment()
    p.channel("c", Answer("h", t=Shared("t", "uint64_t", 1)), device="nic")
    p.channel("c", Answer("h", t=Shared("t", "uint64_t", 1)), device="nic")


def channel_bad_name() -> None:
    two_segment().channel("a b", Answer("h", t=Shared("t", "uint64_t", 1)))


def channel_named_like_a_table() -> None:
    two_segment().channel("table.t", Answer("h", t=Shared("t", "uint64_t", 1)))


def channel_not_a_handler() -> None:
    two_segment().channel("c", Pass("p"))  # type: ignore[arg-type]


def channel_unknown_device() -> None:
    two_segment().channel("c", Answer("h", t=Shared("t", "uint64_t", 1)), device="tpu")


def channel_without_device() -> None:
    p = two_segment()
    p.channel("c", Answer("h", t=Shared("t", "uint64_t", 1)))
    compile_graph(p.to_ir())


def channel_body_does_not_parse() -> None:
    class Broken(Handler):
        body = "REPLY(msg, ;"  # (BROKEN_BODY_LINE)

    p = two_segment()
    p.channel("c", Broken("h"), device="nic")
    compile_graph(p.to_ir())


def channel_handler_fails() -> None:
    class GivesUp(Handler):
        body = 'if (len > 64) FAIL("a %u-byte request", (unsigned)len); REPLY(msg, len);'

    p = two_segment()
    p.channel("c", GivesUp("h"), device="nic")
    compile_graph(p.to_ir())


def compile_on_host(el: Pass) -> None:
    """A program of one host segment: a source, `el`, a sink."""
    p = Program("one")
    src, out = Source("src"), Sink("out")
    src >> el >> out
    p.segment("a", [src, el, out], device="host")
    compile_graph(p.to_ir())


def element_fails_and_names_a_reason_failed() -> None:
    class Checkout(Pass):
        drops = {"failed": "the card was refused", "no_card": "no card at all"}
        body = """
            if (pkt->len < 60) DROP_WHY(no_card);
            if (pkt->data[0] == 0xff) DROP_WHY(failed); // a refused card
            if (pkt->data[0] == 0xee) FAIL("till broken at byte %u", pkt->data[1]);
            SEND(out);
        """

    compile_on_host(Checkout("till"))


def element_fails_with_every_reason_taken() -> None:
    class Sorter(Pass):
        drops = {f"bin_{k}": f"bin {k} is full" for k in range(256)}
        body = """
            if (pkt->len == 0) FAIL("an empty frame"); /* never from a port */
            if (pkt->data[0] == 7) DROP_WHY(bin_7);
        """

    compile_on_host(Sorter("sorter"))


def not_an_output() -> None:
    Split("s")["inp"] >> Pass("p")


BROKEN_BODY_LINE = next(i for i, x in enumerate(Path(__file__).read_text().splitlines(), 1)
                        if x.endswith("# (BROKEN_BODY_LINE)"))


@pytest.mark.parametrize("make, message", [
    (segment_twice, "segment `a` is defined twice"),
    (members_by_name, "segment `tx`: 'out' is a name; give the element itself"),
    (map_field_a_c_keyword, "shared map `flows`: key field 'for' is not a C identifier "
                            "(ASCII, not a C keyword)"),
    (record_field_not_ascii, "shared map `flows`: value field 'größe' is not a C identifier"),
    (table_named_with_a_quote, "shared table `we\"ird`: its name must be a C identifier "
                               "(ASCII, not a C keyword): the generated C and `--opt "
                               "NAME.KEY=VALUE` name it"),
    (route_table_named_with_a_dot, "table `routes.v4`: its name must be a C identifier"),
    (map_named_with_a_backslash, "shared map `fl\\ows`: its name must be a C identifier"),
    (source_named_with_a_quote, "source `r\"x`: its name must be a C identifier (ASCII, not "
                                "a C keyword): the generated C and `--opt NAME.KEY=VALUE` "
                                "name it"),
    (sink_named_with_a_dot, "sink `tx.v4`: its name must be a C identifier"),
    (parameter_named_like_a_c_keyword, "`params` names 'default', which is no C identifier "
                                       "(ASCII, not a C keyword)"),
    (state_field_a_c_keyword, "field `int`: a field name is a C identifier (ASCII, not a C "
                              "keyword)"),
    (program_name_a_path, "Program('edge/v2'): a program's name is 1..64 letters, digits, "
                          "`_`, `.` or `-`"),
    (program_name_with_a_space, "Program('my router'): a program's name is 1..64"),
    (connect_to_a_name, "`dec.out >> 'out'`: 'out' is a name; connect the element itself"),
    (connect_to_a_number, "`dec.out >> 3`: 3 (int) is not an element or port"),
    (cores_a_number, "segment `rx`: cores=0; give a list of core numbers, e.g. cores=[0]"),
    (members_not_a_list, "segment `tx`: members=<Pass dec>; give a list of its elements"),
    (members_a_class, "segment `tx`: Pass is an element class; give an element made from it "
                      "(Pass(\"name\", ...))"),
    (members_none, "segment `tx`: None (NoneType) is not an element"),
    (empty_segment, "segment `idle` has no elements; remove it or add elements"),
    (core_twice, "segment `rx`: core listed twice in [1, 1]"),
    (unknown_segment_setting, "nosuch"),
    (unknown_attribute,
     "unknown attribute `colour` (device, cores, group, ordered, steer, vector, batch, depth)"),
    (no_segments, "segment"),
    (ports_as_strings, "element `odd` (OddOnly): inputs must be Port objects, not 'inp'; "
                       "write Port('inp')"),
    (table_not_shared,
     "element `c`: table `counts` must be a Shared(...), SharedMap(...) or Table(...) value, "
     "not list"),
    (two_tables_one_name, "two different shared tables are named `t`"),
    (bad_parameter_value, "cannot pass 'zero' as C type `uint32_t`"),
    (parameter_below_its_type, "element `lim` param `most`: -1 does not fit C type `uint32_t` "
                               "(0..4294967295)"),
    (parameter_above_its_type, "element `lim` param `most`: 1099511627776 does not fit C type "
                               "`uint32_t` (0..4294967295)"),
    (parameter_above_a_signed_type, "param `step`: 128 does not fit C type `int8_t` (-128..127)"),
    (parameter_a_fraction_for_an_integer, "param `most`: 1.5 is not a whole number, and C type "
                                          "`uint32_t` holds whole numbers only"),
    (parameter_not_finite, "param `scale`: inf is not a finite number"),
    (parameter_bool_of_two, "param `on`: 2 does not fit C type `bool` (0..1)"),
    (composite_unknown_port, "composite `comp` has no port `nope`; ports:"),
    (composite_two_inputs, "composite `comp` has 2 inputs; name one"),
    (not_an_output, "`inp` is not an output port"),
    (ring_not_power_of_two, "ring_size 1000 must be a power of two"),
    (batch_above_ring, "batch 32 must be 1..ring_size (16)"),
    (group_with_source, "segment `rx` is a core group but holds source `src`; a group takes "
                        "its batches from a queue"),
    (channel_twice, "channel `c` is defined twice"),
    (channel_bad_name, "channel `a b`: a name is 1..31 letters, digits"),
    (channel_named_like_a_table, "channel `table.t`: names starting with `table.` are the "
                                 "tables'"),
    (channel_not_a_handler, "channel `c`: handler must be a Handler, not Pass"),
    (channel_unknown_device, "channel `c`: unknown device `tpu`; devices: host, nic, xdp, gpu"),
    (channel_without_device, "channel `c`: cannot tell which device serves it (no segment "
                             "uses its tables); say device=..."),
    (channel_body_does_not_parse, "channel `c`: "
         f"{__file__}:{BROKEN_BODY_LINE}: element `h`: C does not parse"),
    (channel_handler_fails, "channel `c`: its handler `h` cannot FAIL(): it has no packet "
                            "and runs beside the cores (answer with an error instead)"),
    (element_fails_and_names_a_reason_failed, "element `till`: its drop reason `failed` is "
                                              "the one FAIL() counts its packet under: name "
                                              "yours otherwise"),
    (element_fails_with_every_reason_taken, "element `sorter`: 257 drop reasons with those "
                                            "the compiler adds (failed); at most 256"),
    (group_not_a_flag, "--set `app.group=maybe`: group must be on or off"),
], ids=lambda v: v.__name__ if callable(v) else "")
def test_error_message(make: Callable[[], None], message: str) -> None:
    with pytest.raises(OfflowError) as err:
        make()
    assert message in str(err.value)


def test_parameters_the_type_holds_are_taken_as_given() -> None:
    """The ends of each range, a whole float (1e6 for a count), True for a bool."""
    from offlow.dsl.values import c_literal

    lim = Limit("lim", most=4294967295, step=-128, scale=0.5, on=True)
    assert lim.param_values == {"most": 4294967295, "step": -128, "scale": 0.5, "on": True}
    assert c_literal(1e6, "uint32_t", "x") == "1000000ULL"
    assert c_literal(-128, "int8_t", "x") == "-128LL"
