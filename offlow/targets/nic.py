"""The emulated NIC: a separate OS process with its own memory and cores pinned from
the middle of the machine's CPUs up, which reaches the host only through the
interconnect window (descriptor rings, doorbells, a copy engine, channels), so the
code paths are those of a real device. Like a NIC it has no file system for tables:
a table it builds from a file is read by the host and sent over a bulk channel."""

from __future__ import annotations

import os
from pathlib import Path

from offlow.targets.base import no_device
from offlow.targets.process import ProcessTarget

SHM = Path("/dev/shm")


class Nic(ProcessTarget):
    name = "nic"
    runs = "an emulated NIC: a process of its own, NIC core c on CPU ncpus/2 + c"
    interconnect = ("the window in /dev/shm: descriptor rings with doorbells, a copy "
                    "engine, channels")
    reads_table_files = False

    def unusable(self) -> str | None:
        if not os.access(SHM, os.W_OK | os.X_OK):
            return no_device(f"{SHM} is not a writable folder: the window lives there")
        return super().unusable()

    def cpu_base(self, ncpus: int) -> int:
        return ncpus // 2


TARGET = Nic()
