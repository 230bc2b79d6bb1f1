"""Two network namespaces joined by a veth pair (two hosts on one machine), made and
removed by whoever needs them: `offlow bench remote` and the remote tests."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

ADDR_A, ADDR_B = "10.231.0.1", "10.231.0.2"


def namespaces(prefix: str) -> tuple[str, str]:
    """The two namespace names for `prefix` in this process (unique per process)."""
    tag = f"{os.getpid() % 100000}"
    return f"{prefix}{tag}a", f"{prefix}{tag}b"


@contextmanager
def two_namespaces(prefix: str) -> Iterator[tuple[str, str]]:
    """Two namespaces, ADDR_A in the first and ADDR_B in the second, joined by a veth
    pair whose ends are up; removed (with the pair) on the way out, whatever happened."""
    a, b = namespaces(prefix)
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
            _wait_up(ns, dev)
        yield a, b
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False)


@contextmanager
def star_namespaces(prefix: str, n: int) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """A host namespace and `n` others (1..9) on one bridge in the host's (one subnet,
    so UCX sees one interface: the host 10.232.0.1, the K-th other 10.232.0.K+2), each
    joined to it by a veth pair of its own: (the host's name, [(a namespace's name, its
    address)]); all removed on the way out, whatever happened."""
    if not 1 <= n <= 9:
        raise ValueError(f"star_namespaces: 1..9 namespaces, not {n}")
    tag = f"{os.getpid() % 100000}"
    host, others = f"{prefix}{tag}h", [f"{prefix}{tag}{k}" for k in range(n)]
    made = []

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True)

    try:
        for ns in (host, *others):
            ip("netns", "add", ns)
            made.append(ns)
        ip("-n", host, "link", "add", "br0", "type", "bridge")
        ip("-n", host, "addr", "add", "10.232.0.1/24", "dev", "br0")
        for d in ("lo", "br0"):
            ip("-n", host, "link", "set", d, "up")
        for k, ns in enumerate(others):
            ip("-n", host, "link", "add", f"h{k}", "type", "veth", "peer", "name", "s0",
               "netns", ns)
            ip("-n", host, "link", "set", f"h{k}", "master", "br0", "up")
            ip("-n", ns, "addr", "add", f"10.232.0.{k + 2}/24", "dev", "s0")
            for d in ("lo", "s0"):
                ip("-n", ns, "link", "set", d, "up")
        for k, ns in enumerate(others):
            _wait_up(host, f"h{k}")
            _wait_up(ns, "s0")
        yield host, [(ns, f"10.232.0.{k + 2}") for k, ns in enumerate(others)]
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False)


def _wait_up(ns: str, dev: str) -> None:
    """Until veth end `dev` in `ns` carries (once both ends are up), 10 s at most."""
    for _ in range(200):
        show = subprocess.run(["ip", "-n", ns, "-o", "link", "show", dev],
                              capture_output=True, text=True).stdout
        if "state UP" in show:
            return
        time.sleep(0.05)
