"""Start the device processes of a built program, watch them, collect their stats.

Each device is its own OS process.  They share only the interconnect window (a
0600 file in /dev/shm).  Each process holds the write end of a liveness pipe whose
read end its peers poll: when a process dies, the kernel closes its end and the
peers see EOF within a millisecond of their next check, and exit with an error.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from offlow.build import RUNTIME, Build, build, build_tool
from offlow.dsl import Program
from offlow.errors import OfflowError
from offlow.inputs import largest_synthetic, read_capture
from offlow.ir.graph import DEFAULT_MTU, MTU_MAX, MTU_MIN
from offlow.passes.fuse import threads

PROGRESS_EVERY = 5.0  # seconds between progress lines on long runs

# The TCP gateway (runtime/src/tcp_gw.c, runtime/tools/tcp_gw_main.c): memcached over
# TCP turned into one datagram per request to the run's UDP port.
TCP_GW_MAIN = RUNTIME / "tools" / "tcp_gw_main.c"
TCP_GW_MODULES = ("err", "mcproto", "tcp_gw")
TCP_GW_CFLAGS = ("-std=c11", "-D_GNU_SOURCE", "-O2", "-g", "-Wall", "-Wextra", "-Werror")
TCP_GW_REQUEST_MAX = 1400 - 8  # memcached's UDP datagram less its frame header
TCP_GW_STOP_WAIT = 5.0  # seconds the gateway gets to write its counters when stopped


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
    # Serve memcached over TCP on 127.0.0.1:PORT (0: a free port, see Run.tcp_port): a
    # gateway process cuts each connection's stream into requests and sends each as one
    # memcached datagram to the run's UDP port (implies udp_port=0 when that is None).
    tcp_port: int | None = None
    tcp_timeout: float = 5.0  # seconds a request waits for its reply before its
    #                           connection is closed (counted)
    tcp_max_conns: int = 4096  # connections the gateway holds; more are closed at once


@dataclass
class RunResult:
    ok: bool
    stats: dict[str, Any]  # device -> that process's stats
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tcp: dict[str, Any] | None = None  # the TCP gateway's counters (tcp_port runs)
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
    _check_table_files(b, args)
    return args


def _check_table_files(b: Build, args: list[str]) -> None:
    """A table's `path` option (the last one given wins) names a file it reads: it must
    be there before the processes start."""
    tables = {t.name for t in b.graph.shared}
    paths = {}
    for opt in args[1::2]:
        name, _, rest = opt.partition(".")
        key, _, value = rest.partition("=")
        if name in tables and key == "path":
            paths[name] = value
    for name, value in paths.items():
        if not Path(value).is_file():
            raise OfflowError(f"table `{name}`: path={value}: no such file")


def _positive(name: str, value: float | None, zero_ok: bool = False) -> None:
    """A number option that must be finite and above 0 (or at least 0)."""
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise OfflowError(f"--{name} {value:g}: must be a number above 0"
                          + (" (or 0)" if zero_ok else ""))


def check_options(o: RunOptions) -> tuple[int, str]:
    """Check every run option that can be checked before a process starts (numbers,
    the input capture, the synthetic mix and prefix file, where the output goes), so
    that a bad one is one clear error instead of a device process's failure. Returns
    the mtu the input needs and why: the longest frame of the capture, the largest
    synthetic frame, or for UDP runs the default (a datagram longer than the mtu less
    its 42 B of headers is dropped and counted); a program that sets its own mtu keeps
    it (Program.to_ir)."""
    if (o.udp_port is not None or o.tcp_port is not None) and (o.input or o.output):
        raise OfflowError("a UDP run reads and answers datagrams: it takes no input or "
                          "output capture")
    _positive("duration", o.duration)
    _positive("timeout", o.timeout)
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
    if o.udp_port is not None or o.tcp_port is not None:
        return DEFAULT_MTU, "the default for a UDP run"
    if o.input is not None:
        cap = read_capture(Path(o.input))
        why = f"the longest frame of {Path(o.input).name}"
        if cap.longest > MTU_MAX:
            why += (f" is {cap.longest} B, above the largest mtu: frames longer than {MTU_MAX} B "
                    "are dropped and counted")
        return min(max(cap.longest, MTU_MIN), MTU_MAX), why
    largest = largest_synthetic(o.sizes, Path(o.prefixes) if o.prefixes else None)
    return max(largest, MTU_MIN), "the largest synthetic frame (--sizes)"


def _check_output(out: Path, inp: Path | None) -> None:
    """The output capture's folder exists and takes files; it is not the input."""
    folder = out.parent
    if out.is_dir():
        raise OfflowError(f"--output {out}: is a directory; name a file in it")
    if not folder.is_dir():
        raise OfflowError(f"--output {out}: no such directory {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OfflowError(f"--output {out}: cannot write in {folder}")
    if inp is not None and out.exists() and out.resolve() == inp.resolve():
        raise OfflowError(f"--output {out}: is the input capture; name another file")


def build_for(program: Program, o: RunOptions, **build_args: Any) -> Build:
    """Check the run options, then build `program` for them: a program that sets no
    mtu gets the one its input needs (check_options). `build_args` go to build()."""
    return build(program, fit=check_options(o), **build_args)


def build_tcp_gateway(extra_flags: Sequence[str] = ()) -> Path:
    """Compile the TCP gateway (cached by content hash; `extra_flags`: e.g. the tests'
    sanitizers); return the executable."""
    sources = [TCP_GW_MAIN, *(RUNTIME / "src" / f"{m}.c" for m in TCP_GW_MODULES)]
    return build_tool("offlow-tcp-gw", sources, (*TCP_GW_CFLAGS, *extra_flags))


def tcp_max_request(b: Build) -> int:
    """The longest request the gateway forwards: one memcached datagram's payload, and
    no more than the program's sources accept (its mtu less the frame headers)."""
    return min(TCP_GW_REQUEST_MAX, b.graph.mtu - 42 - 8)


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
            o = replace(o, udp_port=0)  # the gateway talks to the program over UDP
        check_options(o)  # before anything is created
        _opts_for(b, o)  # its errors (an --opt naming nothing) too
        self.build = b
        self.opts = o
        self.progress = progress  # print a line to stderr every PROGRESS_EVERY seconds
        self.tmp = Path(tempfile.mkdtemp(prefix="offlow-run-"))
        tag = f"{b.graph.name}-{os.getpid()}-{secrets.token_hex(4)}"
        self.window = Path("/dev/shm") / f"offlow-{tag}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.udp_port: int | None = None  # the port served (RunOptions.udp_port), once started
        self.tcp_port: int | None = None  # the TCP port served (RunOptions.tcp_port)
        self.gateway: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        common = _opts_for(self.build, self.opts)  # errors before anything is created
        gw_exe = self._check_tcp()
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
            self.procs[dev] = subprocess.Popen(cmd, pass_fds=shared)
        for r, w in pipes.values():
            os.close(r)
            os.close(w)
        if udp is not None:
            udp.close()  # the processes hold it now
        if listener is not None and gw_exe is not None:
            self._start_gateway(gw_exe, listener)
        if self.progress:
            print(f"offlow: running {', '.join(devices)} ({len(devices)} processes); Ctrl-C "
                  "stops the run and prints its counts so far", file=sys.stderr)
            if self.opts.serve:
                names = ", ".join(c.name for c in self.build.graph.channels)
                print(f"offlow: serving channels {names} after the packets, until Ctrl-C; "
                      f"attach: offlow.session.attach('{self.window}')", file=sys.stderr,
                      flush=True)

    def _check_tcp(self) -> Path | None:
        """Check the TCP options and build the gateway (before anything is created)."""
        o = self.opts
        if o.tcp_port is None:
            return None
        if not 0 <= o.tcp_port <= 65535:
            raise OfflowError(f"TCP port {o.tcp_port} is not within 0..65535")
        if o.tcp_timeout <= 0 or not 1 <= o.tcp_max_conns <= 60000:
            raise OfflowError("the TCP gateway needs a timeout above 0 and 1..60000 "
                              "connections")
        if tcp_max_request(self.build) < 64:
            raise OfflowError(f"an mtu of {self.build.graph.mtu} leaves no room for memcached "
                              "requests over TCP")
        return build_tcp_gateway()

    def _tcp_listener(self) -> socket.socket | None:
        """The gateway's listening socket (TCP runs), bound here like the UDP socket."""
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

    def _start_gateway(self, exe: Path, listener: socket.socket) -> None:
        """Start the gateway on `listener`, forwarding to the run's UDP port."""
        o = self.opts
        cmd = [str(exe), "--listen-fd", str(listener.fileno()), "--udp-port", str(self.udp_port),
               "--max-request", str(tcp_max_request(self.build)),
               "--timeout-ms", str(max(1, round(o.tcp_timeout * 1000))),
               "--max-conns", str(o.tcp_max_conns), "--stats", str(self.tmp / "tcp_gw.json")]
        try:
            self.gateway = subprocess.Popen(cmd, pass_fds=[listener.fileno()],
                                            stdout=subprocess.DEVNULL)
        finally:
            listener.close()  # the gateway holds it now
        if self.progress:
            print(f"offlow: serving memcached over TCP on 127.0.0.1:{self.tcp_port} "
                  f"(one datagram per request to UDP port {self.udp_port})", file=sys.stderr)

    def _stop_gateway(self, errors: list[str]) -> None:
        """Stop the gateway (it writes its counters) once the program is done."""
        g = self.gateway
        if g is None:
            return
        if g.poll() is None:
            g.send_signal(signal.SIGTERM)
            try:
                g.wait(TCP_GW_STOP_WAIT)
            except subprocess.TimeoutExpired:
                g.kill()
                g.wait()
                errors.append("the TCP gateway did not stop when asked")
        if g.returncode and g.returncode < 0 and g.returncode != -signal.SIGKILL:
            errors.append(f"the TCP gateway died ({signal.Signals(-g.returncode).name})")
        elif g.returncode and g.returncode > 0:
            errors.append(f"the TCP gateway exited with status {g.returncode}")

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
        for p in self._all_procs().values():
            if p.poll() is None:
                p.send_signal(sig)

    def _all_procs(self) -> dict[str, subprocess.Popen[bytes]]:
        """The device processes and, in a TCP run, the gateway."""
        procs = dict(self.procs)
        if self.gateway is not None:
            procs["TCP gateway"] = self.gateway
        return procs

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
            failed = [d for d, p in self._all_procs().items()
                      if p.returncode not in (None, 0)]
            if failed and first_fail is None:
                first_fail = now
                if self.gateway is not None and self.gateway.returncode not in (None, 0):
                    self.stop()  # no gateway: the program stops too, cleanly
            late = first_fail is not None and now - first_fail > 2.0
            expired = deadline is not None and now > deadline
            if (late or expired) and not killed:
                killed = True
                for p in self._all_procs().values():
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
            self._stop_gateway(errors)
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
        gw_stats = self.tmp / "tcp_gw.json"
        if self.gateway is not None and gw_stats.exists():
            try:
                tcp = dict(json.loads(gw_stats.read_text()))
            except json.JSONDecodeError as e:
                errors.append(f"the TCP gateway wrote unreadable counters: {e}")
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
