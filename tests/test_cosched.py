"""Segments placed on the same device core share one thread (co-scheduling): each
loop gets a turn per round, so a hand-off between them never waits for the CPU to
switch threads. Output and counts are those of separate threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow.build import build, compile_program
from offlow.dsl.loader import load_program
from offlow.explain import explain
from offlow.passes.fuse import CoreThread, threads
from offlow.runner import RunOptions, oversubscription
from tests.e2e import EXAMPLE, TLS, read_frames, run_example
from tests.test_e2e import expected_forwarded


def test_threads_group_loops_by_device_core() -> None:
    g = compile_program(load_program(EXAMPLE, ["rx.device=host", "app.cores=0,1"]))
    assert threads(g) == (CoreThread("host", 0, (("rx", 0), ("app", 0))),
                          CoreThread("host", 1, (("app", 1),)))
    split = compile_program(load_program(EXAMPLE))  # rx on the NIC: no sharing
    assert [t.loops for t in threads(split)] == [(("rx", 0),), (("app", 0),)]
    grouped = compile_program(load_program(EXAMPLE, ["rx.device=host", "app.cores=0,1",
                                                     "app.group=on"]))
    assert [t.loops for t in threads(grouped)] == [(("rx", 0),), (("app", 0),), (("app", 1),)]


def test_shared_core_runs_one_thread_with_the_same_output(tmp_path: Path) -> None:
    prog = load_program(EXAMPLE, ["rx.device=host"])
    b = build(prog, werror=True)
    host = b.sources["host.c"]
    assert "static void *ofl_thread_host_0(void *arg)" in host
    assert "ofl_seg_rx" not in host and "ofl_seg_app" not in host
    assert ("static const struct ofl_thread_use ofl_threads[] = {\n"
            "    { ofl_thread_host_0, ofl_ctxs },\n};") in host  # one thread, both loops
    assert oversubscription(b, RunOptions()) is None
    assert "host core 0: rx, app share one thread" in explain(b.plan)
    out = tmp_path / "out.pcap"
    s = run_example(["rx.device=host"], input=TLS, output=out, loops=2)
    assert s["ok"], s["errors"]
    assert read_frames(out) == expected_forwarded(read_frames(TLS)) * 2
    # Each segment's clock ran from its own first packet, not only the thread's lead's.
    for seg in s["segments"]:
        assert seg["seconds"] > 0 and seg["mpps"] > 0, seg


def test_a_segment_partly_sharing_a_core_delivers_every_packet_once(tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(["rx.device=host", "app.cores=0,1"], input=TLS, output=out, loops=3)
    assert s["ok"], s["errors"]
    assert sorted(read_frames(out)) == sorted(expected_forwarded(read_frames(TLS)) * 3)
    by_seg = {x["segment"]: x for x in s["segments"]}
    assert by_seg["rx"]["packets"] == by_seg["app"]["packets"] == 3 * len(read_frames(TLS))


def test_a_full_ring_inside_one_thread_is_an_error_not_a_hang(
        capfd: pytest.CaptureFixture[str]) -> None:
    """A segment that sends two packets for each one it takes to a segment on its own
    core outruns it (the consumer takes one batch per ring per turn): with blocking
    enqueue the shared thread would wait forever for itself, so the run fails with a
    clear error instead."""
    from offlow import Element, Port, Program, Sink, Source
    from offlow.runner import run

    class Twice(Element):
        inputs = (Port("inp", "eth"),)
        outputs = (Port("a", "eth"), Port("b", "eth"))
        body = "SEND(a); SEND(b);"

    p = Program("twice", ring_size=8, batch=4)
    src, two, x, y = Source("rx"), Twice("two"), Sink("x"), Sink("y")
    src >> two
    two["a"] >> x
    two["b"] >> y
    p.segment("rx", [src, two], cores=[0])
    p.segment("out", [x, y], cores=[0])
    b = build(p, werror=True)
    # its one ring (to the consumer in its thread) fails when full: ofl_ring_use.fail_full
    assert ("static const struct ofl_ring_use ofl_rings_0_0[] = {\n"
            "    { 0u, 0u, 0u, 0u, true },\n};") in b.sources["host.c"]
    res = run(b, RunOptions(count=20_000, sizes="64", timeout=60))
    assert not res.ok
    err = capfd.readouterr().err
    assert "doorbell on rx->out: ring full, and its consumer runs in this same thread" in err
    # Given its own core, the same program delivers everything.
    p.place("out", cores=[1])
    res = run(build(p, werror=True), RunOptions(count=20_000, sizes="64", timeout=60))
    assert res.ok, res.errors
