"""The segmentation offload's C side: cutting sends by message kind (test_lso.c: every
packet read back with the header parsers and the slow reference checksum, PIO and DMA
alike, every malformed descriptor refused for its reason) and the send port
(test_lso_port.c: host and device threads through the double-buffered send buffer and
the two FIFOs, refusals completed in order, either side's death noticed), each built
plain and with ASan+UBSan."""

from __future__ import annotations

import pytest

from tests.ctools import assert_passed, build_c, lib_test, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_sends_are_cut_into_the_packets_the_rfcs_describe(sanitize: bool) -> None:
    exe = build_c([lib_test("lso", "test_lso")], "test_lso", ["lso"], sanitize)
    assert_passed(run_c(exe, timeout=300))


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_the_send_port_moves_every_send_and_its_completion(sanitize: bool) -> None:
    exe = build_c([lib_test("lso", "test_lso_port")], "test_lso_port", ["lso"], sanitize)
    assert_passed(run_c(exe, timeout=300))
