"""`offlow bench gpu` runs its lookups on the OpenCL device (PoCL here) beside the
copy-only ceiling and the host's batched lookups, over every batch size and depth it
is given; every answer of the device is checked, and the report says what the device
is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import gpu
from offlow.router.check import DEFAULT_PREFIXES

TINY = gpu.Sweep(routes=2_000, batches=(32, 300), depths=(1, 3), lookups=3_000,
                 addresses=4_096)
WHY = gpu.TARGET.unusable()


@pytest.mark.skipif(WHY is not None, reason=f"gpu target: {WHY}")
@pytest.mark.skipif(not DEFAULT_PREFIXES.exists(), reason="no BGP table ($OFFLOW_DATA)")
def test_bench_gpu_measures_every_point_beside_its_ceiling_and_peer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gpu.json"
    png = tmp_path / "gpu.png"
    res = gpu.run(quick=True, out_json=out, sweep=TINY, out_png=png)
    assert json.loads(out.read_text()) == json.loads(json.dumps(res))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    points = {(p["batch"], p["depth"]): p for p in res["points"]}
    assert set(points) == {(b, d) for b in TINY.batches for d in TINY.depths}
    for (b, _), p in points.items():
        assert p["wrong"] == 0 and p["lookups"] % b == 0 and p["lookups"] >= TINY.lookups
        assert p["gpu_s"] > 0 and p["copy_s"] > 0 and p["host_s"] > 0
    assert res["routes"] == TINY.routes and res["addresses"] == TINY.addresses
    text = capsys.readouterr().out
    assert "batch depth |  gpu M/s    lat us | copy M/s gpu/copy | host M/s gpu/host" in text
    assert "machine: " in text and "CPU features: " in text
    if res["pocl"]:
        assert "(PoCL: the OpenCL device is this machine's CPU" in text
