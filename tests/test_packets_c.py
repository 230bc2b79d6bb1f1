"""The packet side of the C runtime: header parsers and checksums (test_pkt.c), the
pcap and synthetic ports and the source kinds libraries add (test_ports.c), each
built plain and with ASan+UBSan and run as a program that prints its checks and exits
non-zero on failure.  The
parsers also classify the malformed capture of offlow.testing frame by frame."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow.paths import DATA
from offlow.testing import malformed_cases, write_malformed_pcap
from tests.ctools import C_TESTS, assert_passed, build_c, run_c

needs_data = pytest.mark.skipif(
    not (DATA / "tls_ciphers.pcap").exists(), reason=f"shared captures not found in {DATA}")


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_parsers_and_checksums(sanitize: bool) -> None:
    exe = build_c([C_TESTS / "test_pkt.c"], "test_pkt", sanitize=sanitize)
    assert_passed(run_c(exe, timeout=120))


@needs_data
@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_pcap_and_synthetic_ports(sanitize: bool, tmp_path: Path) -> None:
    exe = build_c([C_TESTS / "test_ports.c"], "test_ports", sanitize=sanitize)
    res = run_c(exe, str(DATA), str(tmp_path), timeout=120)
    assert_passed(res)
    # source kinds a library adds: what the runtime says of each (test_source_kinds)
    assert "offlow nic: source rx: unknown kind `fake` (pcap, synth, udp, afpacket)\n" in res.stderr
    assert "offlow nic: source rx: fake rx part 1 of 2, loops 3\n" in res.stderr
    assert ("offlow nic: source tx: unknown kind `other` (pcap, synth, udp, afpacket, "
            "fake)\n") in res.stderr


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_parsers_classify_the_malformed_capture_frame_by_frame(
        sanitize: bool, tmp_path: Path) -> None:
    exe = build_c([C_TESTS / "test_ports.c"], "test_ports", sanitize=sanitize)
    path = tmp_path / "malformed.pcap"
    counts = write_malformed_pcap(path)
    res = run_c(exe, "classify", str(path), timeout=60)
    assert res.returncode == 0, res.stderr
    got = res.stdout.split()
    # the record cut by the snap length is never delivered: counted by the source
    cases = [c for c in malformed_cases() if not c.cut]
    assert f"cut short: {counts['cut_short']}\n" in res.stderr and counts["cut_short"] == 1
    assert len(got) == counts["total"] - counts["cut_short"] == len(cases)
    wrong = [(c.name, c.category, g) for c, g in zip(cases, got, strict=True) if c.category != g]
    assert wrong == []
