"""The target interface: what a device target tells the compiler and the runner.

A target is where a segment can run (`p.segment(..., device=NAME)`). It says:
- whether it is usable on this machine, and why not (`unusable`: a missing package,
  no device), in the formats `missing_package` and `no_device` give;
- which elements and constructs it accepts (`refuse_node`, `refuse_segment`: a
  placement it cannot run is a compile error naming the element, the target and the
  reason), and whether its process reads the files tables are built from;
- how it generates code for its segments from the plan (`generate`) and builds it
  (`build`);
- how its part of a run starts (`start`: a process the runner watches, as it watches
  every part, and stops with a signal), over which interconnect (`interconnect`,
  `init_transport`), and how it reports stats (`read_stats`).

docs/targets.md says how to add one."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from offlow.errors import OfflowError

if TYPE_CHECKING:
    from offlow.ir import Graph, Node, Segment
    from offlow.plan import Plan


class CompileC(Protocol):
    """Compiles one generated C file with the runtime into an executable
    (offlow.build): the program's runtime libraries and `more`, a target's own
    (runtime/lib/NAME)."""

    def __call__(self, c_file: Path, exe: Path, more: Sequence[str] = ()) -> None: ...


def missing_package(package: str, what: str, install: str = "apt-get install") -> str:
    """The reason a target needs a package that is not installed here."""
    return f"missing package `{package}` ({what}; {install} {package})"


def header_found(header: str) -> bool:
    """gcc finds `header` (in its system folders, or where CPATH points: a package
    installed elsewhere, or a lent machine's bundle, tools/lent.sh)."""
    res = subprocess.run(["gcc", "-E", "-x", "c", "-"], input=f"#include <{header}>\n",
                         capture_output=True, text=True)
    return res.returncode == 0


def no_device(what: str) -> str:
    """The reason a target has no device to run on here."""
    return f"no device ({what})"


@dataclass(frozen=True)
class Part:
    """One device's part of a run, as the runner starts it: its executable, the run's
    window and the file its stats go to, and the arguments and file descriptors every
    part gets (options, liveness pipes, sockets); for a device reached over a network
    (remote), its address and the run's shared secret."""

    device: str
    binary: Path
    window: Path
    stats: Path
    cpu_base: int
    args: tuple[str, ...]
    pass_fds: tuple[int, ...]
    endpoint: str = ""
    secret: bytes = field(default=b"", repr=False)
    wrap: tuple[str, ...] = ()  # a command a process target runs the part under


class Target:
    """A device target (see the module's doc). Subclasses set the class attributes
    and implement generate, build and start."""

    name: ClassVar[str] = ""
    runs: ClassVar[str] = ""  # what runs where, in a few words (`offlow targets`)
    interconnect: ClassVar[str] = ""  # how its segments reach the other devices'
    # Its process reads the files tables are built from (prefix files...). A device
    # without a file system (a NIC) gets a table that can travel from one that has.
    reads_table_files: ClassVar[bool] = True
    # Where it reads them: its process can also send a table that travels to the devices
    # that cannot (over the table's bulk channel in this machine's window).
    sends_tables: ClassVar[bool] = True
    # Its default offload batch and depth, when it runs segments in batches (gpu):
    # then `--set SEG.batch=N --set SEG.depth=N` apply; None: it takes no such settings.
    offload: ClassVar[tuple[int, int] | None] = None
    # Its process serves the control channel ctl.NAME of each table it holds (offlow ctl).
    serves_control: ClassVar[bool] = True
    # Where serves_control is False: it serves the control channel of each shared hash
    # map (SharedMap) it holds all the same.
    serves_map_control: ClassVar[bool] = False
    # Why its processes take no reloads (offlow reload) though they serve control; ""
    # when they take them.
    no_reload: ClassVar[str] = ""

    def unusable(self) -> str | None:
        """Why this target cannot run here (missing_package, no_device), or None."""
        return None

    def cpu_base(self, ncpus: int) -> int:
        """The CPU its core 0 runs on (an emulated device shares this machine's)."""
        return 0

    def refuse_node(self, g: Graph, node: Node) -> str | None:
        """Why it cannot run `node` (an element, source, sink or channel handler of
        compiled graph `g`), or None when it can."""
        return None

    def refuse_segment(self, g: Graph, segment: Segment) -> str | None:
        """Why it cannot run `segment` as placed (its cores, a core group), or None."""
        return None

    def generate(self, plan: Plan, device: str) -> dict[str, str]:
        """The source files (name -> text) of `device`'s part of the plan; every part
        also has the plan's common.h beside them."""
        raise NotImplementedError

    def build(self, plan: Plan, device: str, directory: Path, compile_c: CompileC) -> Path:
        """Build `device`'s part from its files in `directory`; return what start runs."""
        raise NotImplementedError

    def init_transport(self, binary: Path, window: Path) -> None:
        """Create the run's interconnect before any part starts, with this target's
        executable `binary`."""
        raise NotImplementedError

    def start(self, part: Part) -> subprocess.Popen[bytes]:
        """Start `part`: a process the runner watches (its exit status says how it
        ended) and stops with SIGTERM or SIGINT (it then ends cleanly, stats written)."""
        raise NotImplementedError

    def failure(self, stats: Path) -> str | None:
        """Why its part failed, when the part wrote that down beside its stats file
        `stats`, as STATS.error (the run's error for it, instead of its exit status): a
        process's failure before its first packet (gen.c), a remote device's link."""
        path = stats.with_name(f"{stats.name}.error")
        return path.read_text() if path.exists() else None

    def untaken(self, stats: Path) -> dict[str, Any] | None:
        """What a part that failed before its first packet, its stats unwritten, left in
        the rings it would have consumed that their producers had already closed (none
        of its own taken), as STATS.untaken (ofl_prog_fail): {"device", "untaken": [a
        consumer side's ring counters, "lost" the entries it holds]}; None without it."""
        path = stats.with_name(f"{stats.name}.untaken")
        if not path.exists():
            return None
        try:
            return dict(json.loads(path.read_text()))
        except json.JSONDecodeError as e:
            raise OfflowError(f"the {self.name} process wrote an unreadable {path.name}: "
                              f"{e}") from None

    def wrote_stats(self, path: Path) -> bool:
        """Whether its part left stats to read at `path` (read_stats)."""
        return path.exists()

    def read_stats(self, path: Path) -> dict[str, Any]:
        """The stats its part wrote at exit (the run report's input: cores, elements,
        queues, tables, sinks; docs/run-result.schema.json)."""
        try:
            return dict(json.loads(path.read_text()))
        except json.JSONDecodeError as e:
            raise OfflowError(f"the {self.name} process wrote an unreadable stats file: "
                              f"{e}") from None
