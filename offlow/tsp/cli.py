"""`offlow tsp`: the best tour of a TSPLIB file from 2-opt climbs on nic, host or gpu."""

from __future__ import annotations

import argparse
import json
import runpy
from pathlib import Path
from typing import TYPE_CHECKING

from offlow.argtypes import File, NewFile, Whole
from offlow.errors import OfflowError
from offlow.ir.graph import OFFLOAD_DEPTH_MAX
from offlow.paths import DATA, ROOT

if TYPE_CHECKING:
    from offlow.dsl import Program

EXAMPLE = ROOT / "examples" / "tsp.py"
GPU_BATCH, GPU_DEPTH = 2500, 2  # the gpu climber's work-items per batch, batches in flight
# TSPLIB's published optimal tour lengths of the instances the project ships
OPTIMA = {"kroA100": 21282}


def default_file() -> Path:
    """The TSP instance a run takes when given none: kroA100 of the real inputs."""
    return DATA / "kroA100.tsp"


def example(device: str, path: Path) -> Program:
    """examples/tsp.py's program with its climbers on `device` (host or nic)."""
    return runpy.run_path(str(EXAMPLE))["program"](device, path=path)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--file", type=File(), default=None,
                   help="TSPLIB EUC_2D file (default: $OFFLOW_DATA/kroA100.tsp)")
    p.add_argument("--device", choices=("nic", "host", "gpu"), default="nic",
                   help="where the climbers run")
    p.add_argument("--climbs", type=Whole(1, 1 << 40), default=10_000,
                   help="climbs from random tours")
    p.add_argument("--climbers", type=Whole(1), default=None,
                   help="nic/host: climber threads in the device's process (default 1; "
                        "with --program, its table's option says)")
    p.add_argument("--job", type=Whole(1, 1 << 20), default=None,
                   help="climbs per job the manager hands out (default 50; gpu: climbs per "
                        "work-item, default 1)")
    p.add_argument("--batch", type=Whole(1, 1 << 20), default=None,
                   help=f"gpu: work-items per batch (default {GPU_BATCH})")
    p.add_argument("--depth", type=Whole(1, OFFLOAD_DEPTH_MAX), default=None,
                   help=f"gpu: batches in flight (default {GPU_DEPTH})")
    p.add_argument("--seed", type=Whole(0, 1 << 62), default=1, help="seed of the first climb")
    p.add_argument("--program", type=File(), default=None,
                   help="nic/host: your own program with a `tsp` channel served by "
                        "ClimbJobs (default: examples/tsp.py)")
    p.add_argument("--json-out", type=NewFile(), default=None, help="write the result as JSON")
    p.set_defaults(fn=cli)


def cli(a: argparse.Namespace) -> int:
    from offlow.dsl.loader import load_program
    from offlow.tsp import gpu, manager

    path = a.file or default_file()
    if a.device == "gpu":
        if a.program:
            raise OfflowError("--program is for nic and host (the gpu climber has no program)")
        if a.climbers is not None:
            raise OfflowError(f"--climbers {a.climbers}: is for nic and host (the gpu runs "
                              "--batch work-items at once)")
        r, where = gpu.run(path, a.climbs, a.job or 1, a.batch or GPU_BATCH,
                           a.depth or GPU_DEPTH, a.seed)
        where = f"gpu ({where})"
    else:
        for name, value in (("--batch", a.batch), ("--depth", a.depth)):
            if value is not None:
                raise OfflowError(f"{name} {value}: is for --device gpu (on {a.device} the "
                                  "climbers take jobs one at a time)")
        if a.program and (a.climbers is not None or a.file is not None):
            raise OfflowError("--climbers and --file are examples/tsp.py's: with --program, "
                              "your program's table says")
        prog = load_program(a.program) if a.program else example(a.device, path)
        opts = () if a.program else (f"cities.climbers={a.climbers or 1}",)
        r = manager.run(prog, a.climbs, a.job or 50, a.seed, opts)
        where = f"{a.device}, {r.climbers} climber thread(s)"
    source = a.program or path  # (a program of the user's names its own file)
    optimum = None if a.program else OPTIMA.get(path.stem)
    gap = f" ({(r.length - optimum) / optimum:+.2%} vs the optimum {optimum:,})" if optimum else ""
    print(f"{source}: {r.cities} cities; best of {r.climbs:,} climbs on {where}: "
          f"{r.length:,}{gap}, climb seed {r.seed}")
    print(f"{r.climbs:,} climbs in {r.seconds:.3f} s ({r.jobs:,} jobs)")
    print("tour:", " ".join(str(c + 1) for c in r.tour))
    if a.json_out:
        a.json_out.write_text(json.dumps({"file": str(source), "device": a.device,
                                          "where": where, "optimum": optimum,
                                          "length": r.length, "seed": r.seed,
                                          "climbs": r.climbs, "jobs": r.jobs,
                                          "climbers": r.climbers, "seconds": r.seconds,
                                          "tour": list(r.tour)}, indent=1) + "\n")
    return 0
