"""PCSA on the NIC, asked over a direct channel: the summary equals an independent
Python sketch of the same sources bit for bit, and the estimate is within three
standard errors (0.78 / sqrt(m)) of the known distinct count."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from offlow.dsl.loader import load_program
from offlow.runner import RunOptions
from offlow.session import session
from offlow.sketch import pcsa_estimate, pcsa_standard_error
from offlow.sketch.app import EXAMPLE, format_result, ipv4_sources
from offlow.sketch.app import run as run_app
from offlow.targets import xdp
from offlow.testing.streams import distinct_sources_pcap
from tests.e2e import ROOT, TLS, run_example


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


def reference_bitmaps(sources: np.ndarray) -> list[int]:
    """The 2,048 bitmaps of the sources, computed here with a table CRC32C and the
    murmur3 finalizer (independent of the C code)."""
    table = _crc32c_table()
    bitmaps = [0] * 2048
    for a in set(sources.tolist()):
        crc = 0xFFFFFFFF
        for byte in a.to_bytes(4, "big"):
            crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
        h = crc ^ 0xFFFFFFFF
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        h ^= h >> 16
        rest = h & 0x1FFFFF
        bitmaps[h >> 21] |= 1 << ((rest & -rest).bit_length() - 1 if rest else 21)
    return bitmaps


def reference_summary(sources: np.ndarray) -> int:
    """Sum of R over the reference's 2,048 bitmaps."""
    total = 0
    for b in reference_bitmaps(sources):
        r = 0
        while b >> r & 1:
            r += 1
        total += r
    return total


def test_estimate_is_within_three_standard_errors_and_matches_the_reference(
        tmp_path: Path) -> None:
    distinct = 60_000
    capture = tmp_path / "sources.pcap"
    sources = distinct_sources_pcap(capture, distinct, 90_000, seed=3)
    with session(load_program(EXAMPLE), RunOptions(input=capture)) as s:
        s.wait_drained()
        summary = s.channel("pcsa").request(b"summary")
    sum_r, m, empty = struct.unpack("<III", summary)
    assert m == 2048 and empty == 0
    assert sum_r == reference_summary(sources)
    est = pcsa_estimate(summary)
    assert abs(est - distinct) / distinct < 3 * pcsa_standard_error(m)
    assert s.result is not None and s.result.ok, s.result


def test_reset_clears_the_sketch_and_the_program_keeps_counting(tmp_path: Path) -> None:
    capture = tmp_path / "sources.pcap"
    distinct_sources_pcap(capture, 500, 1000)
    with session(load_program(EXAMPLE), RunOptions(input=capture)) as s:
        s.wait_drained()
        ch = s.channel("pcsa")
        before = struct.unpack("<III", ch.request(b"summary"))
        after = struct.unpack("<III", ch.request(b"reset"))
        again = struct.unpack("<III", ch.request(b"summary"))
    assert before[0] > 0 and before[2] < 2048
    assert after == again == (0, 2048, 2048)


def test_small_counts_use_linear_counting(tmp_path: Path) -> None:
    capture = tmp_path / "few.pcap"
    distinct_sources_pcap(capture, 300, 900)
    r = run_app(capture)
    assert r["exact"] == 300 and r["empty_bitmaps"] > 1500
    assert abs(r["pcsa_error"]) < 0.1 < abs(r["pcsa_raw"] - 300) / 300


def test_the_application_compares_with_the_exact_count_and_hll() -> None:
    pytest.importorskip("datasketches")
    r = run_app(TLS)
    assert r["exact"] == len(np.unique(ipv4_sources(TLS))) > 0
    assert r["pcsa"] > 0 and r["hll"] > 0
    text = format_result(r)
    assert "exact distinct sources" in text and "DataSketches HLL" in text


XDP_PCSA = ROOT / "tests" / "programs" / "xdp_pcsa.py"
WHY_NOT_XDP = xdp.TARGET.unusable()


@pytest.mark.skipif(WHY_NOT_XDP is not None, reason=f"xdp cannot run here: {WHY_NOT_XDP}")
def test_the_sketch_updated_in_xdp_is_the_nics_and_the_references(tmp_path: Path) -> None:
    """tests/programs/xdp_pcsa.py with its segment on xdp: the kernel's XDP path sets
    the sketch's bits (one BPF array map value, atomic ORs; the CRC32C and the count of
    trailing zeros in their BPF forms, offlow/bpf.h), the host side reads it into the
    run's table report: the same 2,048 bitmaps as on the NIC for the same input, and as
    the Python reference computes them; the same counters."""
    capture = tmp_path / "sources.pcap"
    sources = distinct_sources_pcap(capture, 6000, 9000, seed=26)
    got = {}
    for device in ("nic", "xdp"):
        s = run_example([f"sources.device={device}"], XDP_PCSA, input=capture)
        assert s["ok"], s["errors"]
        got[device] = s
    nic, on_xdp = got["nic"], got["xdp"]
    assert on_xdp["segments"][0]["device"] == "xdp"
    assert on_xdp["tables"]["seen"] == nic["tables"]["seen"] == reference_bitmaps(sources)
    assert on_xdp["elements"] == nic["elements"]
    assert on_xdp["elements"]["count"]["in"] == 9000
