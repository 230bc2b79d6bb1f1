"""Shared arrays on the xdp target as per-CPU array maps where every use only adds to
them (offlow.codegen.bpf.map_kind): the kind each array gets and why, in the
generated program and in `offlow explain`; a per-CPU array's table report, summed over
the CPUs the replay spread the frames over, equal to the NIC's and to Python's count
of the capture."""

from __future__ import annotations

from pathlib import Path

import dpkt
import pytest

from offlow import Element, Handler, Port, Program, Shared
from offlow.build import build, plan_program
from offlow.codegen.bpf import generate_xdp, map_kind
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.explain import explain
from offlow.report import summarize
from offlow.runner import RunOptions, run
from offlow.targets import xdp
from tests.e2e import QUIC, ROOT, TLS, one_segment, read_frames

TALLY = ROOT / "tests" / "programs" / "xdp_proto_tally.py"
WHY_NOT = xdp.TARGET.unusable()
needs_bpf = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")


def _kinds(p: Program) -> dict[str, str]:
    g = plan_program(p).graph
    return {t.name: map_kind(g, t)[0] for t in g.shared}


def test_arrays_only_added_to_are_per_cpu_maps_added_to_without_atomics() -> None:
    plan = plan_program(load_program(TALLY, ["edge.device=xdp"]))
    assert {t.name: map_kind(plan.graph, t)[0] for t in plan.graph.shared} == {
        "protos": "percpu", "lengths": "percpu", "budget": "percpu", "tiny": "percpu"}
    src = generate_xdp(plan, "xdp")
    for m in ("protos", "lengths", "budget"):
        decl = src[src.index(f"struct ofl_{m}_v {{"):src.index(f"}} ofl_{m} SEC")]
        assert "BPF_MAP_TYPE_PERCPU_ARRAY" in decl and "MMAPABLE" not in decl
    # the body's atomic add is a plain add there (no other CPU writes this copy)
    assert "#define __sync_fetch_and_add(p, v, ...) ((void)(*(p) += (v)))" in src
    assert "#undef __sync_fetch_and_add" in src
    lines = explain(plan).splitlines()
    assert ("  lengths: uint32_t[23] in xdp memory; used by tally; a BPF per-CPU array map: "
            "every use adds to it (tally): one copy per CPU, no atomics, summed when read"
            ) in lines


class Limited(Element):
    """Passes the first frames, then drops: it reads its counter in the datapath."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    tables = ("passed", "sizes")
    drops = {"over": "more frames than the limit"}
    body = r"""
    if (passed[0] >= 100u) DROP_WHY(over);   /* read: every CPU must see one count */
    passed[0] += 1;
    sizes[pkt->len & 3u] += 1;   // only added to
    """


class Fetched(Element):
    """Uses the value an atomic add returns: a read too."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    tables = ("ticket",)
    body = r"""
    uint64_t mine = __sync_fetch_and_add(&ticket[0], 1);
    if (mine & 1u) DROP();
    """


class Peek(Handler):
    """Answers with the first count."""

    tables = ("counts",)
    body = "REPLY(&counts[0], sizeof counts[0]);"


def _chain(*middle: Element, handler: Handler | None = None, device: str = "xdp") -> Program:
    p = one_segment(*middle, device=device)
    if handler is not None:
        p.channel("peek", handler)
    return p


def test_an_array_read_in_the_datapath_stays_one_array_every_cpu_sees() -> None:
    passed, sizes = Shared("passed", "uint32_t", 1), Shared("sizes", "uint64_t", 4)
    p = _chain(Limited("limit", passed=passed, sizes=sizes))
    assert _kinds(p) == {"passed": "array", "sizes": "percpu"}
    g = plan_program(p).graph
    assert map_kind(g, g.shared[0])[1] == (
        "element limit uses it otherwise than adding to it (a read, a store, its address "
        "or an add's result): every CPU must see one copy")
    src = generate_xdp(plan_program(p), "xdp")
    decl = src[src.index("struct ofl_passed_v {"):src.index("} ofl_passed SEC")]
    assert "BPF_MAP_TYPE_ARRAY" in decl and "PERCPU" not in decl
    assert "#define __sync" not in src


def test_an_atomic_adds_result_used_a_handler_or_a_big_array_keep_one_array() -> None:
    assert _kinds(_chain(Fetched("turns", ticket=Shared("ticket", "uint64_t", 1)))) == {
        "ticket": "array"}
    counts = Shared("counts", "uint64_t", 4)
    sizes = Shared("sizes", "uint64_t", 4)
    p = _chain(Limited("limit", passed=Shared("passed", "uint32_t", 1), sizes=counts),
               handler=Peek("peek", counts=counts))
    g = plan_program(p).graph
    assert map_kind(g, next(t for t in g.shared if t.name == "counts")) == (
        "array", "channel handler peek reads it over the mapped map (a per-CPU map cannot "
        "be mapped)")
    big = _chain(Limited("limit", passed=Shared("passed", "uint32_t", 1),
                         sizes=Shared("sizes", "uint64_t", 4097)))
    g = plan_program(big).graph
    assert map_kind(g, next(t for t in g.shared if t.name == "sizes")) == (
        "array", "its 32776 bytes are more than the 32 KiB a per-CPU map value holds")
    assert _kinds(_chain(Limited("limit", passed=Shared("passed", "uint32_t", 1),
                                 sizes=sizes))) == {"passed": "array", "sizes": "percpu"}


def _python_tally(capture: Path, mtu: int) -> dict[str, list[int]]:
    """The program's tables, counted by Python (dpkt) from the capture's IPv4 frames."""
    protos, lengths, budget, tiny = [0] * 8, [0] * 23, 0, [0] * 4
    for f in read_frames(capture):
        eth = dpkt.ethernet.Ethernet(f)
        if len(f) > mtu or not isinstance(eth.data, dpkt.ip.IP):
            continue
        k = {6: 0, 17: 1, 1: 2}.get(eth.data.p, 3)
        protos[k] += 1
        protos[4 + k] += len(f)
        lengths[min(len(f) >> 6, 22)] += 1
        budget -= len(f)
        tiny[len(f) & 1] = (tiny[len(f) & 1] + 1) % 256
        tiny[2] = (tiny[2] - 1) % 256
        tiny[3] = (tiny[3] + len(f)) % 256
    return {"protos": protos, "lengths": lengths, "budget": [budget], "tiny": tiny}


@needs_bpf
@pytest.mark.parametrize("capture", [TLS, QUIC], ids=["tls", "quic"])
def test_a_per_cpu_arrays_report_sums_its_cpus_as_the_nic_counts(capture: Path,
                                                                  tmp_path: Path) -> None:
    """tests/programs/xdp_proto_tally.py on xdp, the replay sending each frame from the
    next CPU (--xdp-spread: both CPUs' copies added to), reports the NIC's tables."""
    got = {}
    for device in ("nic", "xdp"):
        b = build(load_program(TALLY, [f"edge.device={device}"]))
        res = run(b, RunOptions(input=capture, output=tmp_path / f"{device}.pcap", timeout=60,
                                xdp_spread=device == "xdp"))
        assert res.ok, res.errors
        got[device] = summarize(b.plan, res.stats), (tmp_path / f"{device}.pcap").read_bytes()
    (nic, nic_out), (on_xdp, xdp_out) = got["nic"], got["xdp"]
    assert on_xdp["tables"] == nic["tables"] == _python_tally(capture, nic["mtu"])
    assert xdp_out == nic_out and on_xdp["elements"] == nic["elements"]


@needs_bpf
def test_a_limit_read_in_xdp_holds_over_both_cpus_as_on_the_nic(tmp_path: Path) -> None:
    """Limited reads its count in the datapath: one array every CPU sees, so 100
    frames pass on xdp with the frames sent from both CPUs, as on the NIC (per-CPU
    copies would pass 100 per CPU)."""
    frames = [f for f in read_frames(TLS) if len(f) <= 1514]
    assert len(frames) > 200
    tx = {}
    for device in ("nic", "xdp"):
        p = _chain(Limited("limit", passed=Shared("passed", "uint32_t", 1),
                           sizes=Shared("sizes", "uint64_t", 4)), device=device)
        b = build(p)
        res = run(b, RunOptions(input=TLS, output=tmp_path / f"{device}.pcap", timeout=60,
                                xdp_spread=device == "xdp"))
        assert res.ok, res.errors
        s = summarize(b.plan, res.stats)
        tx[device] = s["elements"]["tx"]["in"], s["tables"]["passed"]
    assert tx["xdp"] == tx["nic"] == (100, [100])


def test_xdp_spread_errors_come_before_any_process_starts() -> None:
    on_nic = plan_program(load_program(TALLY))
    with pytest.raises(OfflowError, match=r"^--xdp-spread: no segment of `xdp_proto_tally` is "
                       r"on xdp \(--set SEG.device=xdp\)$"):
        xdp.run_options(on_nic, None, "generic", TLS, spread=True)
    on_xdp = plan_program(load_program(TALLY, ["edge.device=xdp"]))
    with pytest.raises(OfflowError, match=r"^--xdp-spread: with --iface lo the packets come "
                       "from the interface, on the CPUs its NIC gives them to$"):
        xdp.run_options(on_xdp, "lo", "generic", None, spread=True)
    assert xdp.run_options(on_xdp, None, "generic", TLS, spread=True) == [
        "--opt", "xdp.spread=1"]
