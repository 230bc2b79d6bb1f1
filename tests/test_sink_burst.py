"""A sink in its source's segment takes the batch's packets in one burst at the
batch's end (offlow.passes.fuse, offlow.codegen.vector): what it writes is still in
the order it was reached, with copies (written at once) among the batch's packets."""

from __future__ import annotations

from pathlib import Path

from offlow.build import plan_program
from offlow.dsl.loader import load_program
from tests.e2e import TLS, read_frames, run_example

FORK = Path(__file__).parent / "programs" / "fork_marks.py"


def marked(frame: bytes, mark: int) -> bytes:
    return bytes([mark]) + frame[1:]


def test_the_plan_names_the_sink_of_a_source_segment() -> None:
    plan = plan_program(load_program(FORK))
    assert plan.segment("only").bursts == ("to_wire",)


def test_copies_and_batch_packets_leave_in_the_order_they_reached_the_sink(
        tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(program=FORK, input=TLS, output=out)
    assert s["ok"], s["errors"]
    frames = read_frames(TLS)
    want = []
    for f in frames:  # per frame: its copy (odd length), then itself
        if len(f) % 2:
            want.append(marked(f, 0xA5))
        want.append(marked(f, 0x5B))
    assert sum(len(f) % 2 for f in frames) >= 2  # the capture has both kinds
    assert read_frames(out) == want
