"""Start the device processes of a built program, watch them, collect their stats.

Each device is its own OS process.  They share only the interconnect window (a
0600 file in /dev/shm).  Each process holds the write end of a liveness pipe whose
read end its peers poll: when a process dies, the kernel closes its end and the
peers see EOF within a millisecond of their next check, and exit with an error.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from offlow.build import Build
from offlow.errors import OfflowError
from offlow.ir import Graph, SharedTable
from offlow.passes.fuse import threads

PROGRESS_EVERY = 5.0  # seconds between progress lines on long runs


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


@dataclass
class RunResult:
    ok: bool
    stats: dict[str, Any]  # device -> that process's stats
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tcp: dict[str, Any] | None = None  # the TCP server's counters (tcp_port runs)
    interrupted: bool = False  # ended early by Ctrl-C in wait(): the counts cover until then


def cpu_base(device: str) -> int:
    """The CPU of a device's core 0: host cores from CPU 0, NIC cores from the middle up."""
    return 0 if device == "host" else (os.cpu_count() or 1) // 2


def cpu_of(device: str, core: int) -> int:
    """The CPU a device's core runs on here (wrapping around when there are fewer)."""
    return (cpu_base(device) + core) % (os.cpu_count() or 1)


def sink_paths(b: Build, output: Path) -> dict[str, Path]:
    """Where each sink writes: `output` itself for a program with one sink, else
    `output` with the sink's name before the suffix (out.pcap -> out.tx.pcap)."""
    sinks = [n.name for n in b.graph.nodes if n.kind == "sink"]
    if len(sinks) == 1:
        return {sinks[0]: output}
    return {s: output.with_name(f"{output.stem}.{s}{output.suffix}") for s in sinks}


def _udp_opts(b: Build, o: RunOptions) -> list[str]:
    """Sources and sinks on the run's UDP socket (the processes get it as --udp-fd)."""
    args: list[str] = []
    for n in b.graph.nodes:
        kv = {"kind": "udp"} if n.kind in ("source", "sink") else {}
        if n.kind == "source" and o.duration is not None:
            kv["duration_ns"] = str(int(o.duration * 1e9))
        if n.kind == "source" and o.rate:
            kv["rate"] = str(o.rate)
        args += [a for k, v in kv.items() for a in ("--opt", f"{n.name}.{k}={v}")]
    return args


def _opts_for(b: Build, o: RunOptions) -> list[str]:
    args: list[str] = []
    paths = sink_paths(b, Path(o.output)) if o.output else {}
    if o.udp_port is not None:
        if o.input or o.output:
            raise OfflowError("a UDP run reads and answers datagrams: it takes no input or "
                              "output capture")
        if not 0 <= o.udp_port <= 65535:
            raise OfflowError(f"UDP port {o.udp_port} is not within 0..65535")
        args = _udp_opts(b, o)
    for n in b.graph.nodes:
        if n.kind == "source" and o.udp_port is None:
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
        if n.name in paths:
            args += ["--opt", f"{n.name}.path={paths[n.name]}"]
    for t in b.graph.shared:
        args += [a for k, v in t.options for a in ("--opt", f"{t.name}.{k}={v}")]
    known = {n.name for n in b.graph.nodes} | {t.name for t in b.graph.shared}
    for opt in o.opts:  # later options win in the processes
        name, dot, rest = opt.partition(".")
        if not dot or "=" not in rest:
            raise OfflowError(f"--opt `{opt}`: expected NAME.KEY=VALUE")
        if name not in known:
            raise OfflowError(f"--opt `{opt}`: no source, sink or table named `{name}`; "
                              f"known: {', '.join(sorted(known))}")
        args += ["--opt", opt]
    return args


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
    cpus = [cpu_of(t.device, t.core) for t in threads(b.graph)]
    busy = len(cpus) * (2 if o.copy_engine == "thread" else 1)
    if busy > ncpu or len(set(cpus)) < len(cpus):
        return (f"oversubscribed: {busy} busy-polling threads on CPUs "
                f"{sorted(set(cpus))} of {ncpu}; they take turns (spin, then yield), "
                "so expect lower and noisier rates")
    return None


class Run:
    """A running program: start(), then wait(); `procs` maps device -> Popen."""

    def __init__(self, b: Build, o: RunOptions, progress: bool = False) -> None:
        if o.tcp_port is not None and o.udp_port is None:
            o = replace(o, udp_port=0)  # its sources serve UDP: it lasts until stopped
        self.build = b
        self.opts = o
        self.progress = progress  # print a line to stderr every PROGRESS_EVERY seconds
        self.tmp = Path(tempfile.mkdtemp(prefix="offlow-run-"))
        tag = f"{b.graph.name}-{os.getpid()}-{secrets.token_hex(4)}"
        self.window = Path("/dev/shm") / f"offlow-{tag}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.udp_port: int | None = None  # the port served (RunOptions.udp_port), once started
        self.tcp_port: int | None = None  # the TCP port served (RunOptions.tcp_port)
        self.tcp_table: SharedTable | None = None  # the table serving it

    def start(self) -> None:
        for path in (self.opts.input, self.opts.prefixes):
            if path is not None and not Path(path).exists():
                raise OfflowError(f"no such file: {path}")
        common = _opts_for(self.build, self.opts)  # errors before anything is created
        self._check_tcp()
        devices = list(self.build.binaries)
        init = subprocess.run(
            [str(self.build.binaries[devices[0]]), "--init", "--window", str(self.window)],
            capture_output=True, text=True)
        if init.returncode != 0:
            self.window.unlink(missing_ok=True)
            raise OfflowError(f"cannot set up the interconnect window: {init.stderr.strip()}")
        udp = self._udp_socket()
        try:
            listener = self._tcp_listener()
        except OfflowError:
            if udp is not None:
                udp.close()
            raise
        pipes = {d: os.pipe() for d in devices}
        for dev in devices:
            mine_w = pipes[dev][1]
            peers_r = [pipes[p][0] for p in devices if p != dev]
            cmd = [str(self.build.binaries[dev]), "--window", str(self.window),
                   "--stats", str(self.tmp / f"{dev}.json"), "--cpu-base", str(cpu_base(dev)),
                   "--ce", self.opts.copy_engine, *common]
            if self.opts.serve:
                cmd.append("--serve")
            for fd in peers_r:
                cmd += ["--peer-fd", str(fd)]
            shared = [mine_w, *peers_r]
            if udp is not None:
                cmd += ["--udp-fd", str(udp.fileno())]
                shared.append(udp.fileno())
            if listener is not None and self.tcp_table and self.tcp_table.home == dev:
                name = self.tcp_table.name
                cmd += ["--opt", f"{name}.tcp_fd={listener.fileno()}",
                        "--opt", f"{name}.tcp_conns={self.opts.tcp_max_conns}"]
                shared.append(listener.fileno())
            self.procs[dev] = subprocess.Popen(cmd, pass_fds=shared)
        for r, w in pipes.values():
            os.close(r)
            os.close(w)
        if udp is not None:
            udp.close()  # the processes hold it now
        if listener is not None:
            listener.close()
            if self.progress:
                print(f"offlow: serving TCP on 127.0.0.1:{self.tcp_port} from the "
                      f"{self.tcp_table.home if self.tcp_table else '?'} process", file=sys.stderr)
        if self.progress:
            print(f"offlow: running {', '.join(devices)} ({len(devices)} processes); Ctrl-C "
                  "stops the run and prints its counts so far", file=sys.stderr)
            if self.opts.serve:
                names = ", ".join(c.name for c in self.build.graph.channels)
                print(f"offlow: serving channels {names} after the packets, until Ctrl-C; "
                      f"attach: offlow.session.attach('{self.window}')", file=sys.stderr,
                      flush=True)

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
        `opt`, listening when it is a stream; a failure removes the window and says
        which port and why."""
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.setsockopt(socket.SOL_SOCKET, *opt)
            s.bind(("127.0.0.1", port))
            if kind == socket.SOCK_STREAM:
                s.listen(4096)  # capped by net.core.somaxconn
        except OSError as e:
            s.close()
            self.window.unlink(missing_ok=True)
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

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Ask the processes to stop: they finish cleanly (sources end, queues drain,
        stats are written; see runtime/include/offlow/stop.h), and wait() returns
        what they counted until then."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(sig)

    def _watch(self, errors: list[str], deadline: float | None) -> None:
        """Poll until every process has exited; kill them all at the deadline or when
        some are still up two seconds after one failed."""
        first_fail: float | None = None
        killed = False
        started = time.monotonic()
        next_note = started + PROGRESS_EVERY
        while any(p.poll() is None for p in self.procs.values()):
            now = time.monotonic()
            if self.progress and now >= next_note:
                next_note += PROGRESS_EVERY
                total = f" of {self.opts.duration:g}" if self.opts.duration else ""
                print(f"offlow: running, {now - started:.0f}{total} s", file=sys.stderr)
            failed = [d for d, p in self.procs.items() if p.returncode not in (None, 0)]
            if failed and first_fail is None:
                first_fail = now
            late = first_fail is not None and now - first_fail > 2.0
            expired = deadline is not None and now > deadline
            if (late or expired) and not killed:
                killed = True
                for p in self.procs.values():
                    if p.poll() is None:
                        p.kill()
                errors.append("run timed out" if expired
                              else "a process did not stop after its peer failed")
            time.sleep(0.01)

    def wait(self) -> RunResult:
        """Watch the processes to their end and collect their stats. A Ctrl-C here
        stops the run cleanly (see stop) and marks the result `interrupted`; a second
        one leaves at once."""
        errors: list[str] = []
        interrupted = False
        deadline = time.monotonic() + self.opts.timeout if self.opts.timeout else None
        try:
            try:
                self._watch(errors, deadline)
            except KeyboardInterrupt:
                interrupted = True
                self.stop(signal.SIGINT)
                self._watch(errors, deadline)  # the run ends cleanly: its stats count
        finally:
            self.window.unlink(missing_ok=True)
        for dev, p in self.procs.items():
            if p.returncode and p.returncode < 0:
                errors.append(f"the {dev} process died ({signal.Signals(-p.returncode).name})")
            elif p.returncode:
                errors.append(f"the {dev} process exited with status {p.returncode}")
        stats = {}
        for dev in self.procs:
            path = self.tmp / f"{dev}.json"
            if path.exists():
                try:
                    stats[dev] = json.loads(path.read_text())
                except json.JSONDecodeError as e:
                    errors.append(f"the {dev} process wrote an unreadable stats file: {e}")
        tcp = None
        if self.tcp_table is not None:
            t = self.tcp_table
            tcp = stats.get(t.home, {}).get("tables", {}).get(t.name, {}).get("tcp")
        shutil.rmtree(self.tmp, ignore_errors=True)
        return RunResult(ok=not errors, stats=stats, errors=errors, tcp=tcp,
                         interrupted=interrupted)


def run(b: Build, o: RunOptions, progress: bool = False) -> RunResult:
    """Run a built program to completion."""
    warning = oversubscription(b, o)
    if warning:
        print(f"offlow: warning: {warning}", file=sys.stderr)
    r = Run(b, o, progress)
    r.start()
    res = r.wait()
    if warning:
        res.warnings.append(warning)
    return res
