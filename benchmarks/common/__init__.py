"""What the benchmarks share, at the bottom of the benchmarks package: the machine
description (machine), the peers' setup from Debian (peers), the routes and
addresses the router benchmarks use (routes), how repeated measurements are summed up
(spread) and where a result is written (output). Nothing here imports a benchmark."""

from pathlib import Path

C = Path(__file__).resolve().parents[1] / "c"  # the benchmarks' C drivers
