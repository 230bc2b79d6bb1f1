"""The packet's timestamp crosses a queue when something after it reads it or a sink
writes it, like any live field: an output capture keeps the input's timestamps (to the
nanosecond: the sink writes nanosecond pcap, and microsecond inputs still read), and
what an element reads from pkt->ts_ns does not depend on placement."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import dpkt
import pytest

from offlow.build import compile_program
from offlow.dsl.loader import load_program
from offlow.passes.cbody import analyze_body
from tests.e2e import EXAMPLE, QUIC, TLS, run_example
from tests.test_e2e import expected_forwarded

STAMPS = Path(__file__).resolve().parent / "programs" / "stamps.py"
ROOT = Path(__file__).resolve().parents[1]


NANO = (0xA1B23C4D).to_bytes(4, "little")  # a nanosecond pcap's magic, as written here


def records(path: Path) -> list[tuple[int, bytes]]:
    """(timestamp in ns, frame) of every record, read by dpkt: exact from a nanosecond
    capture (dpkt gives a Decimal), to the microsecond from a microsecond one."""
    with open(path, "rb") as f:
        nano = f.read(4) == NANO
        f.seek(0)
        return [(int(ts * 10**9) if nano else round(ts * 1e6) * 1000, bytes(buf))
                for ts, buf in dpkt.pcap.Reader(f)]


@pytest.mark.parametrize("placement", [[], ["rx.device=host"]], ids=["nic-host", "host"])
@pytest.mark.parametrize("capture", [TLS, QUIC], ids=["tls", "quic"])
def test_an_output_capture_keeps_the_input_timestamps(
        capture: Path, placement: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(placement, input=capture, output=out)
    assert s["ok"], s["errors"]
    inp = records(capture)
    kept = [ts for ts, f in inp if expected_forwarded([f])]  # what the pipeline forwards
    got = records(out)
    assert [f for _, f in got] == expected_forwarded([f for _, f in inp])
    assert [ts for ts, _ in got] == kept
    assert len(set(kept)) > 100  # real, distinct times, not one value for all


def test_the_demo_command_writes_every_frame_with_its_timestamp(tmp_path: Path) -> None:
    """The README's demo as a user types it."""
    out = tmp_path / "X.pcap"
    res = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(EXAMPLE), "--input",
                          str(TLS), "--output", str(out)], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ}, timeout=300)
    assert res.returncode == 0, res.stderr
    got, inp = records(out), records(TLS)
    assert len(got) == len(inp) == 1095
    assert [ts for ts, _ in got] == [ts for ts, _ in inp]


@pytest.mark.parametrize("placement", [[], ["rx.device=host"]], ids=["nic-host", "host"])
def test_a_timestamp_with_nanoseconds_survives_a_run(placement: list[str],
                                                     tmp_path: Path) -> None:
    """A nanosecond capture (epoch times with every digit set) in, the sink's nanosecond
    capture out: each forwarded frame keeps its time to the nanosecond."""
    frames = [f for _, f in records(TLS)][:300]
    stamps = [1_700_000_000_123_456_789 + 1_000_003 * k for k in range(len(frames))]
    inp, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    with open(inp, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535, nano=True)
        for t, frame in zip(stamps, frames, strict=True):
            w.writepkt(frame, ts=Decimal(t) / 10**9)
    assert records(inp)[1][0] == stamps[1]  # written as meant
    s = run_example(placement, input=inp, output=out)
    assert s["ok"], s["errors"]
    assert out.read_bytes()[:4] == NANO
    got = records(out)
    assert [f for _, f in got] == expected_forwarded(frames)
    assert [ts for ts, _ in got] == [t for t, f in zip(stamps, frames, strict=True)
                                     if expected_forwarded([f])]
    assert len(got) > 100


@pytest.mark.parametrize("placement", [[], ["rx.device=host"]], ids=["nic-host", "host"])
def test_an_element_reads_the_same_timestamps_wherever_the_parser_runs(
        placement: list[str]) -> None:
    s = run_example(placement, program=STAMPS, input=TLS)
    assert s["ok"], s["errors"]
    v4 = [ts for ts, f in records(TLS) if isinstance(dpkt.ethernet.Ethernet(f).data, dpkt.ip.IP)]
    us = [ts // 1000 for ts in v4]
    assert s["tables"]["times"] == [sum(us), min(us), max(us)]


def test_the_timestamp_crosses_only_where_it_is_read_or_written() -> None:
    g = compile_program(load_program(STAMPS))
    (q,) = g.queues
    by_dst = {c.edge.dst: c for c in q.channels}
    assert by_dst["age"].carries_ts and by_dst["v6"].carries_ts
    # an element that reads only fields and no sink after it: no timestamp, 16 B entries
    tee = compile_program(load_program(ROOT / "tests" / "programs" / "tee.py"))
    stats = next(q for q in tee.queues if q.dst_segment == "stats")
    assert [c.carries_ts for c in stats.channels] == [False]


@pytest.mark.parametrize(("body", "reads_ts"), [
    ("uint64_t t = pkt->ts_ns; (void)t;", True),
    ("pkt->ts_ns = 0;", True),  # (conservative: a write is not a kill here)
    ("my_helper(pkt);", True),  # code that is handed the packet may read it
    ("if (pkt->len < 60) DROP(); pkt->data[0] = 1;", False),
    ("state->ttl = 1;", False),
])
def test_body_analysis_sees_timestamp_reads(body: str, reads_ts: bool) -> None:
    info = analyze_body(body, element="e", outputs=["out"], fields={"ttl": "uint8_t"})
    assert info.reads_ts is reads_ts
