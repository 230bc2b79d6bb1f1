"""`offlow bench xdp --e2e` (benchmarks/xdp_e2e.py): its frames are what the program
forwards, and a short run measures every row through a veth pair in a namespace it
removes; no timing is asserted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import dpkt
import pytest

from benchmarks import xdp_e2e
from offlow.targets import xdp

WHY_NOT = xdp.TARGET.unusable() or (None if os.geteuid() == 0 else "not root")


def test_the_generators_frames_are_64_byte_ipv4_udp_with_good_checksums() -> None:
    frames = xdp_e2e.frames()
    assert len({f[30:34] for f in frames}) == len(frames) == 8  # 8 destinations
    for f in frames:
        ip = dpkt.ethernet.Ethernet(f).data
        assert len(f) == 60 and isinstance(ip, dpkt.ip.IP) and ip.len == 46 and ip.ttl == 64
        raw = bytes(f[14:34])
        total = sum(int.from_bytes(raw[k:k + 2], "big") for k in range(0, 20, 2))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        assert total == 0xFFFF
        assert isinstance(ip.data, dpkt.udp.UDP) and ip.data.ulen == 26


@pytest.mark.skipif(WHY_NOT is not None, reason=f"cannot run here: {WHY_NOT}")
def test_a_short_run_measures_each_placement_and_leaves_no_namespace(tmp_path: Path) -> None:
    res = xdp_e2e.measure(0.3)
    rows = {r["row"]: r for r in res["rows"]}
    assert list(rows) == [xdp_e2e.CEILING, "xdp", "xdp+host", "nic", "host"]
    for name in ("xdp", "xdp+host", "nic", "host"):
        r = rows[name]
        assert 0 < r["took"] <= r["sent"], r
        assert 0 < r["forwarded"] <= r["took"], r  # (a port's sink may drop, counted)
    assert rows["xdp"]["forwarded"] == rows["xdp"]["took"]  # every frame: TTL 64, good sums
    assert set(res["ratios"]) == {"xdp/nic", "xdp/host", "xdp+host/nic", "xdp+host/host",
                                  "xdp/generator alone"}
    report = xdp_e2e.format_report(res)
    assert "machine: " in report and "ratios: xdp/nic" in report
    xdp_e2e.plot(res, tmp_path / "e2e.png")
    assert (tmp_path / "e2e.png").read_bytes()[:4] == b"\x89PNG"
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"ofl-bench-e2e-{os.getpid()}" not in listed
