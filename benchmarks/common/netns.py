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
