"""What `offlow plan` is asked (offlow.planner.plan answers it): apart from the planner,
which imports the compiler and the runner, so that the command line can say its
defaults without them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PlanRequest:
    program: Path
    device: str  # a profile's name or path
    host: str = "host"
    workload: str = "synthetic"
    settings: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()  # each: --set lines separated by spaces
    work: tuple[str, ...] = ()  # ELEMENT=KIND
    packets: int = 100_000
    top: int = 12
    validate: bool = False  # also measure each shown placement (profile-scaled emulation)
    repeats: int = 10  # --validate: rounds (calibrations and the measured run) per placement
    progress: Callable[[str], None] | None = None  # told each step of a long plan
