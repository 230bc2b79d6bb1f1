"""The host: segments placed on `host` run in the host process, on the machine's CPUs
from CPU 0."""

from __future__ import annotations

from offlow.targets.process import ProcessTarget


class Host(ProcessTarget):
    name = "host"
    runs = "the host process, host core c on CPU c"
    interconnect = "the window in /dev/shm, which it maps (to itself: rings in its memory)"
    reads_table_files = True

    def cpu_base(self, ncpus: int) -> int:
        return 0


TARGET = Host()
