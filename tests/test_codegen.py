"""Generated code beyond the example: one packet sent on two outputs (a copy each),
a queue carrying a field but no packet bytes, three segments over two host cores."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import dpkt

from offlow.build import compile_program
from offlow.dsl.loader import load_program
from tests.e2e import TLS, read_frames, run_example
from tests.test_e2e import expected_forwarded

TEE = Path(__file__).parent / "programs" / "tee.py"


def ipv4_frames(frames: list[bytes]) -> list[bytes]:
    return [f for f in frames
            if isinstance(dpkt.ethernet.Ethernet(f).data, dpkt.ip.IP)]


def test_field_only_queue_carries_no_packet_bytes() -> None:
    g = compile_program(load_program(TEE))
    q = next(q for q in g.queues if q.dst_segment == "stats")
    assert [f.name for f in q.fields] == ["ip_proto"]
    assert not q.carries_data


def test_tee_sends_a_copy_to_each_output(tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    s = run_example(program=TEE, input=TLS, output=out)
    assert s["ok"], s["errors"]
    v4 = ipv4_frames(read_frames(TLS))
    # every IPv4 packet reaches both branches: counted by protocol from the field alone...
    protos = Counter(dpkt.ethernet.Ethernet(f).data.p for f in v4)
    counts = s["tables"]["proto_counts"]
    assert {p: counts[p] for p in protos} == dict(protos)
    assert sum(counts) == len(v4)
    # ...and forwarded with the TTL decremented, unaffected by the other branch
    assert read_frames(out) == expected_forwarded(v4)
    stats_q = next(q for q in s["queues"] if q["to"] == "stats")
    assert stats_q["entry_bytes"] == 16 and stats_q["delivered"] == len(v4)
    assert stats_q["bytes"] == 16 * len(v4)  # only the 16-byte entries crossed
    fwd_q = next(q for q in s["queues"] if q["to"] == "fwd")
    # header + fields + the timestamp the sink writes (24 B), then only the packet's own
    # bytes, rounded up to 8
    assert fwd_q["bytes"] == sum((24 + len(f) + 7) // 8 * 8 for f in v4)
