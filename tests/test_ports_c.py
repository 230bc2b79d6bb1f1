"""The port libraries' C tests: DPDK's ethdev source and sink on the net_ring PMD
(runtime/lib/dpdk/tests/test_dpdk_port.c: loopback byte for byte, zero copy, drops
given back, counters, bad arguments) and the afpacket port on a veth pair
(tests/c/test_live_port.c). Built plain and with ASan+UBSan."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ctools import C_TESTS, assert_passed, build_c, lib_test, run_c
from tests.test_ports import needs_dpdk, needs_root, netns  # noqa: F401 (netns: a fixture)


@needs_dpdk
@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_dpdk_port_on_net_ring(sanitize: bool) -> None:
    exe = build_c([lib_test("dpdk", "test_dpdk_port")], "test_dpdk_port", ["dpdk"], sanitize)
    assert_passed(run_c(exe, timeout=120))


@needs_root
@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_afpacket_port_on_a_veth_pair(sanitize: bool, netns: str) -> None:  # noqa: F811
    exe = build_c([C_TESTS / "test_live_port.c"], "test_live_port", sanitize=sanitize)
    res = run_c(Path("ip"), "netns", "exec", netns, str(exe), "in0", "peer0", timeout=120)
    assert_passed(res)
