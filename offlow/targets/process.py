"""What the host and the emulated NIC share: each device is an OS process running the
C the compiler generates for it (offlow.codegen.c) linked with the runtime; the
processes meet in the interconnect window, a file in /dev/shm that the first of them
creates (--init) and every one maps."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from offlow.errors import OfflowError
from offlow.lifecycle import signals_deferred
from offlow.targets.base import CompileC, Part, Target, missing_package

if TYPE_CHECKING:
    from offlow.plan import Plan


def init_window(binary: Path, window: Path) -> None:
    """Create the run's window with a device's executable (`--init`)."""
    init = subprocess.run([str(binary), "--init", "--window", str(window)],
                          capture_output=True, text=True)
    if init.returncode != 0:
        raise OfflowError(f"cannot set up the interconnect window: {init.stderr.strip()}")


class ProcessTarget(Target):
    """A device run as a process of this machine."""

    def unusable(self) -> str | None:
        if shutil.which("gcc") is None:
            return missing_package("gcc", "the C compiler that builds each device's process")
        return None

    def generate(self, plan: Plan, device: str) -> dict[str, str]:
        from offlow.codegen.c import generate_device

        return {f"{device}.c": generate_device(plan, device)}

    def build(self, plan: Plan, device: str, directory: Path, compile_c: CompileC) -> Path:
        exe = directory / device
        compile_c(directory / f"{device}.c", exe)
        return exe

    def init_transport(self, binary: Path, window: Path) -> None:
        init_window(binary, window)

    def start(self, part: Part) -> subprocess.Popen[bytes]:
        cmd = [*part.wrap, str(part.binary), "--window", str(part.window), "--stats",
               str(part.stats), "--cpu-base", str(part.cpu_base), *part.args]
        # started with SIGINT and SIGTERM blocked (the mask is inherited): one sent
        # before the process blocks them itself stays pending (stop.h), instead of
        # killing it or, inherited ignored, being dropped
        with signals_deferred():
            return subprocess.Popen(cmd, pass_fds=part.pass_fds)
