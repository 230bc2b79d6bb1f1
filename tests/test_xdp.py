"""The xdp target (offlow/targets/xdp.py): listed with the reason it cannot run here;
every construct it cannot run refused at compile time naming the element, the target
and the reason; a segment compiled to one XDP program that the kernel's verifier
accepts, and a verifier refusal reported at the element's body line."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow import Element, Handler, Port, Program, Shared, Sink, Source
from offlow.build import build, plan_program
from offlow.cli import load_program
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.errors import OfflowError
from offlow.targets import xdp
from tests.e2e import EXAMPLE, ROOT

XDP_TTL = ROOT / "tests" / "programs" / "xdp_ttl.py"
WHY_NOT = xdp.TARGET.unusable()
needs_bpf = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")


def test_xdp_says_why_it_cannot_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(xdp.shutil, "which", lambda name: None)
    assert xdp.TARGET.unusable() == (
        "missing package `clang` (the compiler of eBPF programs (clang -target bpf); "
        "apt-get install clang)")
    monkeypatch.undo()
    monkeypatch.setattr(xdp, "BPF_HEADERS", tmp_path / "bpf_helpers.h")
    assert xdp.TARGET.unusable() == (
        "missing package `libbpf-dev` (libbpf: the headers of eBPF programs and the library "
        "that loads them; apt-get install libbpf-dev)")
    monkeypatch.undo()
    monkeypatch.setattr(xdp, "kernel_refuses_bpf", lambda: "Operation not permitted (errno 1)")
    assert xdp.TARGET.unusable() == ("no device (the kernel refuses BPF programs: Operation "
                                     "not permitted (errno 1))")


@pytest.mark.skipif(xdp.os.geteuid() != 0, reason="loading BPF needs root here")
def test_the_kernel_probe_loads_a_program_as_root() -> None:
    assert xdp.kernel_refuses_bpf() is None


def _one_segment(*middle: Element, name: str = "edge", cores: tuple[int, ...] = (0,),
                 group: bool = False) -> Program:
    """rx >> middle... >> tx, all in one segment on xdp."""
    p = Program("refused")
    src, out = Source("rx"), Sink("tx")
    prev: Element = src
    for m in middle:
        prev >> m
        prev = m
    prev >> out
    p.segment(name, [src, *middle, out], device="xdp", cores=cores, group=group)
    return p


def _refusal(p: Program) -> str:
    with pytest.raises(OfflowError) as err:
        plan_program(p)
    return str(err.value)


class Maker(Element):
    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    body = r"""
    struct ofl_pkt copy = *pkt;   /* the same bytes, made anew */
    MAKE(out, &copy);
    """


class Copier(Element):
    inputs = (Port("inp", "eth"),)
    outputs = (Port("a", "eth"), Port("b", "eth"))
    body = "SEND(a); SEND(b);"


class Stamp(Element):
    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    fields = {"us": "uint64_t"}
    body = "state->us = pkt->ts_ns / 1000u;"


class BatchOnly(Element):
    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    batch_body = r"""
    for (uint32_t i = 0; i < n; i++)
        EMIT_AT(i, out);
    """


class Tally(Element):
    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    tables = ("seen",)
    body = "seen[0] += 1;"


class KeyHash(Element):
    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    includes = ("offlow/kvstore.h",)
    body = "pkt->data[0] ^= 1;"


class Wide(Element):
    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    fields = {"big": "uint8_t[300]"}
    body = "state->big[0] = pkt->data[0];"


class Ping(Handler):
    body = "(void)msg;"


def test_each_construct_xdp_cannot_run_is_a_compile_error_naming_it() -> None:
    def element(name: str, cls: str, why: str) -> str:
        return (f"element `{name}` ({cls}) cannot run on target `xdp`: {why}; place segment "
                "`edge` on another device")

    assert _refusal(_one_segment(Maker("mk"))) == element(
        "mk", "Maker", "it builds packets (MAKE); an XDP program can only send on, drop or "
        "pass the packet it received")
    copier = Copier("cp")
    p = Program("refused")
    src, a, b = Source("rx"), Sink("tx"), Discard("b")
    src >> copier
    copier["a"] >> a
    copier["b"] >> b
    p.segment("edge", [src, copier, a, b], device="xdp")
    assert _refusal(p) == element("cp", "Copier", "it sends copies of a packet (SEND); an XDP "
                                  "program has one packet and one verdict")
    assert _refusal(_one_segment(Stamp("st"))) == element(
        "st", "Stamp", "it reads the packet's capture time (pkt->ts_ns), which XDP does not have")
    assert _refusal(_one_segment(BatchOnly("vec"))) == element(
        "vec", "BatchOnly", "it has only a batch body; XDP runs one packet at a time: give the "
        "element a per-packet body")
    assert _refusal(_one_segment(Tally("tally", seen=Shared("seen", "uint64_t", 4)))) == element(
        "tally", "Tally", "it uses shared tables (seen); tables as BPF maps are not implemented "
        "yet")
    assert _refusal(_one_segment(KeyHash("kh"))) == element(
        "kh", "KeyHash", "its body uses offlow/kvstore.h, a runtime library with no BPF build "
        "(only offlow/pkt.h's parsers run in XDP)")


def test_a_channel_handler_on_xdp_is_refused() -> None:
    p = Program("refused")
    src, out = Source("rx"), Sink("tx")
    src >> out
    p.segment("edge", [src, out], device="xdp")
    p.channel("ping", Ping("pong"), device="xdp")
    assert _refusal(p) == (
        "channel `ping`: handler `pong` (Ping) cannot run on target `xdp`: a channel handler "
        "runs on messages from the host; XDP has no channel to the host (the crossing "
        "between XDP and segments on other devices (AF_XDP with the live fields in XDP "
        "metadata) is not implemented yet)")


def test_segments_xdp_cannot_run_are_compile_errors_naming_them() -> None:
    seg = "segment `edge` cannot run on target `xdp`: "
    cores = ("XDP runs a segment on whichever CPU receives each packet; it takes no cores or "
             "core group: give it one core (cores=[0])")
    assert _refusal(_one_segment(Stamp("t"), cores=(0, 1))) == seg + cores
    assert _refusal(_one_segment(Wide("w"))) == seg + (
        "the per-packet state takes 300 bytes; on the 512-byte BPF stack it may take at most "
        "256: fewer or smaller fields")
    p = Program("refused")
    src, eth, ip4, t1, t2, d = (Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), Sink("t1"),
                                Sink("t2"), Discard("d"))
    src >> eth
    eth["ipv4"] >> ip4 >> t1
    eth["ipv6"] >> t2
    eth["other"] >> d
    p.segment("edge", [src, eth, ip4, t1, t2, d], device="xdp")
    assert _refusal(p) == seg + (
        "it has 2 sinks (t1, t2); XDP sends a packet back out of the interface it came in on "
        "(XDP_TX): give it one sink")


def test_the_crossing_to_a_host_segment_is_refused_with_what_to_do() -> None:
    """ttl_pipeline's NIC segment sends to a host segment: that needs AF_XDP."""
    with pytest.raises(OfflowError) as err:
        plan_program(load_program(EXAMPLE, ["rx.device=xdp"]))
    assert str(err.value) == (
        "segment `rx` cannot run on target `xdp`: its packets go to or come from segment "
        "`app` (queue `rx->app`): the crossing between XDP and segments on other devices "
        "(AF_XDP with the live fields in XDP metadata) is not implemented yet; place the "
        "whole path on xdp (from the source to the sink), or this segment on another device")


@needs_bpf
def test_a_users_segment_compiles_to_an_xdp_program_the_verifier_accepts() -> None:
    """tests/programs/xdp_ttl.py: the stock parsers (pkt.h, inlined) and a user's
    element with comments, a parameter and an odd-sized field; build() loads each
    program into the kernel, so the verifier has accepted it."""
    b = build(load_program(XDP_TTL, ["edge.device=xdp"]))
    obj = b.binaries["xdp"]
    assert obj.name == "xdp.bpf.o" and obj.read_bytes()[:4] == b"\x7fELF"
    assert b"ofl_xdp_edge" in obj.read_bytes()


class FarWrite(Element):
    """Writes at an offset the packet itself gives: 32 bits, never bounded."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    body = r"""
    /* the offset comes from the packet */
    uint32_t at = ofl_get_be32(pkt->data + 14);
    pkt->data[at] = 0;
    """


@needs_bpf
def test_a_verifier_refusal_names_the_element_and_its_body_line() -> None:
    with pytest.raises(OfflowError) as err:
        build(_one_segment(FarWrite("far")))
    msg = str(err.value)
    src = Path(__file__).read_text().splitlines()
    line = next(k for k, t in enumerate(src, 1) if t.strip() == "pkt->data[at] = 0;")
    assert msg.startswith(f"element `far` (FarWrite), body line 3 ({__file__}:{line}: "
                          "`pkt->data[at] = 0;`): the kernel's verifier refused segment "
                          "`edge`'s XDP program: ")
    assert "unbounded memory access" in msg
    assert "processed" not in msg and "BEGIN PROG LOAD LOG" not in msg  # not the raw log
