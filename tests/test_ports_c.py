"""The port libraries' C tests: DPDK's ethdev source and sink on the net_ring PMD
(runtime/lib/dpdk/tests/test_dpdk_port.c: loopback byte for byte, zero copy, drops
given back, counters, bad arguments) and the afpacket port on a veth pair
(tests/c/test_live_port.c). Built plain and with ASan+UBSan."""

from __future__ import annotations

import subprocess

import pytest

from tests.ctools import build_c, lib_test, run_c
from tests.test_ports import needs_dpdk


def _check(name: str, res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode == 0, (f"{name} exited {res.returncode}\n--- stdout ---\n"
                                 f"{res.stdout[-20000:]}\n--- stderr ---\n{res.stderr[-5000:]}")
    assert "0 failure(s)" in res.stdout, res.stdout[-20000:]


@needs_dpdk
@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_dpdk_port_on_net_ring(sanitize: bool) -> None:
    exe = build_c([lib_test("dpdk", "test_dpdk_port")], "test_dpdk_port", ["dpdk"], sanitize)
    _check("test_dpdk_port", run_c(exe, timeout=120))
