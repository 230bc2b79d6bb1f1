"""The remote target (docs/remote.md): a device process on another machine, started
there by `offlow serve-device`, which `offlow run --remote NAME=ADDR:PORT` reaches over
UCX. Here the runner starts a stand-in for the device (runtime/tools/remote_host.c):
it sends the device's executable and arguments, and carries the rings that cross
between the run's window here and a window of the same layout there, with the window
header's abort, stop and drained words, its peers' liveness and the runner's signals.
Its exit is the device's. Its process reads the files tables are built from on its own
machine (the same paths must hold them there)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offlow import cbuild
from offlow.errors import OfflowError
from offlow.ir import Graph, Node
from offlow.ir.graph import CTL_CHANNEL_PREFIX
from offlow.lifecycle import signals_deferred
from offlow.targets.base import CompileC, Part, header_found, missing_package
from offlow.targets.process import ProcessTarget

if TYPE_CHECKING:
    from offlow.plan import Plan

TOOLS = cbuild.RUNTIME / "tools"
UCX_HEADER = "ucp/api/ucp.h"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
# The part arguments the stand-in keeps (its liveness pipes) or drops (a reload's
# description lives here; the device takes no reloads yet).
_LOCAL = ("--runner-fd", "--peer-fd", "--reload")
MAX_CHANNELS = 64  # a remote device's channels at most (PART_CHANS_MAX, remote_chan.h)


def device_name(device: str) -> str:
    """NAME of device `remote:NAME`; a clear error for a malformed one."""
    name = device.partition(":")[2]
    if not _NAME.fullmatch(name):
        raise OfflowError(f"device `{device}`: a remote device is `remote:NAME`, NAME of "
                          "1..32 lowercase letters, digits and _ (starting with a letter)")
    return name


def tool(kind: str) -> Path:
    """The stand-in (`host`) or the device's server (`serve`), built once."""
    return cbuild.build_exe(f"offlow-remote-{kind}", [TOOLS / f"remote_{kind}.c",
                            TOOLS / "remote_part.c", TOOLS / "remote_chan.c",
                            TOOLS / "tool_io.c"], ["remote"],
                            includes=[TOOLS])


def ring_dirs(plan: Plan, device: str) -> str:
    """For each ring of the window, in order: `o` when `device` produces it, `i` when it
    consumes it, `-` when it crosses nothing there."""
    out = []
    for r in plan.rings:
        src, dst = plan.ring_ends(r)
        if src != dst and src.startswith("remote:") and dst.startswith("remote:"):
            raise OfflowError(f"queue `{r.queue.name}` joins two remote devices ({src}, "
                              f"{dst}): their rings cross through the host only (not yet)")
        out.append("o" if src == device != dst else "i" if dst == device != src else "-")
    return "".join(out)


def carried(plan: Plan, device: str) -> list[str]:
    """The channels the link carries for `device`: those its handlers serve, and the
    control channel of each table it holds (offlow ctl)."""
    return ([c.name for c in plan.device(device).channels] +
            [CTL_CHANNEL_PREFIX + t.name for t in plan.graph.shared if t.ctl == device])


class Remote(ProcessTarget):
    name = "remote"
    runs = ("a device process on another machine, under `offlow serve-device` there; "
            "`device=\"remote:NAME\"`, reached with `offlow run --remote NAME=ADDR:PORT`")
    interconnect = ("UCX (TCP here; shared memory or RDMA where present): the rings that "
                    "cross, in batches of entries with credits back, and the channels "
                    "(direct messages; bulk transfers by rendezvous, CRC32C checked at the "
                    "far end), after a mutual proof of a shared secret")
    reads_table_files = True  # on its own machine
    sends_tables = False  # (its tables' files are on the other machine)
    # its tables' control channels cross the link as the program's channels do
    no_reload = ("its process runs on another machine, where the new build's code is not "
                 "(a reload would need it sent across the link: not built); stop the run "
                 "and start it again with the new program")

    def unusable(self) -> str | None:
        if not header_found(UCX_HEADER):
            return missing_package("libucx-dev", "UCX, the transport to a remote device")
        return super().unusable()

    def cpu_base(self, ncpus: int) -> int:
        return ncpus // 2  # of its own machine, as on nic

    def refuse_node(self, g: Graph, node: Node) -> str | None:
        if node.kind == "handler":
            device = next(c.device for c in g.channels if c.handler is node)
            n = sum(c.device == device for c in g.channels)
            if n > MAX_CHANNELS:
                return (f"a remote device carries at most {MAX_CHANNELS} channels across the "
                        f"link; `{device}` has {n}")
        window = {t.name for t in g.shared if t.home == "window"}
        shared = sorted(ref for _, ref in node.tables if ref in window)
        if shared:
            return (f"it uses the table `{shared[0]}`, which lives in the window other "
                    "devices share; a remote device has a window of its own: give the "
                    "table one home (use it on one device)")
        return None

    def build(self, plan: Plan, device: str, directory: Path, compile_c: CompileC) -> Path:
        exe = super().build(plan, device, directory, compile_c)
        exe.with_name(f"{exe.name}.rings").write_text(ring_dirs(plan, device))
        chans = carried(plan, device)
        if len(chans) > MAX_CHANNELS:  # (the program's alone: refuse_node, when planned)
            raise OfflowError(f"a remote device carries at most {MAX_CHANNELS} channels across "
                              f"the link; `{device}` has {len(chans)} with its tables' "
                              "control channels")
        exe.with_name(f"{exe.name}.chans").write_text("".join(f"{c}\n" for c in chans))
        tool("host")
        return exe

    def start(self, part: Part) -> subprocess.Popen[bytes]:
        if not part.endpoint:
            raise OfflowError(f"device `{part.device}`: no address; give --remote "
                              f"{device_name(part.device)}=ADDR:PORT")
        local, rest = [], []
        args = list(part.args)
        while args:
            a = args.pop(0)
            if a in _LOCAL:
                local.append((a, args.pop(0)))
            else:
                rest.append(a)
        cmd = [str(tool("host")), "--device", part.device, "--connect", part.endpoint,
               "--window", str(part.window), "--stats", str(part.stats), "--exe",
               str(part.binary), "--rings",
               part.binary.with_name(f"{part.binary.name}.rings").read_text()]
        cmd += [x for k, v in local if k != "--reload" for x in (k, v)]
        chans = part.binary.with_name(f"{part.binary.name}.chans").read_text().split()
        cmd += [x for c in chans for x in ("--chan", c)]
        cmd += ["--", "--cpu-base", str(part.cpu_base), *rest]
        env = {**os.environ, "OFFLOW_REMOTE_SECRET": part.secret.decode("latin-1")}
        with signals_deferred():
            return subprocess.Popen(cmd, pass_fds=part.pass_fds, env=env)

    def wrote_stats(self, path: Path) -> bool:
        return path.exists() or path.with_name(f"{path.name}.link").exists()

    def read_stats(self, path: Path) -> dict[str, Any]:
        """The device's stats (when they came back) and, as `link`, what crossed the
        link and was not delivered (the stand-in's STATS.link: LINK_DROPS)."""
        out = super().read_stats(path) if path.exists() else {}
        link = path.with_name(f"{path.name}.link")
        if link.exists():
            try:
                out["link"] = {k: int(v) for k, v in json.loads(link.read_text()).items()}
            except (json.JSONDecodeError, ValueError, AttributeError) as e:
                raise OfflowError(f"the remote stand-in wrote an unreadable {link.name}: "
                                  f"{e}") from None
            # the device's answers its server's end never took (withdrawn at its stop)
            out["link"]["chan_from_device"] = (out["link"].get("chan_from_device", 0)
                                               + int(out.get("chan_withdrawn", 0)))
        return out


TARGET = Remote()
