"""The gpu climber (runtime/tools/tsp_gpu.c): climbs as OpenCL work-items through
runtime/lib/gpu, run as a process of its own that is the manager on the host side.
Not a segment on the gpu target: the target runs one work-item per packet over
packet batches, and a climb is no packet (docs/tsp.md says why)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from offlow import cbuild
from offlow.codegen.opencl import build_options
from offlow.errors import OfflowError
from offlow.targets import get as target
from offlow.tsp.clib import load
from offlow.tsp.manager import Result

TSP = cbuild.description().library("tsp")
KERNEL = TSP.path / "cl" / "tsp_climbs.cl"
TOOLS = cbuild.RUNTIME / "tools"


def build() -> Path:
    return cbuild.build_exe("tsp_gpu", [TOOLS / "tsp_gpu.c", TOOLS / "tool_io.c"],
                            ["gpu", "tsp"], includes=[TOOLS])


def run(path: str | Path, climbs: int, per_item: int = 1, batch: int = 2500,
        depth: int = 2, seed: int = 1, timeout: float = 600.0) -> tuple[Result, str]:
    """`climbs` climbs on the OpenCL device: the best tour as a Result (climbers: the
    work-items of a batch) and the device's name."""
    why = target("gpu").unusable()
    if why:
        raise OfflowError(f"the gpu climber cannot run here: {why}")
    load(path)  # one clear error for a bad file, before the device starts
    if min(climbs, per_item, batch, depth) < 1:
        raise OfflowError("climbs, per-item, batch and depth must be at least 1")
    includes = f"{build_options()} -I{TSP.include}"
    res = subprocess.run([str(build()), str(path), str(KERNEL), includes, str(climbs),
                          str(per_item), str(batch), str(depth), str(seed)],
                         capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise OfflowError(f"the gpu climber failed (exit {res.returncode}): "
                          f"{res.stderr.strip()[-2000:]}")
    out = json.loads(res.stdout)
    jobs = -(-climbs // per_item)
    r = Result(out["length"], tuple(out["tour"]), out["seed"], climbs, out["seconds"],
               out["cities"], min(batch, jobs), jobs)
    return r, out["device"]
