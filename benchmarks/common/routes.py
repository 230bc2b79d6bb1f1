"""Routes and destination addresses for the router benchmarks: a prefix file read once
by the runtime's own reader (through the LPM driver, benchmarks/c/bench_lpm.c), slices
of it, and seeded addresses, "random" (uniform over the address space) and "hits"
(inside a uniformly chosen prefix of the table, random host bits)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np

from benchmarks.common import C
from offlow.cbuild import RUNTIME, build_exe
from offlow.errors import OfflowError

TOOLS = RUNTIME / "tools"  # the drivers' helpers (tool_io)
# What both LPM programs (offlow's and DPDK's) share: the lpm library, lpm_bench.c and
# the same flags (-O3 -march=native)
LPM_COMMON = [C / "lpm_bench.c", TOOLS / "tool_io.c"]
LPM_SETS = ("base", "gnu", "native", "werror")
NPORTS = 16
SEED = 1
V4 = np.dtype([("addr", "<u4"), ("hop", "<u2"), ("len", "u1"), ("pad", "u1")])
V6 = np.dtype([("addr", "u1", (16,)), ("hop", "<u2"), ("len", "u1"), ("pad", "u1")])


def prefix_file(path: str | os.PathLike[str]) -> Path:
    """`path` as a Path when a file is there; else OfflowError, saying where the shared
    data is named."""
    path = Path(path)
    if not path.exists():
        raise OfflowError(f"prefix file not found: {path} ($OFFLOW_DATA names the shared "
                          "data)")
    return path


def build_offlow() -> Path:
    """bench_lpm (offlow's lookups, and the routes as the runtime reads them) with the
    runtime's lpm library."""
    return build_exe("bench_lpm", [C / "bench_lpm.c", *LPM_COMMON], ["lpm"], LPM_SETS,
                     includes=[C, TOOLS])


def load_routes(exe: Path, prefixes: Path, work: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    """The prefix file through the runtime's reader: its summary and the packed routes."""
    res = subprocess.run([str(exe), "dump", str(prefixes), str(NPORTS), str(work)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise OfflowError(f"bench_lpm could not read {prefixes}: {res.stderr.strip()}")
    info = json.loads(res.stdout)
    return (info, np.fromfile(work / "routes4.bin", dtype=V4),
            np.fromfile(work / "routes6.bin", dtype=V6))


def take(routes: np.ndarray, size: int | None) -> np.ndarray:
    """`size` routes spread evenly over the list (every k-th), or all of them."""
    n = len(routes)
    if size is None or size >= n:
        return routes
    return routes[(np.arange(size, dtype=np.int64) * n) // size]


def addresses4(routes: np.ndarray, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """n uniform addresses and n inside uniformly chosen prefixes (host order u32)."""
    rnd = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    if len(routes) == 0:
        return {"random": rnd, "hits": rnd.copy()}
    r = routes[rng.integers(0, len(routes), size=n)]
    lens = r["len"].astype(np.uint64)
    mask = np.where(lens == 0, np.uint64(0),
                    (np.uint64(0xFFFFFFFF) << (np.uint64(32) - lens)) & np.uint64(0xFFFFFFFF))
    host = rng.integers(0, 1 << 32, size=n, dtype=np.uint64)
    hits = (r["addr"].astype(np.uint64) & mask) | (host & ~mask & np.uint64(0xFFFFFFFF))
    return {"random": rnd, "hits": hits.astype(np.uint32)}


def addresses6(routes: np.ndarray, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """As addresses4 for IPv6: (n, 16) uint8 arrays, network order."""
    rnd = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    if len(routes) == 0:
        return {"random": rnd, "hits": rnd.copy()}
    r = routes[rng.integers(0, len(routes), size=n)]
    keep = np.clip(r["len"].astype(np.int64)[:, None] - 8 * np.arange(16)[None, :], 0, 8)
    mask = ((0xFF00 >> keep) & 0xFF).astype(np.uint8)
    host = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    return {"random": rnd, "hits": (r["addr"] & mask) | (host & ~mask)}
