"""serve-devices on 127.0.0.1 that a test module's tests share (docs/remote.md: a
serve-device listens again after each run, and each run's device process has a folder,
counters and stats of its own). Only for tests that neither kill, stop nor fail the
server and read nothing of its stderr: those start their own (tests/test_remote.py's
`serve`)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

TCP = {"UCX_TLS": "tcp"}  # the network path, as tests/test_remote.py's servers


class SharedServer:
    """One `offlow serve-device` on a free port of 127.0.0.1; its stderr read for its
    whole life (an unread pipe would fill and block it after enough runs)."""

    def __init__(self, secret: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "offlow.cli", "serve-device", "--listen", "127.0.0.1:0",
             "--secret-file", str(secret)],
            env={**os.environ, **TCP}, text=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        self.said: list[str] = []
        port = 0
        for line in self.proc.stderr:
            self.said.append(line)
            if "listening on" in line:
                port = int(line.rsplit(":", 1)[1])
                break
        if not port:
            self.proc.wait(timeout=60)
            raise AssertionError(f"serve-device did not listen:\n{''.join(self.said)}")
        self.port = port
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.said.append(line)

    def check_serving(self) -> None:
        """Fails if the server has ended (no shared test may end it)."""
        assert self.proc.poll() is None, (
            f"the shared serve-device ended (status {self.proc.returncode}):\n"
            f"{''.join(self.said)}")

    def close(self) -> None:
        """Stops the server and waits for it and its stderr's reader."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._drain.join(timeout=60)


class Servers:
    """A module's shared serve-devices, started when first asked for, and their secret."""

    def __init__(self, secret: Path) -> None:
        self.secret = secret
        self._servers: list[SharedServer] = []

    def ports(self, n: int) -> list[int]:
        """The ports of `n` distinct servers (a run's devices each need one of their own);
        each is checked to be serving still."""
        while len(self._servers) < n:
            self._servers.append(SharedServer(self.secret))
        for s in self._servers[:n]:
            s.check_serving()
        return [s.port for s in self._servers[:n]]

    def check_serving(self) -> None:
        """Fails if a server started so far has ended."""
        for s in self._servers:
            s.check_serving()

    def close(self) -> None:
        """Stops every server."""
        for s in self._servers:
            s.close()


@pytest.fixture(scope="module")
def shared_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """serve-devices on 127.0.0.1 shared by a module's tests (those that neither kill,
    stop nor fail one and read nothing of its stderr), with a secret of their own."""
    secret = tmp_path_factory.mktemp("served") / "secret"
    secret.write_bytes(b"the shared serve-devices' secret, 42 bytes")
    secret.chmod(0o600)
    servers = Servers(secret)
    yield servers
    servers.close()


@pytest.fixture
def served(shared_servers: Servers) -> Iterator[Servers]:
    """The module's shared serve-devices, each checked to be serving still after the
    test."""
    yield shared_servers
    shared_servers.check_serving()
