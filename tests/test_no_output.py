"""An element with several outputs has no default one: a packet its body chose no
output for (no EMIT or SEND, no DROP or CONSUME) is dropped. It is counted under the
reason `no_output`, which the compiler gives such elements (docs/elements.md), on every
target alike; it used to be a plain drop the report called "DROP() in its body", in a
body that had none."""

from __future__ import annotations

from pathlib import Path

import dpkt
import pytest

from offlow import Element, Port, Program, Sink, Source
from offlow.build import plan_program
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.errors import OfflowError
from offlow.ir.graph import NO_OUTPUT
from offlow.report import summarize
from offlow.runner import RunOptions, build_for, run
from offlow.targets import gpu, xdp
from offlow.unchosen import unchosen_outputs
from tests.e2e import QUIC, read_frames

needs_bpf = pytest.mark.skipif(xdp.TARGET.unusable() is not None,
                               reason=f"xdp cannot run here: {xdp.TARGET.unusable()}")
needs_opencl = pytest.mark.skipif(gpu.TARGET.unusable() is not None,
                                  reason=f"gpu target: {gpu.TARGET.unusable()}")


class TtlTriage(Element):
    """A user's triage: TTL 64 goes on, low TTLs are punted; the rest it forgets to send
    anywhere (the case this file is about)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("fresh", "ip.v4"), Port("punt", "ip.v4"))
    drops = {"zero_ttl": "a TTL of 0"}
    body = r"""
    uint8_t ttl = pkt->data[state->l3_off + 8];   /* the IPv4 TTL byte */
    if (ttl == 0) DROP_WHY(zero_ttl);
    if (ttl == 64) EMIT(fresh);
    if (ttl < 60)
        EMIT(punt);   // low: the slow path
    // 60..63 and above 64: no choice made
    """


class AlwaysChooses(Element):
    inputs = (Port("inp"),)
    outputs = (Port("a"), Port("b"))
    body = "if (pkt->len & 1) EMIT(a); else EMIT(b);"


def triage(device: str, kind: type[TtlTriage] = TtlTriage) -> Program:
    """rx -> eth -> v4 -> triage -> (fresh: a sink, punt: a discard); on `device` whole,
    or (gpu) the triage alone on it between the NIC and the host."""
    p = Program("triage")
    rx, eth, v4, other = Source("rx"), ParseEth("eth"), CheckIPv4("v4"), Discard("other")
    t, out, slow = kind("triage_1"), Sink("out"), Discard("slow_path")
    rx >> eth
    eth["ipv4"] >> v4 >> t
    eth["ipv6"] >> other
    eth["other"] >> other
    t["fresh"] >> out
    t["punt"] >> slow
    if device == "gpu":
        p.segment("edge", [rx, eth, v4, other], device="nic", cores=[0])
        p.segment("mid", [t], device="gpu")
        p.segment("tail", [out, slow], device="host", cores=[0])
    else:
        p.segment("edge", [rx, eth, v4, other, t, out, slow], device=device, cores=[0])
    return p


@pytest.mark.parametrize("device", ["host", "nic", pytest.param("xdp", marks=needs_bpf),
                                    pytest.param("gpu", marks=needs_opencl)])
def test_a_packet_no_output_was_chosen_for_is_counted_as_such(device: str,
                                                              tmp_path: Path) -> None:
    opts = RunOptions(input=QUIC, output=tmp_path / "out.pcap", timeout=60)
    b = build_for(triage(device), opts, werror=True)
    res = run(b, opts)
    assert res.ok, res.errors
    a = summarize(b.plan, res.stats)["accounting"]
    ttls = [e.data.ttl for e in map(dpkt.ethernet.Ethernet, read_frames(QUIC))
            if isinstance(e.data, dpkt.ip.IP)]
    unchosen = sum(1 for t in ttls if t != 64 and t >= 60)
    at = {(d["at"], d["reason"]): d for d in a["dropped"]}
    assert unchosen > 0 and at[("triage_1", "no_output")]["packets"] == unchosen, a
    assert at[("triage_1", "no_output")]["what"] == NO_OUTPUT[1]
    assert ("triage_1", "dropped") not in at  # (not the plain DROP() it was)
    assert a["consumed"]["slow_path"] == sum(1 for t in ttls if 0 < t < 60)
    assert len(read_frames(tmp_path / "out.pcap")) == sum(1 for t in ttls if t == 64)
    assert a["unaccounted"] == 0


def test_only_elements_that_may_choose_nothing_get_the_reason() -> None:
    g = plan_program(triage("host")).graph
    assert dict(g.node("triage_1").drops) == {"zero_ttl": "a TTL of 0",
                                              NO_OUTPUT[0]: NO_OUTPUT[1]}
    p = Program("chooses")
    rx, c, x, y = Source("rx"), AlwaysChooses("ch"), Sink("x"), Discard("y")
    rx >> c
    c["a"] >> x
    c["b"] >> y
    p.segment("s", [rx, c, x, y], device="host", cores=[0])
    g = plan_program(p).graph
    assert NO_OUTPUT[0] not in dict(g.node("ch").drops)  # (its body always chooses)
    g = plan_program(triage("host")).graph
    assert NO_OUTPUT[0] not in dict(g.node("eth").drops)  # (nor the library's parser)


def test_a_reason_of_that_name_of_the_users_own_is_one_error() -> None:
    class Mine(TtlTriage):
        drops = {"zero_ttl": "a TTL of 0", "no_output": "mine"}

    assert plan_program(triage("host"))  # (the same body under its own reasons plans)
    with pytest.raises(OfflowError, match="element `triage_1`: its drop reason `no_output` "
                                          "is the one the compiler counts a packet under"):
        plan_program(triage("host", Mine))


def _line_of(text: str) -> str:
    """`FILE:N`: where the line `text` is in this file (a body's line)."""
    lines = Path(__file__).read_text().splitlines()
    [n] = [i + 1 for i, line in enumerate(lines) if line.strip() == text]
    return f"{__file__}:{n}"


class Tee2(Element):
    inputs = (Port("inp"),)
    outputs = (Port("left"), Port("right"))
    body = """
    SEND(left);    /* a copy each way */
    SEND(right);
    """


class Forgot(Element):
    """A user's body that never says where its packets go (its EMIT forgotten)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("ok", "ip.v4"), Port("odd", "ip.v4"))
    fields = {"sum8": "uint8_t"}
    body = r"""
    uint8_t s = 0;
    for (uint32_t i = 0; i < pkt->len; i++) s += pkt->data[i];
    state->sum8 = s;   // the forgotten EMIT's place
    """


def _one(kind: type[Element], name: str = "mine") -> Program:
    p = Program("one")
    rx, e = Source("rx"), kind(name)
    a, b = Sink("a"), Discard("b")
    if kind.inputs[0].type == "ip.v4":
        eth, v4, other = ParseEth("eth"), CheckIPv4("v4"), Discard("other")
        rx >> eth
        eth["ipv4"] >> v4 >> e
        eth["ipv6"] >> other
        eth["other"] >> other
        nodes = [rx, eth, v4, other, e, a, b]
    else:
        rx >> e
        nodes = [rx, e, a, b]
    e[kind.outputs[0].name] >> a
    e[kind.outputs[1].name] >> b
    p.segment("s", nodes, device="host", cores=[0])
    return p


def test_an_element_whose_body_may_choose_nothing_is_warned_of_where() -> None:
    [w] = unchosen_outputs(plan_program(triage("host")).graph)
    assert w.startswith(f"element `triage_1`: its body may reach its end "
                        f"({_line_of('if (ttl < 60)')}) without choosing an output"), w
    assert "(fresh, punt) has no default one" in w and "EMIT(fresh)" in w
    assert f"counted as `{NO_OUTPUT[0]}`" in w
    [w] = unchosen_outputs(plan_program(_one(Forgot, "Sum_8")).graph)
    at = _line_of("state->sum8 = s;   // the forgotten EMIT's place")
    assert w.startswith(f"element `Sum_8`: its body may reach its end ({at}) without"), w


def test_bodies_that_always_choose_or_send_copies_are_not_warned_of() -> None:
    assert unchosen_outputs(plan_program(_one(AlwaysChooses)).graph) == []
    # SEND's copies are the packet's choice: falling off the end after them is the tee
    assert unchosen_outputs(plan_program(_one(Tee2)).graph) == []


def test_an_empty_body_of_several_outputs_is_warned_of() -> None:
    class Nothing(AlwaysChooses):
        body = "  /* to do */  "

    [w] = unchosen_outputs(plan_program(_one(Nothing, "todo")).graph)
    assert w.startswith("element `todo`: its body is empty, and an element of several "
                        "outputs (a, b) has no default one"), w


def test_explain_and_run_give_the_warning(tmp_path: Path) -> None:
    from offlow.explain import explain

    plan = plan_program(_one(Forgot, "Sum_8"))
    [w] = unchosen_outputs(plan.graph)
    assert f"warnings:\n  {w}" in explain(plan)
    opts = RunOptions(input=QUIC, output=tmp_path / "out.pcap", timeout=60)
    res = run(build_for(_one(Forgot, "Sum_8"), opts, werror=True), opts)
    assert res.ok, res.errors
    assert w in res.warnings
