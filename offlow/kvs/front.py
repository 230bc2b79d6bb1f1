"""The TCP front of a key-value store whose table is on a remote device (docs/kvs.md#tcp,
runtime/lib/kvs/tools/kvs_front.c): the run's TCP connections end on the host, in a
process of their own, which sends each request through the program as a datagram to
the run's UDP socket and writes the reply back on its connection."""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offlow.cbuild import build_exe
from offlow.errors import OfflowError
from offlow.kvs.tools import KVS_TOOLS, TOOLS

UDP_HEADERS = 42  # Ethernet, IPv4 and UDP headers: a datagram takes the mtu less these
STOP_GRACE = 5.0  # seconds a front has to stop before it is killed


def build_front() -> Path:
    """Compile kvs_front (cached by content hash); return the executable."""
    return build_exe("kvs_front", [KVS_TOOLS / "kvs_front.c", TOOLS / "tool_io.c"], ["kvs"],
                     includes=[TOOLS])


@dataclass
class Front:
    """A running front: its process and where its counters go when it stops."""

    proc: subprocess.Popen[bytes]
    stats: Path

    @classmethod
    def start(cls, listen_fd: int, udp_port: int, runner_fd: int, stats: Path,
              max_conns: int, mtu: int) -> Front:
        """Serve `listen_fd` by forwarding to 127.0.0.1:`udp_port`; ends with the
        runner's pipe `runner_fd` or stop()."""
        cmd = [str(build_front()), "--listen-fd", str(listen_fd), "--udp-port", str(udp_port),
               "--runner-fd", str(runner_fd), "--stats", str(stats),
               "--conns", str(max_conns), "--datagram-max", str(mtu - UDP_HEADERS)]
        return cls(subprocess.Popen(cmd, pass_fds=(listen_fd, runner_fd)), stats)

    def signal(self, sig: int = signal.SIGTERM) -> None:
        """Ask it to stop (it closes its connections and writes its counters)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def finish(self) -> dict[str, Any]:
        """Stop it and return its counters (RunResult.tcp)."""
        self.signal()
        try:
            self.proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise OfflowError("the TCP front (kvs_front) did not stop: killed") from None
        if self.proc.returncode != 0 or not self.stats.exists():
            raise OfflowError(f"the TCP front (kvs_front) failed (status {self.proc.returncode})")
        counts: dict[str, Any] = json.loads(self.stats.read_text())
        return counts

    def kill(self) -> None:
        """End it at once (a failed start)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
