"""The gpu target (offlow/targets/gpu.py): segments compiled to OpenCL kernels run over
pipelined batches, here on PoCL (the CPU as the OpenCL device). The router's lookup
segment and a user's program give on gpu what they give on nic and host; what a
kernel cannot run is refused at compile time with the element and the reason."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from offlow import Element, Handler, Port, Program, Shared, Sink, Source
from offlow.build import build, compile_program, plan_program
from offlow.cli import main
from offlow.codegen.opencl import kernel_source, point_into_program, roi
from offlow.dsl.loader import load_program
from offlow.dsl.program import OFFLOAD_BATCH_MAX, OFFLOAD_DEPTH_MAX
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.errors import OfflowError
from offlow.plan import make_plan
from offlow.report import summarize
from offlow.runner import RunOptions, build_for, run
from offlow.targets import gpu, host, nic
from tests.ctools import assert_passed, build_c, lib_test, run_c
from tests.e2e import QUIC, ROOT, TLS, read_frames, run_example
from tests.example_outputs import CASES, outputs, recorded

ROUTER = ROOT / "examples" / "router.py"
USER = ROOT / "tests" / "programs" / "gpu_route.py"
WHY = gpu.TARGET.unusable()
needs_opencl = pytest.mark.skipif(WHY is not None, reason=f"gpu target: {WHY}")


# ---- the router's lookups on gpu ----------------------------------------------------

@needs_opencl
@pytest.mark.parametrize("case", ["router-tls", "router-quic", "router-malformed",
                                  "router-synthetic"])
def test_router_lookups_on_gpu_output_what_nic_and_host_output(case: str) -> None:
    """The IPv4 and IPv6 lookup segment on gpu: the same frames, byte for byte, and the
    same counters per element, queue and table as the recorded run with it on the NIC
    (and, on the full BGP table, with it on the host). Three processes: the NIC's
    parser leaves when its input ends while the gpu process still works."""
    c = next(c for c in CASES if c.name == case)
    got = outputs(replace(c, settings=("route.device=gpu",)))
    assert got == recorded()[case]
    if case == "router-synthetic":
        on_host = recorded()["router-route-on-host"]
        assert (got["pcap"], got["frames"]) == (on_host["pcap"], on_host["frames"])


@needs_opencl
def test_many_small_batches_in_flight_keep_order_and_counts() -> None:
    """Batches of 7 packets, 3 in flight: many more batches than slots, the last one
    partial; what leaves is what leaves the NIC's run, in the same order."""
    c = next(c for c in CASES if c.name == "router-tls")
    got = outputs(replace(c, settings=("route.device=gpu", "route.batch=7", "route.depth=3")))
    assert got == recorded()["router-tls"]


# ---- a user's program ---------------------------------------------------------------

FIB = ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.128/25", "192.0.2.7/32",
       "128.0.0.0/2", "127.0.0.0/8", "2001:db8::/32", "2001:db8:1::/48", "2001:db8:1:2:3::/80",
       "2001:db8:1:2:3:4:5:6/128", "2600::/12"]


def _user_run(tmp_path: Path, device: str, capture: Path | None) -> tuple[list[bytes],
                                                                           dict[str, Any]]:
    fib = tmp_path / "fib.txt"
    fib.write_text("\n".join(FIB) + "\n")
    out = tmp_path / f"out-{device}.pcap"
    synth: dict[str, Any] = ({} if capture else
                             {"count": 3000, "seed": 11, "prefixes": fib,
                              "sizes": "60:3,61:1,577:1,1499:1"})
    # (on gpu: batches of 100, four in flight)
    offload = ("work.batch=100", "work.depth=4") if device == "gpu" else ()
    s = run_example((f"work.device={device}", *offload), program=USER,
                    input=capture, output=out,
                    opts=(f"fib4.path={fib}", f"fib6.path={fib}"), **synth)
    assert s["ok"], s["errors"]
    return read_frames(out), {"elements": s["elements"], "accounting": s["accounting"]}


@needs_opencl
@pytest.mark.parametrize("capture", [TLS, QUIC, None], ids=["tls", "quic", "synthetic"])
def test_a_users_program_gives_the_same_output_on_gpu_nic_and_host(
        capture: Path | None, tmp_path: Path) -> None:
    """Its own element names, comments in its bodies, 3-byte, 64-bit and bool fields,
    a switch whose two outputs leave the offloaded segment, lookups on tables of its
    own names (drops with reasons where no route covers the destination) and a packet
    byte it rewrites in the kernel: the frames and the counters of its run with `work`
    on gpu are those of the runs with it on nic and on host."""
    frames, counts = _user_run(tmp_path, "gpu", capture)
    assert frames  # (something forwarded: the comparison is not of two empty runs)
    for other in ("host", "nic") if capture is None else ("host",):
        assert _user_run(tmp_path, other, capture) == (frames, counts), other
    reasons = {d["reason"] for d in counts["accounting"]["dropped"]}
    if capture == QUIC:
        assert "no_route" in reasons  # (some of its destinations are in no FIB prefix)


class OddOut(Element):
    """Drops packets to odd IPv4 destinations (reads the state only: the packet bytes do
    not cross to the device, yet leave the segment whole)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    drops = {"odd": "an odd destination"}
    body = "if (state->dst4 & 1u) DROP_WHY(odd); /* even ones go on */"


@needs_opencl
def test_a_segment_that_never_reads_the_packet_keeps_its_bytes_on_the_host(
        tmp_path: Path) -> None:
    outs = {}
    for device in ("gpu", "host"):
        p = _placed(OddOut("odd_out"), settings=(f"mid.device={device}",))
        if device == "gpu":
            r = roi(plan_program(p).graph, plan_program(p).segment("mid"))
            assert not r.uses_pkt  # (the case this test is about)
        out = tmp_path / f"{device}.pcap"
        res = run(build(p), RunOptions(input=QUIC, output=out, timeout=60))
        assert res.ok, res.errors
        outs[device] = read_frames(out)
    assert outs["gpu"] == outs["host"] and outs["gpu"]


# ---- placement, settings, explain ---------------------------------------------------

def test_explain_shows_the_offload_batch_depth_and_what_crosses(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(ROUTER), "--set", "route.device=gpu", "--set",
                 "route.batch=1024", "--set", "route.depth=3"]) == 0
    out = capsys.readouterr().out
    assert ("  route: offloaded in batches of up to 1024 packets, 3 in flight (copy in, "
            "kernel, copy out overlap on separate queues; --set route.batch=N, "
            "route.depth=N)") in out
    assert "  route: lpm4, lpm6 run per packet (on gpu: one work-item per packet)" in out
    # what crosses (Knapp's RoI): the fields the segment reads or writes, the bytes
    # because DecTTL rewrites them; back only what it writes
    assert ("  route: to the kernel per packet: dst4, hop, l3_off, dst6, ttl and the packet "
            "bytes; back: hop, ttl, the bytes; tables in device buffers: routes4, routes6"
            ) in out
    plan = plan_program(load_program(ROUTER, ["route.device=gpu"]))
    seg = plan.segment("route")
    assert (seg.batch, seg.depth, seg.vector) == (gpu.DEFAULT_BATCH, gpu.DEFAULT_DEPTH, ())


@pytest.mark.parametrize("setting, message", [
    ("route.batch=0", f"segment `route`: batch must be 1..{OFFLOAD_BATCH_MAX}"),
    ("route.batch=65537", f"segment `route`: batch must be 1..{OFFLOAD_BATCH_MAX}"),
    ("route.depth=9", f"segment `route`: depth must be 1..{OFFLOAD_DEPTH_MAX}"),
    ("route.depth=two", "--set `route.depth=two`: depth must be a number"),
])
def test_bad_offload_settings_are_one_clear_error(setting: str, message: str) -> None:
    with pytest.raises(OfflowError) as err:
        load_program(ROUTER, ["route.device=gpu", setting])
    assert str(err.value) == message


def test_offload_settings_on_a_target_that_takes_none_are_refused() -> None:
    with pytest.raises(OfflowError) as err:
        plan_program(load_program(ROUTER, ["route.batch=512"]))
    assert str(err.value) == (
        "segment `route`: batch and depth are offload settings of a target that runs "
        "batches (gpu); target `nic` takes none: remove them or place the segment on gpu")


class Count(Handler):
    """Counts the messages it gets."""

    tables = ("t",)
    body = "t[0]++; REPLY(msg, len);"


class Make(Element):
    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = "struct ofl_pkt p2 = *pkt; MAKE(out, &p2); DROP();"


class Tee(Element):
    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("a", "ip.v4"), Port("b", "ip.v4"))
    body = "SEND(a); SEND(b);"


class Quits(Element):
    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = 'if (pkt->len < 20) FAIL("runt of %u bytes", pkt->len); // a user\'s check'


class Stamp(Element):
    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"when": "uint64_t"}
    body = "state->when = pkt->ts_ns;"


class Tallies(Element):
    """Code at the end of its stream (at_end): state a kernel's work-items cannot keep."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = "EMIT(out);"
    at_end = "return;  /* nothing to add */"


class OnlyBatch(Element):
    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    batch_body = "(void)pkts; (void)states; (void)n;"


class UsesKvs(Element):
    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    includes = ("offlow/kvstore.h",)
    body = "pkt->data[0] = 1;"


class Counts(Element):
    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    tables = ("seen",)
    body = "seen[0]++;"


def _placed(*middle: Element, settings: tuple[str, ...] = ()) -> Program:
    """rx (nic) -> middle (gpu) -> tx (host)."""
    p = Program("user")
    src, eth, v4, other, out = Source("rx"), ParseEth("eth"), CheckIPv4("v4"), \
        Discard("other"), Sink("tx")
    src >> eth
    eth["ipv4"] >> v4
    eth["ipv6"] >> other
    eth["other"] >> other
    last: Element = v4
    for m in middle:
        if len(m.outputs) > 1:
            last["out"] >> m
            m[m.outputs[0].name] >> out
            m[m.outputs[1].name] >> out
            last = m
            break
        last[last.outputs[0].name] >> m
        last = m
    if len(last.outputs) == 1:
        last[last.outputs[0].name] >> out
    p.segment("rx", [src, eth, v4, other], device="nic")
    p.segment("mid", list(middle), device="gpu")
    p.segment("tx", [out], device="host")
    for s in settings:
        p.apply_setting(s)
    return p


@pytest.mark.parametrize("element, reason", [
    (Make("mk"), "element `mk` (Make) cannot run on target `gpu`: it builds packets (MAKE); "
                 "a work-item has one packet and sends it on one output, or drops it; place "
                 "segment `mid` on another device"),
    (Tee("tee"), "element `tee` (Tee) cannot run on target `gpu`: it sends copies of a packet "
                 "(SEND); a work-item has one packet and sends it on one output, or drops it; "
                 "place segment `mid` on another device"),
    (Quits("quits"), "element `quits` (Quits) cannot run on target `gpu`: it fails its core "
                     "(FAIL); a work-item cannot stop the run: drop the packet with a reason "
                     "(DROP_WHY) instead; place segment `mid` on another device"),
    (Stamp("st"), "element `st` (Stamp) cannot run on target `gpu`: it reads the packet's "
                  "capture time (pkt->ts_ns), which does not cross to the device; place "
                  "segment `mid` on another device"),
    (Tallies("ta"), "element `ta` (Tallies) cannot run on target `gpu`: it has code to run "
                    "at the end of its stream (at_end), after its last packet; a kernel's "
                    "work-items keep nothing between packets; place segment `mid` on "
                    "another device"),
    (OnlyBatch("vb"), "element `vb` (OnlyBatch) cannot run on target `gpu`: it has only a "
                      "batch body, which runs over a vector of packets on one core; a kernel "
                      "runs one work-item per packet: give the element a per-packet body; "
                      "place segment `mid` on another device"),
    (UsesKvs("kv"), "element `kv` (UsesKvs) cannot run on target `gpu`: its body uses "
                    "offlow/kvstore.h, a runtime library with no OpenCL form (a kernel has "
                    "pkt.h's parsers and the LPM tables' lookups); place segment `mid` on "
                    "another device"),
    (Counts("ct", seen=Shared("seen", "uint64_t", 4)),
     "element `ct` (Counts) cannot run on target `gpu`: its table `seen` (uint64_t) has no "
     "device-buffer form (the gpu target has the LPM tables': struct ofl_lpm4, struct "
     "ofl_lpm6); place segment `mid` on another device"),
])
def test_what_a_kernel_cannot_run_is_refused_with_the_element_and_reason(
        element: Element, reason: str) -> None:
    with pytest.raises(OfflowError) as err:
        plan_program(_placed(element))
    assert str(err.value) == reason


def test_a_sink_on_gpu_is_refused() -> None:
    p = load_program(ROUTER, ["route.device=gpu", "tx.device=gpu"])
    with pytest.raises(OfflowError) as err:
        plan_program(p)
    assert str(err.value) == (
        "segment `route` cannot run on target `gpu`: device `gpu` also runs segment tx; a "
        "gpu device runs one segment's kernel: put them in one segment, or name another gpu "
        "device")
    g = compile_program(load_program(ROUTER, ["tx.device=gpu"]))
    with pytest.raises(OfflowError) as err:
        make_plan(g, {"nic": nic.TARGET, "gpu": gpu.TARGET})
    assert str(err.value).startswith(
        "element `tx` (Sink) cannot run on target `gpu`: a sink reads or writes packets on "
        "this machine (a capture, a socket); a kernel only transforms them: place it in a "
        "segment on host or nic")


def test_a_core_group_or_several_cores_on_gpu_are_refused() -> None:
    for settings in (["route.cores=0,1"], ["route.cores=0,1", "route.group=on"]):
        with pytest.raises(OfflowError) as err:
            plan_program(load_program(ROUTER, ["route.device=gpu", *settings]))
        assert str(err.value) == (
            "segment `route` cannot run on target `gpu`: the kernel's work-items are its "
            "parallelism; one host thread drives the device: give it one core (cores=[0])")


def test_a_channel_handler_on_gpu_is_refused() -> None:
    p = _placed(CheckIPv4("again"))
    p.channel("c", Count("h", t=Shared("t", "uint64_t", 1)), device="gpu")
    with pytest.raises(OfflowError) as err:
        plan_program(p)
    assert str(err.value) == (
        "channel `c`: handler `h` (Count) cannot run on target `gpu`: a channel handler runs "
        "on messages from the host, one at a time; a kernel runs over batches of packets")


class StaticLocal(Element):
    """C allows a static local; OpenCL C 1.2 does not."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = r"""
    static const uint8_t mark[2] = {1, 2};
    pkt->data[0] = mark[0];
    """


@needs_opencl
def test_a_body_the_opencl_compiler_refuses_is_a_compile_error_at_its_line() -> None:
    with pytest.raises(OfflowError) as err:
        build(_placed(StaticLocal("stat")))
    text = str(err.value)
    assert text.startswith("segment `mid` on gpu: the OpenCL compiler refused the kernel")
    # the compiler's words, pointing into this file at the body's static line
    line = Path(__file__).read_text().splitlines().index(
        "    static const uint8_t mark[2] = {1, 2};") + 1
    assert f"{Path(__file__).name}:{line}:" in text and "static" in text, text



def test_a_compiler_log_that_ignores_line_directives_still_points_into_the_program() -> None:
    """NVIDIA's OpenCL compiler names `<kernel>:LINE:COL` in the kernel's own lines (seen on
    an H100); the error must still point at the body's line in this file."""
    plan = plan_program(_placed(StaticLocal("stat")))
    kernel = kernel_source(plan, plan.segment("mid"))
    at = kernel.split("\n").index("    static const uint8_t mark[2] = {1, 2};") + 1
    log = (f"<kernel>:{at}:26: error: variables in function scope cannot be declared static\n"
           "<kernel>:1:1: note: before any #line")
    line = Path(__file__).read_text().splitlines().index(
        "    static const uint8_t mark[2] = {1, 2};") + 1
    assert point_into_program(log, kernel) == (
        f"{Path(__file__)}:{line}:26: error: variables in function scope cannot be declared "
        "static\n<kernel>:1:1: note: before any #line")

# ---- the runtime's gpu library ------------------------------------------------------

@needs_opencl
@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_gpu_library_c(sanitize: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """runtime/lib/gpu/tests/test_gpu.c: N-deep pipelined batches through a kernel,
    in order, the slots' states and the library's errors; its depth limit is the
    planner's (OFFLOAD_DEPTH_MAX). Under ASan, PoCL's own allocations are not leaks
    of ours (lsan.supp)."""
    supp = lib_test("gpu", "test_gpu").with_name("lsan.supp")
    monkeypatch.setenv("LSAN_OPTIONS", f"suppressions={supp}")
    exe = build_c([lib_test("gpu", "test_gpu")], "test_gpu", ["gpu"], sanitize)
    res = run_c(exe, str(OFFLOAD_DEPTH_MAX), timeout=300)
    assert_passed(res)


@needs_opencl
def test_a_kernel_that_does_not_open_at_the_start_is_the_runs_one_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Built where OpenCL works, run where the gpu process finds no platform: the
    process's reason is the run's one error (ofl_start_failf, as any start failure), and
    what the NIC had sent it is counted lost in the ring (ofl_prog_fail), nothing
    unaccounted. Before (2026-11-28) the reason was a raw stderr line and the errors
    the bare exit status and a secondary core's."""
    o = RunOptions(count=100_000, timeout=120)
    b = build_for(load_program(ROUTER, ["route.device=gpu"]), o)
    monkeypatch.setenv("OCL_ICD_VENDORS", str(tmp_path))   # (an empty folder: no ICD)
    res = run(b, o)
    s = summarize(b.plan, res.stats)
    assert not res.ok and len(res.errors) == 1, res.errors
    assert res.errors[0].startswith("segment route: "), res.errors
    assert s["accounting"]["unaccounted"] == 0, s["accounting"]


def test_gpu_says_why_it_cannot_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(gpu, "CL_HEADER", "CL/no-such-header.h")
    assert gpu.TARGET.unusable() == (
        "missing package `opencl-c-headers` (the OpenCL headers the host side is compiled "
        "with; apt-get install opencl-c-headers)")
    monkeypatch.undo()
    monkeypatch.setattr(gpu, "opencl_platforms", lambda: 0)
    if gpu.header_found(gpu.CL_HEADER):
        assert gpu.TARGET.unusable() == (
            "no device (no OpenCL platform (none registered): apt-get install "
            "pocl-opencl-icd for the CPU, or a GPU driver's OpenCL ICD (OCL_ICD_VENDORS))")
    host.TARGET.unusable()  # (the other targets do not care)
