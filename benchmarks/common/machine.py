"""What a benchmark ran on, and whether the machine was quiet before it timed."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path


def _cpu_times() -> dict[str, tuple[int, int]]:
    """Per CPU: (all jiffies, idle + iowait jiffies) since boot, from /proc/stat."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f and f[0].startswith("cpu") and f[0] != "cpu":
            v = list(map(int, f[1:]))
            idle = v[3] + (v[4] if len(v) > 4 else 0)
            out[f[0]] = (sum(v), idle)
    return out


def quiet_check(seconds: float) -> dict[str, float]:
    """Per-CPU busy fraction over `seconds` (before timing: is the machine quiet?)."""
    try:
        a = _cpu_times()
        time.sleep(seconds)
        b = _cpu_times()
    except OSError:
        return {}
    busy = {}
    for cpu, (tot, idle) in b.items():
        if cpu in a:
            dt, di = tot - a[cpu][0], idle - a[cpu][1]
            busy[cpu] = round(1 - di / dt, 3) if dt > 0 else 0.0
    return busy


def machine() -> dict[str, object]:
    """What the numbers were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    thp = ""
    try:
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "kernel": platform.release(),
            "transparent_hugepage": thp}


# CPU features that choose code paths here and in the peers (DPDK's AVX-512 lookups,
# glibc's memcpy, the checksum and CRC kernels, OpenSSL's AES-NI)
FEATURES = ("aes", "sse4_2", "avx", "avx2", "bmi2", "erms", "fsrm", "pclmulqdq", "vpclmulqdq",
            "gfni", "vaes", "avx512f", "avx512bw", "avx512vl", "avx512vbmi2")


def cpu_features() -> list[str]:
    """Which of FEATURES the CPU has (its /proc/cpuinfo flags), in that order."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return [f for f in FEATURES if f in flags]
    except OSError:
        pass
    return []
