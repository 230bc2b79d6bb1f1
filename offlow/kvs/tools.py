"""Building and running the key-value store's C tools, and a real memcached beside them.

- runtime/lib/kvs/tools/kvs_server.c: the CPU-only memcached-compatible server (UDP with
  the frame header and TCP, binary and text protocols) on the kvs library's mcproto,
  kvstore and kvexec modules;
- runtime/lib/kvs/tools/kvs_loadgen.c: the load generator (binary protocol over UDP or
  TCP, closed or open loop, Floem's workload by default), printing one JSON object;
- runtime/tools/udp_echo.c: a UDP echo server (recvmmsg / sendmmsg, nothing parsed),
  the benchmark's ceiling.

They are compiled once per content hash with `offlow.cbuild.build_exe`. Servers run as
child processes on 127.0.0.1 and are stopped (SIGTERM, then SIGKILL) when their
context ends; memcached comes from Debian's `memcached` package, installed on demand
by `setup_memcached` (as root, with apt-get) the way the router benchmark installs
DPDK.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from offlow.cbuild import RUNTIME, build_exe
from offlow.debian import find_or_install
from offlow.errors import OfflowError

KVS_TOOLS = RUNTIME / "lib" / "kvs" / "tools"
TOOLS = RUNTIME / "tools"  # the drivers' argument, file and clock helpers (tool_io)
HOST = "127.0.0.1"
START_TIMEOUT = 10.0


def build_server() -> Path:
    """Compile kvs_server (cached by content hash); return the executable."""
    return build_exe("kvs_server", [KVS_TOOLS / "kvs_server.c", TOOLS / "tool_io.c"], ["kvs"],
                     includes=[TOOLS])


def build_loadgen() -> Path:
    """Compile kvs_loadgen (cached by content hash); return the executable."""
    return build_exe("kvs_loadgen", [KVS_TOOLS / "kvs_loadgen.c"], ["kvs"])


def build_echo() -> Path:
    """Compile udp_echo (cached by content hash); return the executable."""
    return build_exe("udp_echo", [TOOLS / "udp_echo.c", TOOLS / "tool_io.c"], includes=[TOOLS])


def free_port() -> int:
    """A port on 127.0.0.1 that is free for both TCP and UDP right now."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind((HOST, 0))
            port = t.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                try:
                    u.bind((HOST, port))
                except OSError:
                    continue
                return int(port)
    raise OfflowError("no port free for both TCP and UDP on 127.0.0.1")


@dataclass
class Server:
    """A running server process (ours or memcached) on HOST:port, TCP and UDP; `stop`
    ends it with `stop_signal`."""

    name: str
    port: int
    proc: subprocess.Popen[str]
    output: str = field(default="")
    stop_signal: int = signal.SIGTERM

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def stop(self, timeout: float = 5.0) -> str:
        """Stop the process (its stop_signal, then SIGKILL after `timeout`); return what
        it printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(self.stop_signal)
            try:
                out, _ = self.proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, _ = self.proc.communicate()
            self.output += out or ""
        elif self.proc.stdout and not self.proc.stdout.closed:
            self.output += self.proc.stdout.read()
        return self.output

    def stats(self) -> dict:
        """kvs_server only, after stop(): its final counters (the JSON line it printed)."""
        for line in reversed(self.output.splitlines()):
            if line.startswith("{"):
                return dict(json.loads(line))
        raise OfflowError(f"{self.name} printed no counters:\n{self.output}")


def _pin(cpus: Sequence[int] | None):  # noqa: ANN202 (a preexec_fn)
    if not cpus:
        return None
    wanted = set(cpus)
    return lambda: os.sched_setaffinity(0, wanted)


def _wait_tcp(port: int, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise OfflowError(f"{what} exited (status {proc.returncode}) at start:\n{out}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise OfflowError(f"{what} did not accept connections on {HOST}:{port} "
                      f"within {START_TIMEOUT:.0f} s")


@contextmanager
def kvs_server(threads: int = 1, port: int | None = None, cpus: Sequence[int] | None = None,
               capacity: int = 1_000_000, memory_mb: int = 1024,
               value_max: int | None = None, extra: Sequence[str] = ()) -> Iterator[Server]:
    """Run kvs_server on HOST (TCP and UDP on one port, a free one by default) for the
    duration of the context; `cpus` pins its workers round robin."""
    exe = build_server()
    port = port or free_port()
    args = [str(exe), "-l", HOST, "-p", str(port), "-t", str(threads), "-c", str(capacity),
            "-m", str(memory_mb)]
    if value_max is not None:
        args += ["-I", str(value_max)]
    if cpus:
        args += ["--cpus", ",".join(map(str, cpus))]
    proc = subprocess.Popen([*args, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    server = Server("kvs_server", port, proc)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("ready "):
            rest = proc.stdout.read() if proc.stdout else ""
            proc.kill()
            raise OfflowError(f"kvs_server did not start: {line}{rest}".strip())
        server.output = line
        yield server
    finally:
        server.stop()


@contextmanager
def udp_echo(threads: int = 1, cpus: Sequence[int] | None = None) -> Iterator[Server]:
    """Run udp_echo on HOST (a free UDP port) for the duration of the context; `cpus`
    pins its threads round robin."""
    args = [str(build_echo()), "-l", HOST, "-p", "0", "-t", str(threads)]
    if cpus:
        args += ["--cpus", ",".join(map(str, cpus))]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("ready udp="):
        proc.kill()
        raise OfflowError(f"udp_echo did not start: {line}")
    server = Server("udp_echo", int(line.split()[1].split("=")[1]), proc, line)
    try:
        yield server
    finally:
        server.stop()


def memcached_path() -> str | None:
    """The memcached executable, if installed."""
    return shutil.which("memcached") or (
        "/usr/bin/memcached" if Path("/usr/bin/memcached").exists() else None)


def setup_memcached() -> tuple[str | None, str | None]:
    """Make memcached available: (path, None), or (None, why not). Installs Debian's
    `memcached` with apt-get when missing (as root)."""
    return find_or_install(memcached_path, ["memcached"], "memcached", "setup",
                           "memcached was installed but is not on PATH")


def memaslap_path() -> str | None:
    """libmemcached's load tool (Debian names it memcaslap; older builds memaslap)."""
    return shutil.which("memcaslap") or shutil.which("memaslap")


def setup_memaslap() -> tuple[str | None, str | None]:
    """Make memcaslap available: (path, None), or (None, why not). Installs Debian's
    `libmemcached-tools` with apt-get when missing (as root)."""
    return find_or_install(memaslap_path, ["libmemcached-tools"],
                           "memcaslap (libmemcached-tools)", "setup",
                           "libmemcached-tools was installed but has no memcaslap or memaslap")


@contextmanager
def memcached(threads: int = 1, port: int | None = None, cpus: Sequence[int] | None = None,
              memory_mb: int = 1024) -> Iterator[Server]:
    """Run a real memcached on HOST with TCP and UDP on one port (`-U port -p port
    -l 127.0.0.1`) for the duration of the context; killed at its end."""
    path, why = setup_memcached()
    if not path:
        raise OfflowError(f"memcached is not available: {why}")
    port = port or free_port()
    args = [path, "-l", HOST, "-p", str(port), "-U", str(port), "-t", str(threads),
            "-m", str(memory_mb)]
    if os.geteuid() == 0:
        args += ["-u", "root"]   # memcached refuses to run as root without -u
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=_pin(cpus))
    # killed when done: it keeps nothing and says nothing on a stop, and a SIGTERM ends
    # it only at its clock's next tick (up to 1 s, which every oracle run waited out)
    server = Server("memcached", port, proc, stop_signal=signal.SIGKILL)
    try:
        _wait_tcp(port, proc, "memcached")
        yield server
    finally:
        server.stop()


def run_loadgen(port: int, *, proto: str = "udp", mode: str = "closed", duration: float = 5.0,
                threads: int = 1, conns: int = 1, depth: int = 16, rate: float | None = None,
                keys: int = 100_000, key_size: int = 32, value_size: int = 64,
                zipf: float = 0.9, get_ratio: float = 0.9, warmup: bool = True,
                timeout_ms: float = 200, seed: int = 1, cpus: Sequence[int] | None = None,
                progress: str = "auto", timeout: float | None = None,
                echo: bool = False) -> dict:
    """Run kvs_loadgen against HOST:port and return its JSON report (progress lines, if
    any, go to this process's stderr)."""
    exe = build_loadgen()
    args = [str(exe), "-s", HOST, "-p", str(port), "--proto", proto, "--mode", mode,
            "--duration", str(duration), "--threads", str(threads), "--conns", str(conns),
            "--depth", str(depth), "--keys", str(keys), "--key-size", str(key_size),
            "--value-size", str(value_size), "--zipf", str(zipf), "--get-ratio", str(get_ratio),
            "--timeout-ms", str(timeout_ms), "--seed", str(seed), "--progress", progress]
    if rate is not None:
        args += ["--rate", str(rate)]
    if not warmup:
        args.append("--no-warmup")
    if echo:
        args.append("--echo")
    if cpus:
        args += ["--cpus", ",".join(map(str, cpus))]
    limit = timeout if timeout is not None else duration + 120
    res = subprocess.run(args, stdout=subprocess.PIPE, text=True, timeout=limit)
    if res.returncode != 0:
        raise OfflowError(f"kvs_loadgen failed (exit {res.returncode}): {' '.join(args)}")
    try:
        return dict(json.loads(res.stdout))
    except json.JSONDecodeError as e:
        raise OfflowError(f"kvs_loadgen printed no JSON ({e}):\n{res.stdout}") from e
