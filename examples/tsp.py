"""NFComms' TSP case study: 2-opt iterative hill climbing on kroA100 (TSPLIB), with
the climbers on a device and a manager on the host.

The cities and their climbers are one table (`cities`) in the process of the device
that serves the `tsp` channel, which reads the TSPLIB file, builds the distances and
starts its climber threads (this program has no host process: on `nic` the NIC's
process reads the file). The host's manager (offlow.tsp.manager) posts
jobs of climbs on the channel and fetches each job's best tour in bulk from the
circular result queue. The `idle` segment only holds the device's process: its
cores serve no packets.

    offlow tsp --device nic --climbers 2

(`--device host` puts the climbers in the host process; the gpu climber: docs/tsp.md)
"""

import os
from pathlib import Path

from offlow import Program, Source
from offlow.elements import Discard
from offlow.elements.tsp import ClimbJobs, climbers_table

DATA = Path(os.environ.get("OFFLOW_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def program(device: str = "nic", climbers: int = 1,
            path: str | Path = DATA / "kroA100.tsp") -> Program:
    p = Program("tsp")
    cities = climbers_table("cities", path, climbers)
    src, idle = Source("rx"), Discard("idle")
    src >> idle
    p.segment("idle", [src, idle], device=device, cores=[0])
    p.channel("tsp", ClimbJobs("jobs", cities=cities), device=device)
    return p
