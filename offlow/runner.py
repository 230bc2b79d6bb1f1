"""Start the device processes of a built program, watch them, collect their stats.

Each device is its own OS process.  They share only the interconnect window (a
0600 file in /dev/shm).  Each process holds the write end of a liveness pipe whose
read end its peers poll: when a process dies, the kernel closes its end and the
peers see EOF within a millisecond of their next check, and exit with an error.
The runner holds such a pipe too (the lifeline: when it ends, however it ends, its
processes stop and clean up), and it watches every process of the run: the first
that fails stops the others.
"""

from __future__ import annotations

import importlib
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from offlow import live, livepage, metrics, optkeys, ports, remote, targets, windowfile
from offlow.argtypes import unwritable
from offlow.build import Build, build
from offlow.channels import WindowHeader
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.inputs import largest_synthetic, read_capture
from offlow.ir import Graph, SharedTable
from offlow.ir.graph import DEFAULT_MTU, MTU_MAX
from offlow.kvs.front import Front, build_front
from offlow.lifecycle import SHM, Terminated, run_folder, sweep_stale
from offlow.plan import Plan
from offlow.planner.profile import dilation
from offlow.planner.profile import load as load_profile
from offlow.programwarn import program_warnings
from offlow.reload import description_path, write_description
from offlow.targets import xdp
from offlow.targets.base import Part

PROGRESS_EVERY = 5.0  # seconds between progress lines on long runs



EMULATED = "nic"  # the device a --profile slows down (RunOptions.slowed)


@dataclass
class RunOptions:
    """What the packets are and where they go; nothing here changes the program."""

    input: Path | None = None  # pcap file for every Source; synthetic traffic when None
    output: Path | None = None  # pcap for the sink (several: out.SINK.pcap); else counted
    duration: float | None = None  # seconds; sources replay until then
    loops: int = 1  # replays of the input (pcap) or of `count` packets (synthetic)
    rate: float = 0.0  # packets/s per source core; 0 = as fast as possible
    count: int = 10000  # synthetic packets per replay
    sizes: str = "64:7,576:4,1500:1"  # synthetic frame-size mix, size:weight
    prefixes: Path | None = None  # synthetic destination prefixes (text or .gz)
    seed: int = 1
    copy_engine: str = "inline"  # or "thread"
    opts: tuple[str, ...] = ()  # NAME.KEY=VALUE for sources, sinks and tables (override)
    timeout: float | None = None  # kill the run after this many seconds
    serve: bool = False  # processes stay up serving channels until a session stops them
    #                      (or, run from the command line, until Ctrl-C)
    # Serve UDP clients on 127.0.0.1:PORT (0: a free port, see Run.udp_port): every source
    # reads datagrams from that socket, every sink sends replies on it; without a
    # duration the run lasts until Run.stop() (or Ctrl-C).
    udp_port: int | None = None
    # Serve TCP on 127.0.0.1:PORT (0: a free port, see Run.tcp_port): the listening
    # socket goes to the process that holds the program's table that serves TCP (a
    # table declared with tcp=True: the key-value store serves memcached over TCP from
    # its own threads); implies udp_port=0 when that is None.
    tcp_port: int | None = None
    tcp_max_conns: int = 4096  # connections served at once; more are closed at once
    # profile-scaled emulation: the device `nic` runs at this device profile's speed
    # (offlow.planner.profile: a preset's name or a YAML file; "": at this host's)
    profile: str = ""
    # the device the profile slows (the planner's calibration slows the host's one thread
    # as a run slows the NIC: offlow.planner.calibrate); the others are only timed
    slowed: str = EMULATED
    # of the slowed device, only these segments (the planner's calibration slows the
    # segments a placement puts on the device, not their neighbours on its one thread);
    # empty: all of them
    slowed_segments: tuple[str, ...] = ()
    # Serve the run's counters in the Prometheus text format on HOST:PORT while it runs
    # (offlow/metrics.py; port 0: a free one, see Run.metrics).
    metrics: str | None = None
    # Packet ports, `[NAME=]dpdk:ARGS` or `[NAME=]afpacket:IFACE` (offlow.ports): the
    # sources and sinks they name read and write a network device; a source on a port
    # runs until `duration` (its traffic has no end).
    ports: tuple[str, ...] = ()
    # A command each device process of a process target (host, nic) runs under, as
    # `offlow bench router` runs one under callgrind (valgrind --tool=callgrind ...).
    wrap: tuple[str, ...] = ()
    # The xdp target (offlow/targets/xdp.py): attach to this existing interface instead
    # of the run's own veth pair, and the XDP mode ("generic" or "native").
    iface: str | None = None
    xdp_mode: str = "generic"
    xdp_ring: int = 0  # entries of the AF_XDP socket's ring (0: the default, 1024)
    xdp_spread: bool = False  # the replay sends each frame from the next CPU
    # Remote devices (docs/remote.md): `NAME=ADDR:PORT` where the `offlow serve-device`
    # of device `remote:NAME` listens, and the file of the shared secret (else
    # OFFLOW_REMOTE_SECRET).
    remotes: tuple[str, ...] = ()
    secret_file: Path | None = None
    # Once asked to stop (Ctrl-C, SIGTERM, Run.stop), the processes have this long to
    # finish cleanly; those still up are then killed and named (a body that never
    # returns keeps its core from ever seeing the request).
    stop_grace: float = 15.0
    # Once the processes are started, write the run's window, offlow's pid, the
    # program's name and the devices running to this JSON file (offlow.windowfile).
    window_file: Path | None = None

    @property
    def takes_reloads(self) -> bool:
        """A run that lasts until stopped or for a set time takes new code for its
        segments while it runs (offlow reload, docs/reload.md)."""
        return self.serve or self.duration is not None


@dataclass
class RunResult:
    ok: bool
    stats: dict[str, Any]  # device -> that process's stats
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tcp: dict[str, Any] | None = None  # the TCP server's counters (tcp_port runs; the front's
    #                                     when the store is remote: offlow/kvs/front.py)
    interrupted: bool = False  # ended early by Ctrl-C in wait() or a Session's stop(): the
    #                            counts cover until then
    stopped_by: str = ""  # what interrupted it: "SIGINT" (Ctrl-C), "SIGTERM" or "stop()"


def emulation_note(stats: dict[str, Any]) -> str:
    """What profile-scaled emulation did to a device (its process's stats)."""
    cores = stats.get("cores", [])
    work = sum(c.get("work_ns", 0) + c.get("loop_ns", 0) for c in cores) / 1e6
    spun = sum(c.get("dilated_ns", 0) for c in cores) / 1e6
    copies = sum(c.get("copy_ns", 0) for c in cores) / 1e6
    return (f"its elements' and loops' {work:.1f} ms of work here were stretched by "
            f"{spun:.1f} ms (its {copies:.1f} ms of copies between rings and buffers, the "
            "emulated DMA engine's work, were not)")


def sink_paths(b: Build, output: Path) -> dict[str, Path]:
    """Where each sink writes: `output` itself for a program with one sink, else
    `output` with the sink's name before the suffix (out.pcap -> out.tx.pcap)."""
    return _sink_paths(b.graph, output)


def _sink_paths(g: Graph, output: Path) -> dict[str, Path]:
    sinks = [n.name for n in g.nodes if n.kind == "sink"]
    if len(sinks) == 1:
        return {sinks[0]: output}
    return {s: output.with_name(f"{output.stem}.{s}{output.suffix}") for s in sinks}


def _udp_opts(g: Graph, o: RunOptions) -> list[str]:
    """Sources and sinks on the run's UDP socket (the processes get it as --udp-fd)."""
    args: list[str] = []
    for n in g.nodes:
        kv = {"kind": "udp"} if n.kind in ("source", "sink") else {}
        if n.kind == "source" and o.duration is not None:
            kv["duration_ns"] = str(int(o.duration * 1e9))
        if n.kind == "source" and o.rate:
            kv["rate"] = str(o.rate)
        args += [a for k, v in kv.items() for a in ("--opt", f"{n.name}.{k}={v}")]
    return args


def _opts_for(plan: Plan, o: RunOptions, files: bool = True) -> list[str]:
    """The --opt (and --user-opt) arguments of every process of a run of `plan` for
    `o`, each user's --opt checked first: it names a source, sink or table object and a
    key that object reads (offlow.optkeys); with `files`, a table's files are there too
    (not when building: a host program may make them after, as offlow.lso does)."""
    g = plan.graph
    args: list[str] = []
    paths = _sink_paths(g, Path(o.output)) if o.output else {}
    if o.udp_port is not None:
        if not 0 <= o.udp_port <= 65535:
            raise OfflowError(f"UDP port {o.udp_port} is not within 0..65535")
        args = _udp_opts(g, o)
    on_port = ports.assign(o.ports, [n.name for n in g.nodes if n.kind == "source"],
                           [n.name for n in g.nodes if n.kind == "sink"])
    for name, port in on_port.items():
        args += port.options(name)
        if name in paths and o.output:
            raise OfflowError(f"--output {o.output}: the sink `{name}` writes to its --port")
    for n in g.nodes:
        if n.name in on_port and n.kind == "source":
            if o.duration is None:
                raise OfflowError(f"--port: the source `{n.name}` reads a port, whose traffic "
                                  "has no end: give --duration SECONDS")
            args += ["--opt", f"{n.name}.duration_ns={int(o.duration * 1e9)}",
                     "--opt", f"{n.name}.rate={o.rate}"]
        elif n.kind == "source" and o.udp_port is None:
            kv = {"kind": "pcap" if o.input else "synth", "loops": str(o.loops),
                  "rate": str(o.rate), "seed": str(o.seed), "count": str(o.count),
                  "sizes": o.sizes}
            if o.input:
                kv["path"] = str(o.input)
            if o.prefixes:
                kv["prefixes"] = str(o.prefixes)
            if o.duration is not None:
                kv["duration_ns"] = str(int(o.duration * 1e9))
                kv["loops"] = "0"
            args += [a for k, v in kv.items() for a in ("--opt", f"{n.name}.{k}={v}")]
        if n.name in paths and n.name not in on_port:
            args += ["--opt", f"{n.name}.path={paths[n.name]}"]
    for t in g.shared:
        args += [a for k, v in t.options for a in ("--opt", f"{t.name}.{k}={v}")]
    # only sources, sinks and table objects read options: one naming an element, an
    # array or a map went nowhere
    known = ({n.name for n in g.nodes if n.kind in ("source", "sink")}
             | {t.name for t in g.shared if t.is_object and not t.is_map})
    elements = {n.name: n.cls for n in g.nodes if n.kind == "element"}
    fixed = {t.name: "a hash map (SharedMap)" if t.is_map else "a shared array (Shared)"
             for t in g.shared if t.name not in known}
    # the keys each object reads, its kind set by the runner's options and the user's
    xdp_devices = frozenset(d.name for d in plan.devices if d.target == "xdp")
    iface = xdp_devices if o.iface else frozenset()
    reads = optkeys.object_reads(g, [*args[1::2], *o.opts], iface)
    # the kinds each source's and sink's process has (the port libraries --port links:
    # build_for's)
    linked = [k.name for k in ports.library_kinds(ports.parse(s)[1] for s in o.ports)]
    kinds = optkeys.object_kinds(g, linked, xdp_devices, iface)
    for opt in o.opts:  # later options win in the processes
        name, dot, rest = opt.partition(".")
        if not dot or "=" not in rest:
            raise OfflowError(f"--opt `{opt}`: expected NAME.KEY=VALUE")
        if name in fixed:
            raise OfflowError(f"--opt `{opt}`: table `{name}` is {fixed[name]}, which reads "
                              "no run-time options: its type and size are fixed when the "
                              "program is made; options name a source, sink or table "
                              f"object: {', '.join(sorted(known))}")
        if name not in known and name in elements:
            raise OfflowError(f"--opt `{opt}`: `{name}` is an element ({elements[name]}), "
                              "which reads no run-time options: its parameters are fixed "
                              "when the program is made (docs/elements.md); options name a "
                              f"source, sink or table: {', '.join(sorted(known))}")
        if name not in known:
            raise OfflowError(f"--opt `{opt}`: no source, sink or table named `{name}`; "
                              f"known: {', '.join(sorted(known))}")
        optkeys.check_kind([opt], kinds)
        if rest == "kind=udp" and o.udp_port is None:
            raise OfflowError(f"--opt `{opt}`: a udp source or sink takes the run's UDP "
                              "socket, which only --udp PORT opens (it puts every source "
                              "and sink of the program on it)")
        optkeys.check([opt], reads)
        args += ["--user-opt", opt]  # (what reads no such key refuses it: gen.h)
    if files:
        # (a remote device reads its tables' files on its own machine: docs/remote.md)
        _check_table_files(g, args, {d.name for d in plan.devices if d.target == "remote"})
    return args + xdp.run_options(plan, o.iface, o.xdp_mode, o.input, o.xdp_ring,
                                  o.xdp_spread)


def _check_table_files(g: Graph, args: list[str], far: set[str]) -> None:
    """A table's `path` option (the last one given wins) names a file it reads: it must
    be there before the processes start, unless the table's home is one of the devices
    `far` (remote: its file is on the device's machine, which says if it is not); a table
    with a `check` function has it look at its options (and files) then too."""
    tables = {t.name: t for t in g.shared}
    options: dict[str, dict[str, str]] = {}
    for opt in args[1::2]:
        name, _, rest = opt.partition(".")
        key, _, value = rest.partition("=")
        if name in tables:
            options.setdefault(name, {})[key] = value
    for name, opts in options.items():
        if "path" in opts and tables[name].home not in far and not Path(opts["path"]).is_file():
            raise OfflowError(f"table `{name}`: path={opts['path']}: no such file")
    for name, t in tables.items():
        if t.check:
            module, _, fn = t.check.partition(":")
            getattr(importlib.import_module(module), fn)(name, options.get(name, {}))


def _positive(name: str, value: float | None, zero_ok: bool = False) -> None:
    """A number option that must be finite and above 0 (or at least 0)."""
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise OfflowError(f"--{name} {value:g}: must be a number above 0"
                          + (" (or 0)" if zero_ok else ""))


# the vector levels OFFLOW_SIMD may name (runtime/core/include/offlow/simd.h)
SIMD_LEVELS = ("scalar", "avx2", "avx512")


def check_simd_env() -> None:
    """OFFLOW_SIMD, when set, names a vector level: the C side ignores a name it does not
    know (its kernels would take the CPU's widest path without a word), so a typo is an
    error here, before anything starts."""
    simd = os.environ.get("OFFLOW_SIMD")
    if simd and simd not in SIMD_LEVELS:
        raise OfflowError(f"OFFLOW_SIMD={simd} names no vector level ({', '.join(SIMD_LEVELS)})")


def check_options(o: RunOptions) -> tuple[int, str]:
    """Check every run option that can be checked before a process starts (numbers,
    the input capture, the synthetic mix and prefix file, where the output and the
    window file go), so that a bad one is one clear error instead of a device
    process's failure. Returns the mtu the input needs and why: the default
    (DEFAULT_MTU), raised to the longest frame of the capture or the largest synthetic
    frame where that is longer (never below it: elements may build packets longer than
    they take, replies), or for UDP runs the default (a datagram longer than the mtu
    less its 42 B of headers is dropped and counted); a program that sets its own mtu
    keeps it (Program.to_ir)."""
    check_simd_env()
    if o.profile:
        dilation(load_profile(o.profile))
    for spec in o.ports:
        ports.parse(spec)
    if o.ports and (o.udp_port is not None or o.tcp_port is not None):
        raise OfflowError("--port and --udp/--tcp: a run serves either a socket or ports")
    if (o.udp_port is not None or o.tcp_port is not None) and (o.input or o.output):
        raise OfflowError("a UDP run reads and answers datagrams: it takes no input or "
                          "output capture")
    _positive("duration", o.duration)
    _positive("timeout", o.timeout)
    _positive("stop_grace", o.stop_grace)
    _positive("rate", o.rate, zero_ok=True)
    if o.loops < 1:
        raise OfflowError(f"--loops {o.loops}: must be at least 1 (replays of the input)")
    if o.count < 0:
        raise OfflowError(f"--count {o.count}: must be at least 0")
    if not 0 <= o.seed < 1 << 64:
        raise OfflowError(f"--seed {o.seed}: must be within 0..2^64-1")
    if o.copy_engine not in ("inline", "thread"):
        raise OfflowError(f"copy engine `{o.copy_engine}`: expected inline or thread")
    if o.output is not None:
        _check_output(Path(o.output), Path(o.input) if o.input else None)
    if o.window_file is not None:
        windowfile.check_target(Path(o.window_file))
    if o.metrics is not None:
        metrics.parse_address(o.metrics)
    remote.endpoints(o.remotes)
    if o.udp_port is not None or o.tcp_port is not None:
        return DEFAULT_MTU, "the default for a UDP run"
    if o.input is not None:
        cap = read_capture(Path(o.input))
        if cap.longest <= DEFAULT_MTU:
            return DEFAULT_MTU, f"the default: every frame of {Path(o.input).name} fits"
        why = f"the longest frame of {Path(o.input).name}"
        if cap.longest > MTU_MAX:
            why += (f" is {cap.longest} B, above the largest mtu: frames longer than {MTU_MAX} B "
                    "are dropped and counted")
        return min(cap.longest, MTU_MAX), why
    largest = largest_synthetic(o.sizes, Path(o.prefixes) if o.prefixes else None)
    if largest <= DEFAULT_MTU:
        return DEFAULT_MTU, "the default: every synthetic frame (--sizes) fits"
    return largest, "the largest synthetic frame (--sizes)"


def _check_output(out: Path, inp: Path | None) -> None:
    """The output capture's folder exists and takes files; it is not the input."""
    why = unwritable(out)
    if why:
        raise OfflowError(f"--output {out}: {why}")
    if inp is not None and out.exists() and out.resolve() == inp.resolve():
        raise OfflowError(f"--output {out}: is the input capture; name another file")


def build_for(program: Program, o: RunOptions, **build_args: Any) -> Build:
    """Check the run options, then build `program` for them: a program that sets no
    mtu gets the one its input needs (check_options); a profile-scaled run times its
    elements (their kinds of work set how much each is slowed). `build_args` go to
    build()."""
    fit = check_options(o)
    if o.profile:
        build_args["own_sets"] = tuple(dict.fromkeys((*build_args.get("own_sets", ()),
                                                      "element_time")))
    kinds = ports.library_kinds(ports.parse(spec)[1] for spec in o.ports)
    # (the options are checked against the plan: a bad --opt is said before compiling)
    return build(program, fit=fit, ports=kinds, check=lambda plan: _opts_for(plan, o, files=False),
                 **build_args)


def _region(g: Graph, first: str, last: str) -> set[str]:
    """The elements on the paths from `first` to `last` (a cache's region)."""
    seen, todo = set(), [first]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n != last:
            todo += [e.dst for e in g.out_edges(n)]
    return seen


def tcp_table(g: Graph) -> SharedTable:
    """The table that serves the run's TCP socket; a clear error when the program has
    none, several, or one that a cache sits in front of (TCP clients would bypass the
    cache: its written entries unseen, its copies stale)."""
    tables = [t for t in g.shared if t.tcp]
    if len(tables) != 1:
        have = ", ".join(t.name for t in tables) or "none"
        raise OfflowError(f"--tcp needs one table that serves TCP (kv_store); this program "
                          f"has {have}")
    t = tables[0]
    for c in g.caches:
        behind = [n for n in _region(g, c.first, c.last)
                  if any(ref == t.name for _, ref in g.node(n).tables)]
        if behind:
            raise OfflowError(f"--tcp: the table `{t.name}` sits behind the cache `{c.name}` "
                              f"(used by {', '.join(behind)}); TCP requests would bypass "
                              "the cache, so serve this design over UDP (--udp)")
    return t


def oversubscription(b: Build, o: RunOptions) -> str | None:
    """A warning when busy-polling threads must share CPUs (more than the machine has,
    or two threads placed on the same CPU; segments placed on the same device core
    share one thread)."""
    ncpu = os.cpu_count() or 1
    cpus = [b.plan.cpu(t.device, t.core) for t in b.plan.threads]
    busy = len(cpus) * (2 if o.copy_engine == "thread" else 1)
    if busy > ncpu or len(set(cpus)) < len(cpus):
        return (f"oversubscribed: {busy} busy-polling threads on CPUs "
                f"{sorted(set(cpus))} of {ncpu}; they take turns (spin, then yield), "
                "so expect lower and noisier rates")
    return None


class Run:
    """A running program: start(), then wait(); `procs` maps device -> Popen.

    Every process of the run holds the read end of a pipe whose write end only this
    process holds (its lifeline, runtime/core/include/offlow/lifeline.h): whenever this
    process ends, however it ends, they stop and remove the run's window and files."""

    def __init__(self, b: Build, o: RunOptions, progress: bool = False) -> None:
        if o.tcp_port is not None and o.udp_port is None:
            o = replace(o, udp_port=0)  # its sources serve UDP: it lasts until stopped
        check_options(o)  # before anything is created
        _opts_for(b.plan, o)  # its errors (an --opt naming nothing) too
        self.build = b
        self.opts = o
        self.endpoints = self._remotes(b, o)
        self._secret = remote.load_secret(o.secret_file) if self.endpoints else b""
        self.progress = progress  # print a line to stderr every PROGRESS_EVERY seconds
        self.tmp: Path | None = None  # the run folder (stats files), made by start()
        tag = f"{b.graph.name}-{os.getpid()}-{secrets.token_hex(4)}"
        self.window = SHM / f"offlow-{tag}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.udp_port: int | None = None  # the port served (RunOptions.udp_port), once started
        self.tcp_port: int | None = None  # the TCP port served (RunOptions.tcp_port)
        self.tcp_table: SharedTable | None = None  # the table serving it
        self.front: Front | None = None  # the host's TCP front when that table is remote
        self._lifeline: int | None = None  # write end of the processes' liveness pipe
        self._killed: set[str] = set()  # processes this Run killed (their reason is given)
        self._stop_asked: float | None = None  # when stop() first asked (monotonic)
        self.metrics: metrics.Server | None = None  # the metrics endpoint, once started
        # the last counts read, without (False) and with (True) the arrays' elements
        self._last: dict[bool, tuple[dict[str, Any], bool]] = {False: ({}, False),
                                                               True: ({}, False)}
        self._header: WindowHeader | None = None  # the window header's layout (live reads)
        self.started = False  # start() has launched the processes (and not abandoned them)
        self.watching = False  # wait() has begun watching: a Ctrl-C is its to take

    @staticmethod
    def _remotes(b: Build, o: RunOptions) -> dict[str, str]:
        """The addresses of the program's remote devices (each has one)."""
        given = remote.endpoints(o.remotes)
        remote.check_devices([d.name for d in b.plan.devices], given)
        if given and o.ports:
            raise OfflowError("a remote device takes no ports yet: its sources and sinks "
                              "read and write captures or synthetic traffic")
        if given and o.udp_port is not None:
            g = b.graph
            far = [n.name for n in g.nodes if n.kind in ("source", "sink")
                   and any(d.startswith("remote:") for d in g.segment(n.segment).devices)]
            if far:
                raise OfflowError(f"--udp/--tcp: `{far[0]}` is on a remote device, which takes "
                                  "no sockets; put the program's sources and sinks on the "
                                  "host (the socket is served there)")
        return given

    def start(self) -> None:
        """Create the window, start the processes and write the window file
        (RunOptions.window_file; the options were checked when the Run was made). A
        failure or a Ctrl-C on the way leaves nothing behind: no process, window or
        run folder."""
        common = _opts_for(self.build.plan, self.opts)  # errors before anything is created
        self._check_tcp()
        sweep_stale()
        try:
            if self.progress or self.opts.metrics is not None:
                self._header = live.header()  # (builds the C library on first use)
            if self.opts.metrics is not None:  # bound before any process starts
                page = livepage.app(self.build.plan, self.live_stats)
                self.metrics = metrics.Server(self.opts.metrics, self.live_stats,
                                              (livepage.PATHS, page))
            self._launch(common)
            if self.opts.window_file is not None:
                windowfile.write(Path(self.opts.window_file), windowfile.RunWindow(
                    self.window, os.getpid(), self.build.graph.name, tuple(self.procs)))
            self.started = True
        except BaseException:
            self.started = False
            self._abandon()
            raise
        if self.progress and self.metrics is not None:
            print(f"offlow: metrics at {self.metrics.url}, the live page at "
                  f"{self.metrics.url.removesuffix('metrics')}", file=sys.stderr)
        if self.progress:
            devices = list(self.procs)
            print(f"offlow: running {', '.join(devices)} ({len(devices)} processes); Ctrl-C "
                  "stops the run and prints its counts so far; `offlow stats "
                  f"{self.window}` prints them while it runs", file=sys.stderr)
            if self.opts.takes_reloads:
                print(f"offlow: takes reloads: offlow reload {self.window} PROGRAM.py",
                      file=sys.stderr, flush=True)
            if self.opts.serve:
                g = self.build.graph
                names = [c.name for c in g.channels] + [f"ctl.{t.name}" for t in g.shared
                                                        if t.ctl]
                what = f"channels {', '.join(names)}" if names else "no channel (none declared)"
                print(f"offlow: serving {what} after the packets, until Ctrl-C; "
                      f"attach: offlow.session.attach('{self.window}')", file=sys.stderr,
                      flush=True)

    def _launch(self, common: list[str]) -> None:
        """The run folder, the window, the sockets, then the processes."""
        self.tmp = run_folder(self.window.name.rsplit("-", 1)[1])
        plan = self.build.plan
        devices = [d.name for d in plan.devices]
        first = plan.devices[0]
        targets.get(first.target).init_transport(self.build.binaries[first.name], self.window)
        if self.opts.takes_reloads:
            write_description(self.build, self.window)
        fds: list[int] = []
        socks: list[socket.socket] = []
        try:
            udp = self._udp_socket()
            socks += [udp] if udp is not None else []
            listener = self._tcp_listener()
            socks += [listener] if listener is not None else []
            life_r, self._lifeline = os.pipe()
            pipes = {d: os.pipe() for d in devices}
            fds += [life_r, *(fd for pair in pipes.values() for fd in pair)]
            for d in plan.devices:
                mine_w = pipes[d.name][1]
                # in device order: bit i of a core's peer_gone is the i-th (codegen/c.py)
                peers_r = [pipes[p][0] for p in devices if p != d.name]
                args = ["--ce", self.opts.copy_engine, "--runner-fd", str(life_r), *common]
                if self.opts.serve:
                    args.append("--serve")
                if self.opts.takes_reloads:
                    # a long run takes reloads (offlow reload); the description goes
                    # with the window if this runner is killed
                    args += ["--reload", str(description_path(self.window))]
                for fd in peers_r:
                    args += ["--peer-fd", str(fd)]
                shared = [mine_w, life_r, *peers_r]
                if udp is not None and d.target != "remote":  # (its sources are here)
                    args += ["--udp-fd", str(udp.fileno())]
                    shared.append(udp.fileno())
                if self.opts.profile:  # the other processes measure their busy time
                    prof = load_profile(self.opts.profile)
                    for kind, f in dilation(prof).items():
                        args += ["--opt", f"dilate.{kind}="
                                 f"{f if d.name == self.opts.slowed else 1:.6g}"]
                    if d.name == self.opts.slowed and self.opts.slowed_segments:
                        args += ["--opt", "dilate.only=" + ",".join(self.opts.slowed_segments)]
                    if prof.link and d.name in (EMULATED, "host"):  # each sends one way
                        args += ["--opt", f"link.gbps={prof.link.gbps:.6g}",
                                 "--opt", f"link.dma_gbps={prof.link.dma_gbps:.6g}",
                                 "--opt", f"link.latency_us={prof.link.latency_us:.6g}"]
                if (listener is not None and self.tcp_table and self.tcp_table.home == d.name
                        and d.target != "remote"):
                    name = self.tcp_table.name
                    args += ["--opt", f"{name}.tcp_fd={listener.fileno()}",
                             "--opt", f"{name}.tcp_conns={self.opts.tcp_max_conns}"]
                    shared.append(listener.fileno())
                part = Part(device=d.name, binary=self.build.binaries[d.name], window=self.window,
                            stats=self.tmp / f"{d.name}.json", cpu_base=d.cpu_base,
                            args=tuple(args), pass_fds=tuple(shared),
                            endpoint=self.endpoints.get(d.name.partition(":")[2], ""),
                            secret=self._secret, wrap=self.opts.wrap)
                self.procs[d.name] = targets.get(d.target).start(part)
            if listener is not None and self.tcp_table and self._remote_table():
                assert self.udp_port is not None
                self.front = Front.start(listener.fileno(), self.udp_port, life_r,
                                         self.tmp / "tcp-front.json", self.opts.tcp_max_conns,
                                         self.build.graph.mtu)
            if listener is not None and self.progress and self.tcp_table:
                far = ",".join(d.name for d in self.build.plan.devices if d.target == "remote")
                where = (f"the host's TCP front (each request through the program to the "
                         f"store on {far})" if self.front
                         else f"the {self.tcp_table.home} process")
                print(f"offlow: serving TCP on 127.0.0.1:{self.tcp_port} from {where}",
                      file=sys.stderr)
        finally:  # the processes hold what they need now
            for fd in fds:
                os.close(fd)
            for s in socks:
                s.close()

    def _remote_table(self) -> bool:
        """Whether the table serving TCP is on a remote device (a host front serves
        the socket then: docs/kvs.md#tcp)."""
        assert self.tcp_table is not None
        return self.build.plan.device(self.tcp_table.home).target == "remote"

    def _check_tcp(self) -> None:
        """Check the TCP options and find the table that serves TCP (before anything is
        created)."""
        o = self.opts
        if o.tcp_port is None:
            return
        if not 0 <= o.tcp_port <= 65535:
            raise OfflowError(f"TCP port {o.tcp_port} is not within 0..65535")
        if not 1 <= o.tcp_max_conns <= 1 << 20:
            raise OfflowError(f"--tcp-max-conns {o.tcp_max_conns}: 1..{1 << 20}")
        self.tcp_table = tcp_table(self.build.graph)
        if self._remote_table():
            build_front()  # its build errors before anything starts

    def _tcp_listener(self) -> socket.socket | None:
        """The listening TCP socket (TCP runs), bound here like the UDP socket."""
        if self.opts.tcp_port is None:
            return None
        s = self._bind(socket.SOCK_STREAM, self.opts.tcp_port, "listen on TCP",
                       (socket.SO_REUSEADDR, 1))
        self.tcp_port = s.getsockname()[1]
        return s

    def _bind(self, kind: int, port: int, what: str, opt: tuple[int, int]) -> socket.socket:
        """A socket of `kind` on 127.0.0.1:`port` (0: any free port) with socket option
        `opt`, listening when it is a stream; a failure says which port and why."""
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.setsockopt(socket.SOL_SOCKET, *opt)
            s.bind(("127.0.0.1", port))
            if kind == socket.SOCK_STREAM:
                s.listen(4096)  # capped by net.core.somaxconn
        except OSError as e:
            s.close()
            raise OfflowError(f"cannot {what} port {port} on 127.0.0.1: {e.strerror}") from e
        return s

    def _udp_socket(self) -> socket.socket | None:
        """The socket every process serves on (UDP runs): bound here, so the port is
        known before any process starts."""
        if self.opts.udp_port is None:
            return None
        s = self._bind(socket.SOCK_DGRAM, self.opts.udp_port, "bind UDP",
                       (socket.SO_RCVBUF, 4 << 20))  # the buffer is capped by the kernel
        self.udp_port = s.getsockname()[1]
        if self.progress:
            print(f"offlow: serving UDP on 127.0.0.1:{self.udp_port}", file=sys.stderr)
        return s

    def live_stats(self, timeout: float = 1.0,
                   tables: bool = False) -> tuple[dict[str, Any], bool]:
        """The processes' counters read now (offlow.live), and whether they are still
        running (False: the last counts, those of processes that have ended). After the
        run, or when they do not answer, the last counts read. `tables`: with every
        element of the shared arrays (else each array's length: live.read)."""
        try:
            if self._header is None:
                self._header = live.header()
            stats = live.read(self.window, timeout, self._header, tables=tables)
        except OfflowError:
            return self._last[tables][0], False
        last = (stats, not all(s.get("live_final") for s in stats.values()))
        self._last[tables] = last
        if tables:  # (they hold the counters too)
            self._last[False] = last
        return last

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Ask the processes to stop: they finish cleanly (sources end, queues drain,
        stats are written; see runtime/core/include/offlow/stop.h), and wait() returns
        what they counted until then."""
        if self._stop_asked is None:
            self._stop_asked = time.monotonic()
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(sig)
        if self.front is not None:
            self.front.signal()

    def _kill(self, name: str, p: subprocess.Popen[bytes]) -> None:
        if p.poll() is None:
            p.kill()
            self._killed.add(name)

    def _watch(self, errors: list[str], deadline: float | None) -> None:
        """Poll every process of the run until they have exited. The first failure (a
        non-zero status or a signal) stops the others cleanly, so what they counted is
        kept; those still up at the deadline, or `stop_grace` seconds after any request
        to stop (a failure's included: on a loaded machine a clean stop can take more
        than a couple of seconds), are killed."""
        failed = False
        killed = False
        started = time.monotonic()
        next_note = started + PROGRESS_EVERY
        before = (started, 0)
        while True:
            for p in self.procs.values():
                p.poll()
            if all(p.returncode is not None for p in self.procs.values()):
                return
            now = time.monotonic()
            if self.progress and now >= next_note:
                next_note += PROGRESS_EVERY
                before = self._note_progress(started, before)
            if not failed and any(p.returncode for p in self.procs.values()):
                failed = True
                self.stop()
            expired = deadline is not None and now > deadline
            stuck = (self._stop_asked is not None
                     and now - self._stop_asked > self.opts.stop_grace)
            if (expired or stuck) and not killed:
                killed = True
                up = [name for name, p in self.procs.items() if p.poll() is None]
                for name, p in self.procs.items():
                    self._kill(name, p)
                errors.append("run timed out" if expired
                              else f"{', '.join(up)} did not stop within "
                                   f"{self.opts.stop_grace:g} s of the request to stop: "
                                   "killed, its counts lost (a core that never finishes "
                                   "its turn: an element's body in an endless loop?)")
            time.sleep(0.01)

    def _note_progress(self, started: float, before: tuple[float, int]) -> tuple[float, int]:
        """Print a progress line: time, and the packets read, forwarded and dropped so
        far with the rate since the last line (when the processes answer in time).
        Returns (when, packets read) for the next line's rate."""
        now = time.monotonic()
        total = f" of {self.opts.duration:g}" if self.opts.duration else ""
        line = f"offlow: running, {now - started:.0f}{total} s"
        stats, up = self.live_stats(timeout=0.5)
        if up:
            t = progress_totals(stats)
            rate = (t["read"] - before[1]) / (now - before[0]) if now > before[0] else 0.0
            speed = f"{rate / 1e6:.3f} Mpps" if rate >= 1e5 else f"{rate:,.0f} pps"
            line += (f": {t['read']:,} packets read ({speed}), "
                     f"{t['forwarded']:,} forwarded, {t['dropped']:,} dropped")
            before = (now, t["read"])
        print(line, file=sys.stderr, flush=True)
        return before

    def _exit_errors(self, stats: dict[str, Any]) -> list[str]:
        """How each process that failed ended (those this Run killed have their
        reason said already). A process whose target says why it failed (a remote
        device's lost link) is the cause: the others' bare exit statuses (they stopped
        because of it: their rings to it broke) are left out; so are they beside a
        process's death by a signal. A reason two processes gave (both read the same bad
        option) is said once. Else the failures the cores said in their stats
        (core_failures) stand for the exit statuses of the processes they belong to."""
        deaths: list[str] = []
        out: list[tuple[str, str]] = []
        reasons: list[str] = []
        for name, p in self.procs.items():
            rc = p.returncode
            if rc is None or name in self._killed:
                continue
            assert self.tmp is not None
            why = targets.get(self.build.plan.device(name).target).failure(
                self.tmp / f"{name}.json")
            if rc and why:
                if why not in reasons:
                    reasons.append(why)
            elif rc < 0:
                deaths.append(f"the {name} process died ({_signal_name(-rc)})")
            elif rc > 0:
                out.append((name, f"the {name} process exited with status {rc}"))
        if reasons or deaths or not out:
            return reasons or deaths
        told = {dev for dev, st in stats.items()
                if any("error" in c for c in st.get("cores", []))}
        return core_failures(stats) + [line for name, line in out if name not in told]

    def _read_stats(self, errors: list[str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The stats each device process wrote, and the TCP server's counters (those of
        the table that serves TCP)."""
        assert self.tmp is not None
        stats = {}
        for dev in self.procs:
            path = self.tmp / f"{dev}.json"
            target = targets.get(self.build.plan.device(dev).target)
            try:
                if target.wrote_stats(path):
                    stats[dev] = target.read_stats(path)
                elif (untaken := target.untaken(path)) is not None:
                    stats[dev] = untaken
            except OfflowError as e:
                errors.append(str(e))
        tcp = None
        if self.front is not None:
            try:
                tcp = self.front.finish()
            except OfflowError as e:
                errors.append(str(e))
        elif self.tcp_table is not None:
            t = self.tcp_table
            tcp = stats.get(t.home, {}).get("tables", {}).get(t.name, {}).get("tcp")
        return stats, tcp

    def _abandon(self) -> None:
        """Kill every process of the run and remove what it made (a failed start, a
        second Ctrl-C in wait)."""
        for name, p in self.procs.items():
            self._kill(name, p)
        for p in self.procs.values():
            p.wait()
        if self.front is not None:
            self.front.kill()
        self._release()

    def _release(self) -> None:
        """Remove the window and the run folder; let go of the lifeline."""
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        self.window.unlink(missing_ok=True)
        description_path(self.window).unlink(missing_ok=True)
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    def wait(self, early: KeyboardInterrupt | None = None) -> RunResult:
        """Watch the processes to their end and collect their stats. A Ctrl-C (or a
        SIGTERM in a stop_signals block) here stops the run cleanly (see stop) and
        marks the result `interrupted`; a second one leaves at once, killing the
        processes. `early`: one that came after start, before this watch began
        (`watching` still False), taken as if it came here."""
        errors: list[str] = []
        interrupted, stopped_by = False, ""
        deadline = time.monotonic() + self.opts.timeout if self.opts.timeout else None
        try:
            try:
                self.watching = True  # (the first statement the handlers below cover)
                if early is not None:
                    raise early
                self._watch(errors, deadline)
            except KeyboardInterrupt as e:
                interrupted = True
                stopped_by = "SIGTERM" if isinstance(e, Terminated) else "SIGINT"
                self.stop(signal.SIGINT)
                if self.progress:
                    print(f"offlow: stopping: the processes finish what they hold (up to "
                          f"{self.opts.stop_grace:g} s; Ctrl-C again leaves at once)",
                          file=sys.stderr, flush=True)
                self._watch(errors, deadline)  # the run ends cleanly: its stats count
        except BaseException:
            self._abandon()
            raise
        try:
            stats, tcp = self._read_stats(errors)
            errors[:0] = self._exit_errors(stats)
            errors += _source_errors(stats)
            # what a scrape (or a session's stats()) during the shutdown gets
            self._last = {False: (stats, False), True: (stats, False)}
        finally:
            self._release()
        return RunResult(ok=not errors, stats=stats, errors=errors, tcp=tcp,
                         interrupted=interrupted, stopped_by=stopped_by)


def progress_totals(stats: dict[str, Any]) -> dict[str, int]:
    """Packets read by the sources, taken by the sinks and dropped (by elements, at
    sources for their length, at full rings) in the processes' stats."""
    cores = [c for dev in stats.values() for c in dev.get("cores", [])]
    read = sum(s["packets"] + s.get("dropped", 0) + s.get("cut_short", 0) for c in cores
               for s in c.get("sources", {}).values())
    dropped = sum(e["drop"] for c in cores for e in c.get("elements", {}).values())
    dropped += sum(s.get("dropped", 0) + s.get("cut_short", 0) for c in cores
                   for s in c.get("sources", {}).values())
    dropped += sum(x["dropped"] for c in cores for x in c.get("instances", []))
    forwarded = sum(v["packets"] for dev in stats.values() for v in dev.get("sinks", {}).values())
    return {"read": read, "forwarded": forwarded, "dropped": dropped}


def core_failures(stats: dict[str, Any]) -> list[str]:
    """What the cores that failed said in their stats (device, segment, core, what it
    was doing, the error): the causes only, when there are any, not the cores that
    stopped because of another's failure (`secondary`: the abort word, a ring its
    consumer broke), which are the rest of a cascade."""
    failed = [(dev, c) for dev, st in stats.items() for c in st.get("cores", []) if "error" in c]
    causes = [x for x in failed if not x[1].get("secondary")] or failed
    return [f"{dev}: segment {c['segment']} core {c['core']}: {c['where']}: {c['error']}"
            for dev, c in causes]


def _source_errors(stats: dict[str, Any]) -> list[str]:
    """Faults of the inputs that the sources went on from (a capture cut short), once
    each (every core of a source reads the same file)."""
    out: list[str] = []
    for dev in stats.values():
        for core in dev.get("cores", []):
            for name, v in core.get("sources", {}).items():
                msg = f"source {name}: {v['error']}" if "error" in v else None
                if msg and msg not in out:
                    out.append(msg)
    return out


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def warn(b: Build, o: RunOptions) -> list[str]:
    """Print (and return) what a run of `b` with `o` is warned of before it starts: the
    program's warnings (program_warnings) and oversubscribed CPUs."""
    warnings = [w for w in (*program_warnings(b), oversubscription(b, o)) if w]
    for w in warnings:
        print(f"offlow: warning: {w}", file=sys.stderr)
    return warnings


def run(b: Build, o: RunOptions, progress: bool = False) -> RunResult:
    """Run a built program to completion (its warnings first: warn). A Ctrl-C that
    lands after the processes started but before the watch began (the start's last
    lines, or the step between) stops the run as one in the watch does."""
    warnings = warn(b, o)
    r = Run(b, o, progress)
    try:
        r.start()
        res = r.wait()
    except KeyboardInterrupt as e:
        # in the start's launch (it left nothing behind), or the watch's second Ctrl-C
        # (which leaves at once): as it came
        if not r.started or r.watching:
            raise
        res = r.wait(early=e)
    res.warnings += warnings
    return res
