"""tools/gpu_check.sh, the GPU machine's check, in its quickest mode on the OpenCL
device here (PoCL): it finds what it needs, runs a gpu test, the gpu climber's test, a
tiny bench sweep and 500 climbs on the device, and writes summary.json, the JUnit
report and the JSON into the folder it is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offlow.buildcache import cache_dir
from offlow.router.check import DEFAULT_PREFIXES
from offlow.targets import gpu
from tests.e2e import ROOT

WHY = gpu.TARGET.unusable()


@pytest.mark.skipif(WHY is not None, reason=f"gpu target: {WHY}")
@pytest.mark.skipif(not DEFAULT_PREFIXES.exists(), reason="no BGP table ($OFFLOW_DATA)")
def test_the_gpu_check_writes_its_results_as_json(tmp_path: Path) -> None:
    out = tmp_path / "check"
    # the suite's build cache (the check's default is one of its own, empty here: every
    # runtime library, test and tool it runs was compiled again for it)
    env = dict(os.environ, OFFLOW_PYTHON=sys.executable,
               OFFLOW_DATA=str(DEFAULT_PREFIXES.parent), OFFLOW_LENT_WORK=str(tmp_path / "work"),
               OFFLOW_CACHE=str(cache_dir()))
    res = subprocess.run([str(ROOT / "tools" / "gpu_check.sh"), str(out), "--smoke"],
                         capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    bench = json.loads((out / "bench_gpu.json").read_text())
    assert summary["ok"] and summary["smoke"]
    assert summary["tests"]["tests"] >= 1 and summary["tests"]["failures"] == 0
    assert summary["device"] == bench["device"]
    assert summary["bench_best"]["wrong"] == 0
    assert (out / "tests.xml").exists() and (out / "check.log").exists()
    # the gpu climber's test ran, and offlow tsp's 500 climbs on the device
    assert "gpu_climber" in (out / "tests.xml").read_text()
    tsp = json.loads((out / "tsp_gpu.json").read_text())
    assert summary["tsp_gpu"] == {"climbs": 500, "seconds": tsp["seconds"],
                                  "best": tsp["length"], "optimum": 21282}
