"""Two network namespaces joined by a veth pair, made and removed by a test (UCX over
TCP between them stands for two hosts; benchmarks/common/netns.py makes them), and the
processes a test starts there."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from benchmarks.common.netns import ADDR_A, ADDR_B, two_namespaces

__all__ = ["ADDR_A", "ADDR_B", "procs", "two_hosts", "veth_in_namespace"]


@contextmanager
def veth_in_namespace(ns: str) -> Iterator[list[str]]:
    """Namespace `ns` with a veth pair ofl-a/ofl-b in it, both up, no IPv6 chatter;
    yields the command prefix that runs in it; removed (with the pair) afterwards."""
    sh = ["ip", "netns", "exec", ns]
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for setting in ("all", "default"):
            subprocess.run([*sh, "sysctl", "-qw", f"net.ipv6.conf.{setting}.disable_ipv6=1"],
                           check=True)
        subprocess.run(["ip", "-n", ns, "link", "add", "name", "ofl-a", "type", "veth", "peer",
                        "name", "ofl-b"], check=True)
        for end in ("ofl-a", "ofl-b"):
            subprocess.run(["ip", "-n", ns, "link", "set", end, "up"], check=True)
        yield sh
    finally:
        subprocess.run(["ip", "netns", "del", ns])


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
    with two_namespaces("ofl-rem") as hosts:
        yield hosts
