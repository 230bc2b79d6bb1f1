"""Two network namespaces joined by a veth pair, made and removed by a test (UCX over
TCP between them stands for two hosts), and the processes a test starts there."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest

ADDR_A, ADDR_B = "10.231.0.1", "10.231.0.2"


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """The processes a test starts: killed at its end, whatever the outcome."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.fixture
def two_hosts(procs: list[subprocess.Popen[str]]) -> Iterator[tuple[str, str]]:
    """Two namespaces, 10.231.0.1 in the first and .2 in the second, joined by a veth
    pair; removed (with the pair) afterwards."""
    tag = f"{os.getpid() % 100000}"
    a, b = f"ofl-rem{tag}a", f"ofl-rem{tag}b"
    made = []
    try:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "add", ns], check=True)
            made.append(ns)
        subprocess.run(["ip", "-n", a, "link", "add", "v0", "type", "veth", "peer", "name",
                        "v1", "netns", b], check=True)
        for ns, dev, addr in ((a, "v0", f"{ADDR_A}/30"), (b, "v1", f"{ADDR_B}/30")):
            subprocess.run(["ip", "-n", ns, "addr", "add", addr, "dev", dev], check=True)
            for d in ("lo", dev):
                subprocess.run(["ip", "-n", ns, "link", "set", d, "up"], check=True)
        for ns, dev in ((a, "v0"), (b, "v1")):  # a veth end carries once both are up
            for _ in range(200):
                show = subprocess.run(["ip", "-n", ns, "-o", "link", "show", dev],
                                      capture_output=True, text=True).stdout
                if "state UP" in show:
                    break
                time.sleep(0.05)
        yield a, b
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False)
