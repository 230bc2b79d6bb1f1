"""The xdp target's map control in C (runtime/tools/tests/test_xdp_mapctl.c): a kernel
E2BIG on a set is the map full (counted), an ENOMEM the kernel out of memory (said so,
not counted); a real BPF hash map, preallocated or not, refusing a third key. Built plain
and with ASan+UBSan."""

from __future__ import annotations

import pytest

from offlow.targets import xdp
from offlow.targets.base import missing_package
from tests.ctools import assert_passed, build_c, run_c

TEST = xdp.TOOLS / "tests" / "test_xdp_mapctl.c"


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_xdp_map_control_counts_only_a_full_map_as_full(sanitize: bool) -> None:
    if not xdp.BPF_HEADERS.exists():
        pytest.skip(missing_package("libbpf-dev", "libbpf: the BPF map the xdp target's map "
                                    "control runs on"))
    exe = build_c([TEST, xdp.TOOLS / "xdp_mapctl.c", xdp.TOOLS / "xdp_tables.c"],
                  "test_xdp_mapctl", ["map", "lpm"], sanitize, link=["-lbpf"],
                  includes=[xdp.TOOLS])
    res = run_c(exe)
    assert_passed(res)
    assert "the kernel refuses" in res.stdout or "not preallocated: a third refused" in \
        res.stdout, res.stdout
