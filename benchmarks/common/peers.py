"""The peers' setup: DPDK from Debian (installed on demand, found with pkg-config),
UCX's ucx_perftest (the same), and the CPU a benchmark pins both sides to."""

from __future__ import annotations

import os
import shutil
import subprocess

from offlow.debian import apt_install, find_or_install


def pkg_config(*args: str) -> str | None:
    """`pkg-config ARGS libdpdk`: its output, or None when it fails."""
    if shutil.which("pkg-config") is None:
        return None
    res = subprocess.run(["pkg-config", *args, "libdpdk"], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else None


def setup_dpdk() -> tuple[str | None, str | None]:
    """Make libdpdk available: (version, None), or (None, why not). When pkg-config
    does not find it and this is root with apt-get, installs Debian's libdpdk-dev
    (after `apt-get update` if the first try fails), saying so."""
    version = pkg_config("--modversion")
    if version:
        return version, None
    pkgs = ["libdpdk-dev"] + ([] if shutil.which("pkg-config") else ["pkg-config"])
    why = apt_install(pkgs, "libdpdk-dev", "DPDK setup")
    if why:
        return None, why
    version = pkg_config("--modversion")
    if not version:
        return None, "libdpdk-dev was installed but pkg-config does not find libdpdk"
    print(f"DPDK setup: installed DPDK {version}", flush=True)
    return version, None


def setup_ucx(install: bool = True) -> tuple[str | None, str | None]:
    """Find ucx_perftest: (path, None), or (None, why not). When missing and `install`
    and this is root with apt-get, installs Debian's ucx-utils, saying so."""
    if not install:
        found = shutil.which("ucx_perftest")
        return (found, None) if found else (
            None, "ucx_perftest is not installed (Debian package ucx-utils)")
    return find_or_install(lambda: shutil.which("ucx_perftest"), ["ucx-utils"],
                           "ucx_perftest", "UCX setup", "ucx-utils installed but no ucx_perftest")


def bench_cpu() -> int:
    """The core both sides are pinned to: the last one this process may use."""
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return 0
