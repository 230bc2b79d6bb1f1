"""`offlow bench remote`: the remote target's transport (runtime/lib/remote, docs/remote.md)
between two network namespaces joined by a veth pair (made and removed here), UCX over
TCP, beside UCX's own `ucx_perftest` over the same transport, path and addresses in the
same run.

benchmarks/c/bench_remote.c is both ends. Ring rows: a producer in one namespace fills a
ring that the ring bridge carries, `batch` entries a message at most, to a consumer in
the other that checks every entry; beside `ucx_perftest -t tag_bw` with messages of the
bridge's size (batch x entry bytes). Round trip: a message and its answer through
remote_link (as a direct channel would use it), halved, beside `ucx_perftest -t
tag_lat`'s latency (which is half its ping-pong's round trip); medians both. Bulk rows:
a bulk channel as a remote device's run carries it (the host's user -> its end of the
link -> UCX rendezvous -> the device's end -> the device's user, or back), transfers
of 1, 4 and 20 MB each way, beside `ucx_perftest -t tag_bw` with messages of the same
size (rendezvous there too). Targets:
ring bandwidth >= 0.8x tag bandwidth (every row) and one-way latency <= 1.2x tag
latency; the verdicts are reported, never enforced. Then the key-value store sharded
over 1, 2 and 3 remote store hosts (benchmarks/remote_kvs.py). Every namespace shares
this machine's CPUs: see docs/remote.md on reading the ratios.

With `loopback` (`offlow bench remote --loopback`) both sides run in this process's
namespace over 127.0.0.1 instead (no root; a machine whose namespaces cannot be made,
such as a container); the store's hosts are then servers on 127.0.0.1 too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from benchmarks import remote_kvs
from benchmarks.common import C
from benchmarks.common.machine import machine, machine_line
from benchmarks.common.netns import ADDR_A, two_namespaces
from benchmarks.common.peers import setup_ucx
from offlow.cbuild import RUNTIME, TOOL, build_exe
from offlow.errors import OfflowError

NS_PREFIX = "ofl-bench-rem"
PERF_PORT = 13337  # ucx_perftest's port inside our own namespace (nothing else there)
BW_TARGET, LAT_TARGET = 0.8, 1.2
ENV = {"UCX_TLS": "tcp"}  # the network path even between namespaces of one machine
LOOPBACK = "127.0.0.1"
TOOLS = RUNTIME / "tools"


@dataclass(frozen=True)
class Sweep:
    """What one invocation measures."""

    entries: int                # per ring row
    batches: tuple[int, ...]
    sizes: tuple[int, ...]      # entry bytes (header and index included)
    rings: tuple[int, ...]      # ring sizes (entries): the most in flight over the link
    rtt_iters: int
    rtt_size: int               # bytes of the round trip's message
    warm: int                   # unmeasured round trips / perftest warm-up iterations
    reps: int                   # runs of each ring row and of its tag_bw (medians)
    kvs_hosts: tuple[int, ...] = (1, 2, 3)  # remote store hosts of the sharded kvs rows
    kvs_count: int = 20_000     # requests in the kvs capture (replayed kvs_loops times)
    kvs_loops: int = 10
    bulk_sizes: tuple[int, ...] = (1 << 20, 4 << 20, 20 << 20)   # bytes per transfer
    bulk_bytes: int = 40 << 20  # per bulk run: max(2, bulk_bytes // size) transfers


FULL = Sweep(entries=200_000, batches=(1, 8, 32, 128), sizes=(64, 512, 2048),
             rings=(1024, 16384), rtt_iters=20_000,
             rtt_size=64, warm=1000, reps=3)
QUICK = Sweep(entries=50_000, batches=(1, 32), sizes=(64, 1024), rings=(1024,), rtt_iters=5000,
              rtt_size=64,
              warm=500, reps=1, kvs_loops=2, bulk_sizes=(1 << 20, 4 << 20),
              bulk_bytes=8 << 20)


def build() -> Path:
    """Compile bench_remote with runtime/lib/remote and the remote target's channel
    relay (runtime/tools/remote_chan.c) once per content hash."""
    return build_exe("bench_remote", [C / "bench_remote.c", TOOLS / "remote_chan.c"], ["remote"],
                     TOOL, includes=[TOOLS])


@dataclass(frozen=True)
class Hosts:
    """Where the two sides run: the serving side in namespace `serve`, the connecting
    side in `connect` (None: this process's namespace), the serving side at `addr`."""

    serve: str | None
    connect: str | None
    addr: str


def _ns(ns: str | None, *cmd: str) -> list[str]:
    """`cmd` run in namespace `ns` (as it is, for None: this namespace)."""
    return ["ip", "netns", "exec", ns, *cmd] if ns else list(cmd)


def check_hosts(loopback: bool) -> None:
    """Refuse a run that needs namespaces (not `loopback`) where they cannot be made."""
    if not loopback and (os.geteuid() != 0 or shutil.which("ip") is None):
        raise OfflowError("offlow bench remote makes two network namespaces: it needs root "
                          "and iproute2's ip (--loopback: both sides over 127.0.0.1 here)")


def hosts(loopback: bool) -> AbstractContextManager[Hosts]:
    """Two namespaces joined by a veth pair (made here, removed on the way out; root),
    or with `loopback` this namespace's 127.0.0.1 for both sides."""
    check_hosts(loopback)
    return nullcontext(Hosts(None, None, LOOPBACK)) if loopback else _namespaces()


@contextmanager
def _namespaces() -> Iterator[Hosts]:
    with two_namespaces(NS_PREFIX) as (a, b):
        yield Hosts(a, b, ADDR_A)


@contextmanager
def _server(cmd: list[str]) -> Iterator[subprocess.Popen[str]]:
    """A server process, killed on the way out if it is still running."""
    p = subprocess.Popen(cmd, env={**os.environ, **ENV}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.communicate()


def _json(out: str, who: str) -> dict:
    """The last line of `out`, a JSON object, or the error that the program printed."""
    lines = out.strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        raise OfflowError(f"bench_remote {who} failed: {out.strip()[-400:]}")
    return json.loads(lines[-1])


def _pair(exe: Path, h: Hosts, secret: Path, mode: list[str],
          timeout: float) -> tuple[dict, dict]:
    """Run bench_remote's server on the serving side and its client on the connecting
    one; return their JSON lines."""
    with _server(_ns(h.serve, str(exe), "serve", h.addr, str(secret), *mode)) as srv:
        assert srv.stdout is not None
        first = srv.stdout.readline()
        if not first.startswith("port "):
            raise OfflowError(f"bench_remote serve failed: {first}{srv.stderr.read()}")
        cli = subprocess.run(_ns(h.connect, str(exe), "client", h.addr, first.split()[1],
                                 str(secret),
                                 *mode), env={**os.environ, **ENV}, capture_output=True,
                             text=True, timeout=timeout)
        s_out, _ = srv.communicate(timeout=timeout)
    return _json(s_out, "serve"), _json(cli.stdout + cli.stderr, "client")


def _perf(exe: str, h: Hosts, args: list[str], timeout: float) -> dict:
    """One ucx_perftest run (server on the serving side, client on the connecting one):
    its final CSV row as {iterations, lat_p50_us, bw_mbs, msg_rate}."""
    with _server(_ns(h.serve, exe, "-p", str(PERF_PORT))):
        for _ in range(50):  # the server listens within a moment; retry the connection
            res = subprocess.run(_ns(h.connect, exe, h.addr, "-p", str(PERF_PORT), "-v", *args),
                                 env={**os.environ, **ENV}, capture_output=True, text=True,
                                 timeout=timeout)
            if res.returncode == 0 or "connect" not in res.stderr + res.stdout:
                break
            time.sleep(0.1)
    rows = [ln.strip().split(",") for ln in res.stdout.splitlines() if ln.strip()[:1].isdigit()]
    if res.returncode != 0 or not rows:
        raise OfflowError(f"ucx_perftest {' '.join(args)} failed (exit {res.returncode}): "
                          f"{(res.stderr or res.stdout).strip()[-300:]}")
    f = rows[-1]
    return {"iterations": int(f[0]), "lat_p50_us": float(f[1]), "bw_mbs": float(f[5]),
            "msg_rate": float(f[7])}


def _beside(row: dict, perfs: list[dict]) -> dict:
    """`row` with the median of its tag_bw runs and its ratio to it (when run)."""
    if perfs:
        p = sorted(perfs, key=lambda x: x["bw_mbs"])[len(perfs) // 2]
        row["perftest"] = {**p, "bw_mbs_all": [x["bw_mbs"] for x in perfs]}
        row["ratio"] = row["mbs"] / p["bw_mbs"] if p["bw_mbs"] > 0 else None
    return row


def _cells(r: dict) -> tuple[str, str, str]:
    """A row's MB/s (min-max), tag_bw MB/s and ratio, as printed."""
    p = r["perftest"]
    pb, ratio = (f"{p['bw_mbs']:.1f}", f"{r['ratio']:.2f}") if p else ("-", "-")
    return f"{r['mbs']:.1f} ({r['mbs_min']:.1f}-{r['mbs_max']:.1f})", pb, ratio


def ring_row(exe: Path, perf: str | None, h: Hosts, secret: Path, n: int,
             ring: int, batch: int, size: int, sweep: Sweep) -> dict:
    """One ring configuration beside tag_bw at the bridge's message size, taking turns
    `sweep.reps` times; the medians."""
    runs, perfs = [], []
    for _ in range(sweep.reps):
        srv, cli = _pair(exe, h, secret, ["ring", str(n), str(size), str(batch),
                                              str(ring)], timeout=600)
        run = {"received": srv["received"], "bad": srv["bad"], "sent": cli["sent"],
               "msgs": cli["msgs_out"], "msgs_in": srv["msgs_in"], "secs": cli["secs"]}
        if run["received"] != n or run["sent"] != n or run["bad"]:
            raise OfflowError(f"bench_remote ring lost or damaged entries: {run} of {n}")
        runs.append(run)
        if perf:
            perfs.append(_perf(perf, h, ["-t", "tag_bw", "-s", str(batch * size), "-n",
                                             str(max(n // batch, 1000)), "-w",
                                             str(sweep.warm)], timeout=600))
    secs = sorted(r["secs"] for r in runs)
    mid = secs[len(secs) // 2]
    row = {"ring_size": ring, "batch": batch, "entry_size": size, "entries": n, "runs": runs,
           "entries_per_s": n / mid, "mbs": n * size / mid / 1e6,
           "mbs_min": n * size / secs[-1] / 1e6, "mbs_max": n * size / secs[0] / 1e6,
           "perftest": None, "ratio": None}
    return _beside(row, perfs)


def rtt_row(exe: Path, perf: str | None, h: Hosts, secret: Path,
            sweep: Sweep) -> dict:
    """The link's round trip beside tag_lat with messages of the same size."""
    srv, cli = _pair(exe, h, secret, ["rtt", str(sweep.rtt_iters), str(sweep.rtt_size),
                                          str(sweep.warm)], timeout=600)
    total = sweep.rtt_iters + sweep.warm
    if srv["answered"] != total or cli["answered"] != total or cli["bad"]:
        raise OfflowError(f"bench_remote rtt lost or damaged messages: {srv} {cli}")
    row = {"size": sweep.rtt_size, "iterations": sweep.rtt_iters, "answered": cli["answered"],
           "rtt_p50_ns": cli["rtt_p50_ns"], "rtt_p99_ns": cli["rtt_p99_ns"],
           "one_way_p50_us": cli["rtt_p50_ns"] / 2e3, "perftest": None, "ratio": None}
    if perf:
        p = _perf(perf, h, ["-t", "tag_lat", "-s", str(sweep.rtt_size), "-n",
                                str(sweep.rtt_iters), "-w", str(sweep.warm)], timeout=600)
        row["perftest"] = p
        row["ratio"] = row["one_way_p50_us"] / p["lat_p50_us"] if p["lat_p50_us"] > 0 else None
    return row


def bulk_row(exe: Path, perf: str | None, h: Hosts, secret: Path, size: int,
             direction: str, sweep: Sweep) -> dict:
    """Bulk transfers of `size` bytes through a channel across the link, `direction` up
    (host to device) or down, beside tag_bw at the same message size, taking turns
    `sweep.reps` times; the medians."""
    count = max(2, sweep.bulk_bytes // size)
    runs, perfs = [], []
    for _ in range(sweep.reps):
        srv, cli = _pair(exe, h, secret, ["bulk", str(size), str(count), direction],
                         timeout=600)
        recv = srv if direction == "up" else cli
        if srv["transfers"] != count or cli["transfers"] != count or recv["bad"] or \
                recv["bulk_in"] != count:
            raise OfflowError(f"bench_remote bulk lost or damaged transfers: {srv} {cli}")
        runs.append({"transfers": count, "secs": cli["secs"]})
        if perf:
            perfs.append(_perf(perf, h, ["-t", "tag_bw", "-s", str(size), "-n",
                                             str(max(count, 10)), "-w", "2"], timeout=600))
    secs = sorted(r["secs"] for r in runs)
    mid, total = secs[len(secs) // 2], size * count
    row = {"direction": direction, "size": size, "transfers": count, "runs": runs,
           "mbs": total / mid / 1e6, "mbs_min": total / secs[-1] / 1e6,
           "mbs_max": total / secs[0] / 1e6, "perftest": None, "ratio": None}
    return _beside(row, perfs)


def format_bulk(rows: list[dict]) -> str:
    """The bulk rows as text."""
    head = (f"{'bulk':>4} {'MB':>7} {'n':>3} | {'MB/s (min-max)':>22} | {'tag_bw MB/s':>11} | "
            f"{'ratio':>5}")
    out = [head, "-" * len(head)]
    for r in rows:
        mbs, pb, ratio = _cells(r)
        out.append(f"{r['direction']:>4} {r['size'] / 2**20:>7.2f} {r['transfers']:>3} | "
                   f"{mbs:>22} | {pb:>11} | {ratio:>5}")
    return "\n".join(out)


def verdicts(rows: list[dict], rtt: dict) -> dict:
    """The targets: per ring size, the worst ring ratio >= BW_TARGET; the round trip's
    <= LAT_TARGET (meets None where ucx_perftest was not run)."""
    bw = []
    for ring in sorted({r["ring_size"] for r in rows}):
        ratios = [r["ratio"] for r in rows if r["ring_size"] == ring and r["ratio"] is not None]
        worst = min(ratios) if ratios else None
        bw.append({"ring_size": ring, "min_ratio": worst,
                   "meets": None if worst is None else worst >= BW_TARGET})
    lat = rtt.get("ratio")
    return {"bw_target": BW_TARGET, "bw": bw, "lat_target": LAT_TARGET, "lat_ratio": lat,
            "lat_meets": None if lat is None else lat <= LAT_TARGET}


def format_table(rows: list[dict], rtt: dict) -> str:
    """The ring rows and the round trip as text."""
    head = (f"{'ring':>5} {'batch':>5} {'entry B':>7} | {'Mentries/s':>10} | "
            f"{'MB/s (min-max)':>22} | {'tag_bw MB/s':>11} | {'ratio':>5}")
    out = [head, "-" * len(head)]
    for r in rows:
        mbs, pb, ratio = _cells(r)
        out.append(f"{r['ring_size']:>5} {r['batch']:>5} {r['entry_size']:>7} | "
                   f"{r['entries_per_s'] / 1e6:>10.3f} | {mbs:>22} | {pb:>11} | {ratio:>5}")
    p = rtt["perftest"]
    out.append(f"round trip ({rtt['size']} B, {rtt['iterations']} times): one way (p50 / 2) "
               f"{rtt['one_way_p50_us']:.2f} us, p99 round trip {rtt['rtt_p99_ns'] / 1e3:.1f} us"
               + (f"; tag_lat p50 {p['lat_p50_us']:.2f} us; ratio {rtt['ratio']:.2f}" if p
                  else ""))
    return "\n".join(out)


def verdict_lines(v: dict) -> list[str]:
    """One line per target (and ring size)."""
    def say(ratio: float | None, meets: bool | None) -> str:
        return "not judged (no ucx_perftest)" if meets is None else (
            f"{ratio:.2f}: " + ("meets" if meets else "misses"))
    lines = [f"verdict: ring bandwidth, rings of {b['ring_size']}, worst ratio vs target >= "
             f"{BW_TARGET}: {say(b['min_ratio'], b['meets'])}" for b in v["bw"]]
    lines.append(f"verdict: round trip, ratio vs target <= {LAT_TARGET}: "
                 f"{say(v['lat_ratio'], v['lat_meets'])}")
    return lines


def plot(res: dict, path: Path) -> None:
    """The ring's MB/s beside tag_bw's per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"] + res["bulk"]
    names = [f"ring {r['ring_size']}, batch {r['batch']}, {r['entry_size']} B"
             if "ring_size" in r else f"bulk {r['direction']} {r['size'] / 2**20:.2f} MB"
             for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows) + 2), 4))
    ax.bar([i - 0.2 for i in x], [r["mbs"] for r in rows], 0.4,
           label="offlow ring bridge / bulk channel")
    ax.bar([i + 0.2 for i in x], [r["perftest"]["bw_mbs"] if r["perftest"] else 0
                                  for r in rows], 0.4, label="ucx_perftest tag_bw")
    ax.set_xticks(list(x), names, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("MB/s (UCX over TCP, veth between namespaces)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"offlow bench remote on {res['machine']['cpu']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def measure(sweep: Sweep, entries: int, perf: str | None,
            loopback: bool = False) -> tuple[list[dict], dict, list[dict]]:
    """Every ring row, the round trip and the bulk rows, in namespaces made and removed
    here (or with `loopback`, both sides here over 127.0.0.1)."""
    where = hosts(loopback)
    exe = build()
    with tempfile.TemporaryDirectory(prefix="offlow-bench-remote-") as tmp, where as h:
        secret = Path(tmp) / "secret"
        secret.write_bytes(os.urandom(32).hex().encode())
        secret.chmod(0o600)
        rows = [ring_row(exe, perf, h, secret, entries, r, b, s, sweep)
                for r in sweep.rings for s in sweep.sizes for b in sweep.batches]
        rtt = rtt_row(exe, perf, h, secret, sweep)
        bulk = [bulk_row(exe, perf, h, secret, size, d, sweep)
                for size in sweep.bulk_sizes for d in ("up", "down")]
    return rows, rtt, bulk


def run(quick: bool, out_json: str | os.PathLike[str] | None,
        out_png: str | os.PathLike[str] | None = None, sweep: Sweep | None = None,
        loopback: bool = False) -> dict:
    """Run the benchmark, print its tables and verdicts, optionally write JSON and a plot;
    return the results. `sweep` overrides QUICK / FULL (tests use a tiny one);
    `loopback`: both sides in this namespace over 127.0.0.1 (the module docstring)."""
    sw = sweep or (QUICK if quick else FULL)
    check_hosts(loopback)  # (before anything is built or installed)
    perf, why = setup_ucx()
    info = machine()
    print(machine_line(info))
    path = (f"in this namespace over {LOOPBACK}" if loopback else
            f"between two network namespaces joined by a veth pair, {ADDR_A} serving")
    print(f"{path}, UCX over TCP (UCX_TLS=tcp); both sides share this machine's "
          f"{info['cpus']} CPUs")
    if why:
        print(f"ucx_perftest is missing, so no ratios: {why}")
    rows, rtt, bulk = measure(sw, sw.entries, perf, loopback)
    print(f"ring: {sw.entries} entries per run through a bridge between rings of "
          f"{'/'.join(map(str, sw.rings))} entries, every entry checked at the far end, "
          f"median (min-max) of {sw.reps} runs taking turns with tag_bw at the bridge's "
          f"message size (batch x entry bytes, its median); ratio = ring MB/s / tag_bw MB/s")
    print(format_table(rows, rtt))
    print(f"bulk: transfers through a channel across the link as a run carries them (up: "
          f"host to device, down: back), {sw.bulk_bytes >> 20} MB a run (at least 2 "
          f"transfers), each transfer's CRC32C checked at every hop and its marks by the "
          f"receiver; median (min-max) of {sw.reps} runs taking turns with tag_bw at the "
          f"transfer's size; ratio = bulk MB/s / tag_bw MB/s (not judged: no target)")
    print(format_bulk(bulk))
    v = verdicts(rows, rtt)
    for line in verdict_lines(v):
        print(line)
    with tempfile.TemporaryDirectory(prefix="offlow-bench-remote-kvs-") as tmp:
        kvs = remote_kvs.measure(sw.kvs_hosts, sw.kvs_count, sw.kvs_loops, Path(tmp),
                                 loopback=loopback)
    store_hosts = "servers on 127.0.0.1" if loopback else "namespaces on one bridge"
    print(f"key-value store (examples/kvs_shards.py), Floem's workload ({sw.kvs_count} requests "
          f"x {sw.kvs_loops} loops), the store sharded by key over remote store hosts "
          f"({store_hosts}, UCX over TCP) beside it on nic; store ops/s = requests "
          "/ its busiest core's time. Every host shares these CPUs, so more hosts add no "
          "CPU here (docs/remote.md: how it scales on separate machines)")
    print(remote_kvs.format_table(kvs))
    res = {"benchmark": "remote", "machine": info, "sweep": sw.__dict__,
           "perftest": perf, "perftest_missing": why, "rows": rows, "rtt": rtt, "bulk": bulk,
           "verdict": v, "kvs": kvs, "loopback": loopback}
    if out_json:
        Path(out_json).write_text(json.dumps(res, indent=2) + "\n")
    if out_png:
        plot(res, Path(out_png))
    return res
