"""`offlow bench channels`: host <-> device channel latency and bulk throughput (the
experiments of NFComms, seed 000: its Table 2 and Figure 4), beside the ceilings and
the peer measured in the same run.

The C program benchmarks/c/bench_chan.c forks a "device" process pinned to CPU 1
from the host process pinned to CPU 0; they share MAP_SHARED memory holding the
channel region (chan.h). It measures, one mode per invocation:

- latency the way the paper did: BATCHES batches of PER synchronous messages, the
  time per message = batch time / PER, timed on the sending side (a send returns once
  the receiver has taken the message, so the acknowledgement's way back is included);
  min, max, avg, std over the batches. Rows: direct 56 B messages host->device and
  device->host, the direct round trip (the host's send and receive; the device
  receives and replies with ofl_chan_post, as a handler's REPLY does; timed on the
  host), and small bulk transfers (64 B, 4 KB) both ways;
- bulk throughput from 4 KB to 20 MB, one transfer and K = 8 concurrent transfers on
  8 channels (8 threads on each side, or on each side one channel-manager thread
  serving all 8: the sender's runs the sends its side queues, the receiver's lands
  them), mean +- std over
  the repetitions (of each configuration, in 3 processes: merge_tput), every payload
  filled before and checked after each timed
  transfer; with the host's buffers in plain memory (two copies, through the
  channel's staging ring) and in registered memory ("reg": one copy by the device,
  chan.h's ofl_chan_mem);
- the ceilings: a cache-line ping-pong round trip between the two processes (one
  64-byte line each way), a pipe round trip (1 byte each way), and single-thread
  memcpy at each payload size (plus process_vm_readv from another process, the copy
  a device process makes, and CRC32C, the end-to-end check: both explain the gap to
  memcpy); and the receiving core's ceiling: a thread on the device's CPU copying
  (memcpy, and copy+CRC32C in one pass) bytes a thread on the host's CPU has just
  written, as a bulk receiver finds a sender's bytes. A transfer whose receiver lands
  and checks every byte on one thread cannot beat its copy+CRC32C rate, whatever
  the protocol.

The peer: UCX's ucx_perftest (Debian ucx-utils; the setup step installs it as root
when missing) over shared memory (UCX_TLS=sm,self), server pinned to CPU 1 and client
to CPU 0: tag_lat at 56 B (ucx_perftest reports half the round trip; the ratios use
the round trip) and tag_bw at each payload size (a stream of messages; MB/s there
are MiB/s). When it cannot run, the report says why and the UCX ratios are absent.

Ceilings are also paired with our measurements inside the same processes: a batch
of cache-line ping-pong runs just before each batch of direct round trips on the
channel's own two message lines (a word of each payload, while no message is
pending), the very lines a round trip moves, and the round-trip verdict is judged
against it; a batch on the harness's own two lines runs beside it, and its ratio is
printed too (UCX's runs are normalised by a ping-pong on the harness's lines). Here
the two agree within a few percent. The host times a memcpy of the same bytes just
before each bulk repetition. The ratios to the ceilings are medians of those
per-batch (per-repetition) ratios, which preemption on a shared machine disturbs
least; a throughput configuration runs in several processes, because on the 2-vCPU
machine one process sometimes runs slow for all of its life.

The report prints the CPU's features and the CRC32C path the bench program ran
(`ofl_crc32c_path`: AVX-512 or AVX2 VPCLMULQDQ folding, the crc32 instruction or the
table; OFFLOW_SIMD caps it, see docs/channels.md); on a CPU without AVX-512 it says
that the ceilings (memcpy, and copy+CRC32C alone) bound the bulk rows.

Ratios and targets (reported, never enforced): direct round trip <= 1.5x the
cache-line ping-pong; bulk throughput >= 0.8x memcpy at >= 1 MB; round trip and bulk
throughput (>= 1 MB, one transfer) at least as good as UCX (ratios of medians).
Each bulk / memcpy verdict also carries the receiving core's ceiling at its size
(copy+CRC32C from the other core's bytes, over the copy sweep's memcpy, same run).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.common import C, output
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from benchmarks.common.peers import setup_ucx
from offlow.cbuild import TOOL, build_exe
from offlow.errors import OfflowError

BENCH_SRC = C / "bench_chan.c"
HOST_CPU, DEV_CPU = 0, 1
DIRECT_SIZE = 56
BUSY = 0.2  # busy fraction of a CPU before the run above which the report warns
MB = 1 << 20
UCX_TLS = "sm,self"

# Targets (reported, never enforced).
TARGET_RTT_VS_PINGPONG = 1.5  # direct round trip / cache-line ping-pong round trip, at most
TARGET_BULK_VS_MEMCPY = 0.8   # bulk throughput / memcpy at the same size, at least
TARGET_MIN_SIZE = MB          # ... for payloads of this size and up
TARGET_VS_UCX = 1.0           # ours at least as good as UCX (latency: at most 1.0x)

# NFComms (seed 000) Table 2: per-message latency in microseconds over 10,000 runs,
# 56-byte messages, Netronome NFP-4000 and its host. "Indirect" is its bulk path.
PAPER_TABLE2 = {
    ("direct", "d2h"): {"min": 3.21, "max": 159.42, "avg": 30.04, "std": 7.43},
    ("direct", "h2d"): {"min": 7.57, "max": 37.09, "avg": 17.99, "std": 3.25},
    ("bulk", "d2h"): {"min": 24.38, "max": 118.97, "avg": 51.96, "std": 8.48},
    ("bulk", "h2d"): {"min": 28.95, "max": 61.12, "avg": 39.42, "std": 3.45},
}
# NFComms Figure 4, as its text states it (the plot itself gives no numbers): Gb/s
# from a payload size up. (direction, concurrent transfers) -> [(from bytes, Gb/s)].
PAPER_FIG4: dict[tuple[str, int], list[tuple[int, float]]] = {
    ("h2d", 1): [(2 * MB, 7.8)],
    ("h2d", 8): [(2 * MB, 20.0), (8 * MB + 1, 22.0)],
    ("d2h", 1): [(8 * MB + 1, 9.0)],
    ("d2h", 8): [(8 * MB + 1, 22.0)],
}
PAPER_PEAK_GBPS = 30.0


@dataclass(frozen=True)
class Sweep:
    """What one run measures."""

    lat_batches: int                 # timed batches per latency row
    lat_per: int                     # messages per batch (also for the round-trip ceilings)
    bulk_lat_sizes: tuple[int, ...]  # bulk latency rows
    sizes: tuple[int, ...]           # bulk throughput payloads
    reps: int                        # timed repetitions per payload, in all
    conc: int                        # concurrent transfers
    pingpong_batches: int
    pipe_batches: int
    copy_reps: int
    ucx_lat_iters: int               # tag_lat iterations per run
    ucx_bw_bytes: int                # bytes per tag_bw run (iterations = this / size)
    ucx_reps: int                    # runs of each UCX test
    tput_procs: int = 3              # processes each throughput configuration runs in,
                                     # reps / tput_procs repetitions (and a warm-up) each


FULL = Sweep(lat_batches=10_000, lat_per=100, bulk_lat_sizes=(64, 4096),
             sizes=(4096, 16384, 65536, 262144, MB, 4 * MB, 20 * MB), reps=30, conc=8,
             pingpong_batches=10_000, pipe_batches=200, copy_reps=30,
             ucx_lat_iters=1_000_000, ucx_bw_bytes=1 << 30, ucx_reps=5)
QUICK = Sweep(lat_batches=1_000, lat_per=100, bulk_lat_sizes=(64, 4096),
              sizes=(4096, 65536, MB, 4 * MB, 20 * MB), reps=10, conc=8,
              pingpong_batches=1_000, pipe_batches=40, copy_reps=10,
              ucx_lat_iters=200_000, ucx_bw_bytes=1 << 28, ucx_reps=2, tput_procs=2)

# The throughput configurations: (direction, concurrent?, device side served by, the
# host's buffers: plain memory ("auto": two copies through the staging ring) or
# registered memory ("mem": one copy by the device)).
CONFIGS = (("h2d", False, "thr", "auto"), ("h2d", True, "mgr", "auto"),
           ("h2d", True, "thr", "auto"), ("d2h", False, "thr", "auto"),
           ("d2h", True, "mgr", "auto"), ("d2h", True, "thr", "auto"), ("h2d", False, "thr", "mem"),
           ("h2d", True, "thr", "mem"), ("d2h", False, "thr", "mem"),
           ("d2h", True, "thr", "mem"))


def build() -> Path:
    """Compile bench_chan (the runtime's flags, -O2) once per content hash of its
    sources and headers."""
    return build_exe("bench_chan", [BENCH_SRC], ["core"], TOOL)


def _run(cmd: list[str], what: str, timeout: float = 600) -> dict:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise OfflowError(f"{what} ran past {timeout:.0f} s") from None
    if res.returncode != 0:
        msg = " ".join(res.stderr.strip().splitlines()[-4:]) or f"exit {res.returncode}"
        raise OfflowError(f"{what} failed (exit {res.returncode}): {msg}")
    return json.loads(res.stdout)


def _csv(v: Sequence[int]) -> str:
    return ",".join(map(str, v))


def _label(size: int) -> str:
    """A byte count as 4K, 1M, 20M or 56 B."""
    for unit, n in (("M", MB), ("K", 1024)):
        if size >= n and size % n == 0:
            return f"{size // n}{unit}"
    return f"{size} B"


def merge_tput(runs: Sequence[dict]) -> dict:
    """One throughput configuration's result from the runs of its processes: the
    repetitions of all of them ("samples", in order, each transfer with the memcpy
    timed just before it), their statistics recomputed, the copy bytes summed.

    Why several processes: on the 2-vCPU machine a process sometimes runs slow for
    all of its life (the transfers' copies 2.5x slower, stalls of hundreds of us with
    no context switch in the guest), so one process can decide a row; the medians
    over several are what the configuration does."""
    out = {k: v for k, v in runs[0].items() if k not in ("rows", "device_copy_bytes")}
    out["reps"] = sum(r["reps"] for r in runs)
    out["processes"] = len(runs)
    out["device_copy_bytes"] = {k: sum(r["device_copy_bytes"][k] for r in runs)
                                for k in runs[0]["device_copy_bytes"]}
    out["rows"] = []
    for rows in zip(*(r["rows"] for r in runs), strict=True):
        g = [x for r in rows for x in r["samples"]["gbps"]]
        m = [x for r in rows for x in r["samples"]["memcpy_paired_gbps"]]
        out["rows"].append({"size": rows[0]["size"],
                            "samples": {"gbps": g, "memcpy_paired_gbps": m},
                            "ratio_to_memcpy": _stats([a / b for a, b in zip(g, m, strict=True)]),
                            "gbps": _stats(g), "memcpy_paired_gbps": _stats(m)})
    return out


def _stats(v: Sequence[float]) -> dict[str, float]:
    """min, max, mean, std (sample), median, n of some values."""
    return {"n": len(v), "min": min(v), "max": max(v), "mean": statistics.fmean(v),
            "std": statistics.stdev(v) if len(v) > 1 else 0.0,
            "median": statistics.median(v)}


# ---- the peer: UCX ---------------------------------------------------------------------


def _ucx_version(perftest: str) -> str | None:
    info = Path(perftest).with_name("ucx_info")
    if not info.exists():
        return None
    try:
        out = subprocess.run([str(info), "-v"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines():
        if "Version" in line:
            return line.split("Version", 1)[1].strip()
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    """Whether some socket listens on TCP `port` (from /proc/net/tcp{,6})."""
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 3 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def ucx_run(perftest: str, test: str, size: int, iters: int, timeout: float = 300) -> dict:
    """One ucx_perftest run over shared memory, server on DEV_CPU and client on
    HOST_CPU; the client's final CSV numbers (latency in us, bandwidth in MiB/s)."""
    env = {**os.environ, "UCX_TLS": UCX_TLS}
    port = _free_port()
    common = ["-p", str(port), "-t", test, "-s", str(size), "-n", str(iters),
              "-w", str(max(iters // 10, 10)), "-v"]
    server = subprocess.Popen([perftest, *common, "-c", str(DEV_CPU)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 10
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                out = server.communicate()[0] if server.poll() is not None else ""
                raise OfflowError(f"ucx_perftest server did not start: {out.strip()[-300:]}")
            time.sleep(0.01)
        client = subprocess.run([perftest, "127.0.0.1", *common, "-c", str(HOST_CPU)],
                                env=env, capture_output=True, text=True, timeout=timeout)
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise OfflowError(f"ucx_perftest {test} -s {size} ran past {timeout:.0f} s") from None
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    if client.returncode != 0:
        tail = " ".join((client.stderr or client.stdout).strip().splitlines()[-3:])
        raise OfflowError(f"ucx_perftest {test} -s {size} failed: {tail}")
    lines = [line.strip() for line in client.stdout.splitlines()]
    rows = [line.split(",") for line in lines
            if line and line[0].isdigit() and line.count(",") == 7]
    if not rows:
        raise OfflowError(f"ucx_perftest {test}: no result in {client.stdout.strip()[-300:]}")
    it, p50, avg_lat, lat, avg_bw, bw, avg_mr, mr = rows[-1]
    return {"iters": int(it), "lat_us": float(lat), "lat_p50_us": float(p50),
            "bw_mibs": float(bw), "msg_rate": float(mr)}


def measure_ucx(perftest: str | None, reason: str | None, sw: Sweep,
                exe: str | None = None) -> dict:
    """tag_lat at 56 B and tag_bw at each payload size, `ucx_reps` runs each; or the
    reason UCX is unavailable. With `exe` (bench_chan), each run is followed by its
    ceiling (a cache-line ping-pong, a memcpy of the size) on the same CPUs, and the
    ratio to it is recorded: the peer normalised like our paired ratios, so that the
    comparison survives the machine changing between the two measurements."""
    if perftest is None:
        return {"available": False, "reason": reason}
    res: dict = {"available": True, "version": _ucx_version(perftest), "tls": UCX_TLS,
                 "binary": perftest}
    try:
        rtt, p50, norm = [], [], []
        for _ in range(sw.ucx_reps):
            r = ucx_run(perftest, "tag_lat", DIRECT_SIZE, sw.ucx_lat_iters)
            # ucx_perftest prints half the round trip: its average and its median.
            rtt.append(2e3 * r["lat_us"])
            p50.append(2e3 * r["lat_p50_us"])
            if exe:
                pp = _run([exe, "pingpong", str(max(sw.pingpong_batches // 5, 2)),
                           str(sw.lat_per)], "bench_chan pingpong")["rtt_ns"]["median"]
                norm.append(p50[-1] / pp)
        res["lat"] = {"size": DIRECT_SIZE, "iters": sw.ucx_lat_iters,
                      "rtt_ns": _stats(rtt), "rtt_p50_ns": _stats(p50)}
        if norm:
            res["lat"]["ratio_to_pingpong"] = _stats(norm)
        bw = []
        for size in sw.sizes:
            iters = max(20, min(1_000_000, sw.ucx_bw_bytes // size))
            g, gnorm = [], []
            for _ in range(sw.ucx_reps):
                g.append(ucx_run(perftest, "tag_bw", size, iters)["bw_mibs"] * MB * 8 / 1e9)
                if exe:
                    cp = _run([exe, "copy", str(size), str(max(sw.copy_reps // 3, 2))],
                              "bench_chan copy")["rows"][0]["memcpy_gbps"]["median"]
                    gnorm.append(g[-1] / cp)
            row = {"size": size, "iters": iters, "gbps": _stats(g)}
            if gnorm:
                row["ratio_to_memcpy"] = _stats(gnorm)
            bw.append(row)
        res["bw"] = bw
    except (OfflowError, OSError) as e:
        return {"available": False, "reason": f"ucx_perftest could not run: {e}",
                "version": res["version"]}
    return res


# ---- our side and the ceilings ----------------------------------------------------------


def measure(sw: Sweep, ucx: bool = True, install: bool = True) -> dict:
    """Run everything; return every number (the JSON's content, without the ratios)."""
    t_start = time.monotonic()
    exe = str(build())
    info = machine()
    info["quiet"] = quiet_check(1.0)
    res: dict = {"benchmark": "channels", "machine": info, "features": cpu_features(),
                 "sweep": asdict(sw)}
    res["copy"] = _run([exe, "copy", _csv(sw.sizes), str(sw.copy_reps)], "bench_chan copy")
    res["pingpong"] = _run([exe, "pingpong", str(sw.pingpong_batches), str(sw.lat_per)],
                           "bench_chan pingpong")
    res["pipe"] = _run([exe, "pipe", str(sw.pipe_batches), str(sw.lat_per)], "bench_chan pipe")
    res["lat"] = _run([exe, "lat", str(sw.lat_batches), str(sw.lat_per),
                       _csv(sw.bulk_lat_sizes)], "bench_chan lat")
    res["tput"] = []
    for d, many, serve, copy in CONFIGS:
        k = sw.conc if many else 1
        per = -(-sw.reps // sw.tput_procs)
        runs = [_run([exe, "tput", d, str(k), serve, _csv(sw.sizes), str(per), copy],
                     f"bench_chan tput {d} x{k} {serve} {copy}")
                for _ in range(sw.tput_procs)]
        res["tput"].append(merge_tput(runs))
    if ucx:
        path, why = setup_ucx(install)
        res["ucx"] = measure_ucx(path, why, sw, exe)
    else:
        res["ucx"] = {"available": False, "reason": "not requested"}
    res["paper"] = {"table2_us": {f"{k}_{d}": v for (k, d), v in PAPER_TABLE2.items()},
                    "fig4_gbps": {f"{d}_x{k}": v for (d, k), v in PAPER_FIG4.items()},
                    "fig4_peak_gbps": PAPER_PEAK_GBPS,
                    "source": "seed 000 (NFComms), Table 2 and the text on Figure 4"}
    res["seconds"] = round(time.monotonic() - t_start, 1)
    return res


# ---- ratios and verdicts ----------------------------------------------------------------


def lat_row(res: dict, kind: str, d: str, size: int) -> dict | None:
    """The latency row (kind direct/direct_rtt/bulk, dir h2d/d2h/rtt) or None."""
    for r in res["lat"]["rows"]:
        if r["kind"] == kind and r["dir"] == d and r["size"] == size:
            return r
    return None


def tput_config(res: dict, d: str, k: int, serve: str, copy: str = "auto") -> dict | None:
    for t in res["tput"]:
        if t["dir"] == d and t["k"] == k and t["serve"] == serve and t["copy"] == copy:
            return t
    return None


def _tput_name(t: dict) -> str:
    arrow = "host->device" if t["dir"] == "h2d" else "device->host"
    reg = " reg" if t["copy"] == "mem" else ""
    if t["k"] == 1:
        return f"{arrow} x1{reg}"
    return f"{arrow} x{t['k']} ({'manager' if t['serve'] == 'mgr' else 'threads'}){reg}"


def _vs_receiver(res: dict) -> list[dict]:
    """One transfer's rate over its receiving core's ceiling (copy+CRC32C from the
    other core, same run; ratio of means) at each size of at least TARGET_MIN_SIZE."""
    xc = {r["size"]: r["xcore_crc32c_copy_gbps"]["mean"] for r in res["copy"]["rows"]
          if "xcore_crc32c_copy_gbps" in r}
    return [{"config": _tput_name(t),
             "rows": [{"size": r["size"], "means": r["gbps"]["mean"] / xc[r["size"]]}
                      for r in t["rows"] if r["size"] >= TARGET_MIN_SIZE and r["size"] in xc]}
            for t in res["tput"] if t["k"] == 1]


def _receiver_ceiling(res: dict) -> dict[int, float]:
    """What one receiving thread can reach against memcpy at each size in this run:
    copy+CRC32C from bytes the other core has just written, over memcpy (means).
    Every transfer's bytes land through the device's one CPU, so it bounds every
    row. Its memcpy is the copy sweep's, not the one paired with each repetition
    that the verdicts use; the two can differ by a quarter in one run."""
    return {r["size"]: r["xcore_crc32c_copy_gbps"]["mean"] / r["memcpy_gbps"]["mean"]
            for r in res["copy"]["rows"] if "xcore_crc32c_copy_gbps" in r}


def ratios(res: dict) -> dict:
    """Every ratio, computed from the numbers in `res`, and the target verdicts.

    Verdicts use medians, which preemption on a shared machine moves least: against
    the ceilings, the median of the per-batch (per-repetition) ratios to the ceiling
    measured just before each batch (repetition) in the same processes; against UCX
    (separate processes), the ratio of the medians (UCX: over its runs, latency from
    its per-run median)."""
    out: dict = {}
    verdicts: list[dict] = []
    ucx = res.get("ucx", {})
    have_ucx = bool(ucx.get("available"))
    rtt = lat_row(res, "direct_rtt", "rtt", DIRECT_SIZE)
    if rtt:
        ours, pp = rtt["per_msg_ns"], rtt["pingpong_paired_ns"]
        out["rtt_vs_pingpong"] = {
            "paired_median": rtt["ratio_to_pingpong"]["median"],
            "means": ours["mean"] / pp["mean"],
            "harness_paired_median": rtt["ratio_to_pingpong_harness"]["median"],
            "standalone_medians": ours["median"] / res["pingpong"]["rtt_ns"]["median"]}
        out["rtt_vs_pipe"] = {"medians": ours["median"] / res["pipe"]["rtt_ns"]["median"]}
        v = out["rtt_vs_pingpong"]["paired_median"]
        verdicts.append({"name": "direct round trip / cache-line ping-pong round trip "
                                 "on the channel's lines (median of paired batches)",
                         "value": v, "target": TARGET_RTT_VS_PINGPONG, "at_most": True,
                         "met": v <= TARGET_RTT_VS_PINGPONG})
        if have_ucx:
            u = ucx["lat"]
            out["rtt_vs_ucx"] = {"medians": ours["median"] / u["rtt_p50_ns"]["median"]}
            if "ratio_to_pingpong" in u:
                # UCX's runs are followed by the standalone ping-pong on the harness's
                # lines: ours is normalised by the one on those lines too.
                out["rtt_vs_ucx"]["normalised"] = (
                    out["rtt_vs_pingpong"]["harness_paired_median"]
                    / u["ratio_to_pingpong"]["median"])
            v = out["rtt_vs_ucx"].get("normalised", out["rtt_vs_ucx"]["medians"])
            how = ("each normalised by its adjacent ping-pong"
                   if "normalised" in out["rtt_vs_ucx"] else "medians")
            verdicts.append({"name": f"direct round trip / UCX tag_lat round trip ({how})",
                             "value": v, "target": TARGET_VS_UCX, "at_most": True,
                             "met": v <= TARGET_VS_UCX})
        else:
            verdicts.append({"name": "direct round trip / UCX tag_lat round trip",
                             "value": None, "target": TARGET_VS_UCX, "at_most": True,
                             "met": None, "why": ucx.get("reason", "UCX not measured")})
    ucx_bw = {r["size"]: r for r in ucx.get("bw", [])} if have_ucx else {}
    out["bulk_vs_memcpy"], out["bulk_vs_ucx"] = [], []
    out["bulk_vs_receiver"] = _vs_receiver(res)
    ceiling = _receiver_ceiling(res)
    for t in res["tput"]:
        name = _tput_name(t)
        vs_copy = [{"size": r["size"], "paired_median": r["ratio_to_memcpy"]["median"],
                    "means": r["gbps"]["mean"] / r["memcpy_paired_gbps"]["mean"]}
                   for r in t["rows"]]
        out["bulk_vs_memcpy"].append({"config": name, "rows": vs_copy})
        big = [x for x in vs_copy if x["size"] >= TARGET_MIN_SIZE]
        if big:
            worst = min(big, key=lambda x: x["paired_median"])
            v = {"name": f"bulk {name} / memcpy, payloads >= 1M (worst size, "
                         "median of paired repetitions)",
                 "value": worst["paired_median"], "size": worst["size"],
                 "target": TARGET_BULK_VS_MEMCPY, "at_most": False,
                 "met": worst["paired_median"] >= TARGET_BULK_VS_MEMCPY}
            if worst["size"] in ceiling:
                v["ceiling"] = ceiling[worst["size"]]
            verdicts.append(v)
        vs_ucx = []
        for r in t["rows"]:
            u = ucx_bw.get(r["size"])
            if u is None:
                continue
            x = {"size": r["size"], "medians": r["gbps"]["median"] / u["gbps"]["median"]}
            if "ratio_to_memcpy" in u:
                x["normalised"] = (r["ratio_to_memcpy"]["median"]
                                   / u["ratio_to_memcpy"]["median"])
            x["value"] = x.get("normalised", x["medians"])
            vs_ucx.append(x)
        out["bulk_vs_ucx"].append({"config": name, "rows": vs_ucx})
        big = [x for x in vs_ucx if x["size"] >= TARGET_MIN_SIZE]
        if big and t["k"] == 1:
            worst = min(big, key=lambda x: x["value"])
            how = "each normalised by its memcpy" if "normalised" in worst else "medians"
            verdicts.append({"name": f"bulk {name} / UCX tag_bw, payloads >= 1M (worst size, "
                                     f"{how})",
                             "value": worst["value"], "size": worst["size"],
                             "target": TARGET_VS_UCX, "at_most": False,
                             "met": worst["value"] >= TARGET_VS_UCX})
    if not have_ucx:
        verdicts.append({"name": "bulk / UCX tag_bw", "value": None, "target": TARGET_VS_UCX,
                         "at_most": False, "met": None,
                         "why": ucx.get("reason", "UCX not measured")})
    out["verdicts"] = verdicts
    return out


def verdict_line(v: dict) -> str:
    """One target line: MET, MISSED, or not judged with the reason."""
    op = "<=" if v["at_most"] else ">="
    if v["met"] is None:
        return f"target {v['name']} {op} {v['target']:.2f}x: NOT JUDGED ({v['why']})"
    at = f" at {_label(v['size'])}" if "size" in v else ""
    if "ceiling" in v:
        below = ", itself below the target" if v["ceiling"] < v["target"] else ""
        at += (f" (one receiving thread's ceiling there, copy+CRC32C x-core / memcpy, "
               f"means: {v['ceiling']:.2f}x{below})")
    return (f"target {v['name']} {op} {v['target']:.2f}x: {v['value']:.2f}x{at}: "
            f"{'MET' if v['met'] else 'MISSED'}")


# ---- the report ---------------------------------------------------------------------------


def _us(ns: float) -> str:
    return f"{ns / 1e3:8.3f}"


def _pm(s: dict | None, width: int = 14) -> str:
    if s is None:
        return f"{'-':>{width}}"
    return f"{s['mean']:.2f} ± {s['std']:.2f}".rjust(width)


def _paper_fig4(d: str, k: int, size: int) -> float | None:
    val = None
    for start, g in PAPER_FIG4.get((d, k), []):
        if size >= start:
            val = g
    return val


def format_report(res: dict, rat: dict) -> str:
    """The result as text: setup, the Table-2 latency table, the throughput tables,
    the ratios and the target verdicts."""
    m, sw, lat = res["machine"], res["sweep"], res["lat"]
    out = [f"offlow bench channels: host process on CPU {HOST_CPU}, device process on CPU "
           f"{DEV_CPU} (pinned: {lat['pinned']}), channels in shared memory",
           machine_line(m, res["features"]) + "; busy before the run: "
           + ", ".join(f"{k} {v:.0%}" for k, v in m.get("quiet", {}).items())]
    out.append(f"CRC32C path (copy+CRC32C of 256 B and more): {res['copy']['crc_path']}")
    if "avx512f" not in res["features"]:
        out.append("  this CPU lacks AVX-512 (no 512-bit CRC32C folding): the bulk rows' bound "
                   "here is the ceiling printed below (memcpy, and copy+CRC32C alone)")
    if "pin_note" in lat:
        out.append(f"note: {lat['pin_note']}")
    busy = [k for k, v in m.get("quiet", {}).items() if v > BUSY]
    if busy:
        out.append(f"warning: {', '.join(busy)} busy before the run; expect noisy numbers "
                   "(ratios hold better than absolute figures)")
    ucx = res["ucx"]
    if ucx["available"]:
        out.append(f"peer: UCX {ucx.get('version') or '?'} ucx_perftest, UCX_TLS={ucx['tls']}, "
                   f"server on CPU {DEV_CPU}, client on CPU {HOST_CPU}, {sw['ucx_reps']} runs "
                   "per test")
    else:
        out.append(f"peer: UCX not available: {ucx['reason']}")
    # Table 2.
    out += ["", f"latency per message, us: {lat['batches']} batches of {lat['per']} "
            "synchronous messages after a warm-up batch, time per message = batch time / "
            f"{lat['per']}, timed on the sender (NFComms' method); direct payloads "
            "written before and checked after each batch; bulk chunks of "
            f"K={lat['sg_per_chunk']} SG entries"]
    head = (f"{'':24}{'size':>7} | {'offlow (this run)':^44} | "
            f"{'NFComms Table 2 (NFP-4000)':^35} | {'paper/ours':>10}")
    sub = (f"{'':24}{'':>7} | {'min':>8} {'max':>8} {'avg':>8} {'std':>8} {'median':>8} | "
           f"{'min':>8} {'max':>8} {'avg':>8} {'std':>8} | {'avg':>10}")
    out += [head, sub, "-" * len(head)]
    order = [("direct", "d2h", DIRECT_SIZE), ("direct", "h2d", DIRECT_SIZE)]
    order += [("bulk", d, s) for s in sw["bulk_lat_sizes"] for d in ("d2h", "h2d")]
    for kind, d, size in order:
        r = lat_row(res, kind, d, size)
        if r is None:
            continue
        s = r["per_msg_ns"]
        arrow = "device->host" if d == "d2h" else "host->device"
        name = f"{arrow} ({'direct' if kind == 'direct' else 'bulk'})"
        paper = PAPER_TABLE2.get((kind, d)) if size <= 64 else None
        pc = (f"{paper['min']:8.2f} {paper['max']:8.2f} {paper['avg']:8.2f} {paper['std']:8.2f}"
              if paper else f"{'-':>8} {'-':>8} {'-':>8} {'-':>8}")
        sp = f"{paper['avg'] * 1e3 / s['mean']:9.0f}x" if paper else f"{'-':>10}"
        out.append(f"{name:24}{_label(size):>7} | {_us(s['min'])} {_us(s['max'])} "
                   f"{_us(s['mean'])} {_us(s['std'])} {_us(s['median'])} | {pc} | {sp}")
    rtt = lat_row(res, "direct_rtt", "rtt", DIRECT_SIZE)
    if rtt:
        s = rtt["per_msg_ns"]
        out.append(f"{'round trip (direct)':24}{_label(DIRECT_SIZE):>7} | {_us(s['min'])} "
                   f"{_us(s['max'])} {_us(s['mean'])} {_us(s['std'])} {_us(s['median'])} | "
                   f"{'(send + reply, timed on the host)':^35} |")
    out.append("  paper rows: its bulk ('indirect') rows are beside our 64 B bulk rows; the "
               "paper used 56 B messages for all four")
    pp, pipe = res["pingpong"]["rtt_ns"], res["pipe"]["rtt_ns"]
    out.append("ceilings, round trip per exchange (same batches), median / mean ± std: "
               f"cache-line ping-pong {pp['median']:.0f} / {pp['mean']:.0f} ± {pp['std']:.0f} "
               f"ns; pipe {pipe['median'] / 1e3:.2f} / {pipe['mean'] / 1e3:.2f} ± "
               f"{pipe['std'] / 1e3:.2f} us")
    if rtt:
        q, h = rtt["pingpong_paired_ns"], rtt["pingpong_harness_paired_ns"]
        out.append(f"  ping-pong run before each round-trip batch, on the channel's two "
                   f"message lines: {q['median']:.0f} / {q['mean']:.0f} ± {q['std']:.0f} ns; "
                   f"on the harness's lines: {h['median']:.0f} / {h['mean']:.0f} ± "
                   f"{h['std']:.0f} ns; our round trip: {rtt['per_msg_ns']['median']:.0f} / "
                   f"{rtt['per_msg_ns']['mean']:.0f} ns")
    if ucx["available"]:
        u, u50 = ucx["lat"]["rtt_ns"], ucx["lat"]["rtt_p50_ns"]
        out.append(f"peer: UCX tag_lat 56 B round trip, median message {u50['median']:.0f} ns, "
                   f"average {u['median']:.0f} ns (medians over {u['n']} runs of "
                   f"{ucx['lat']['iters']} iterations; ucx_perftest prints half a round trip)")
        if "ratio_to_pingpong" in ucx["lat"]:
            out.append(f"  UCX median message / a cache-line ping-pong run right after it: "
                       f"{ucx['lat']['ratio_to_pingpong']['median']:.2f}x (median over runs)")
    # Throughput.
    tp = res["tput"]
    out += ["", f"bulk throughput, Gb/s (10^9 bit/s), mean ± std over {tp[0]['reps']} "
            f"repetitions in {tp[0]['processes']} processes of each configuration (each "
            "after a warm-up: a process may run slow for all of its life here); xK: K "
            "transfers of the size at once on K channels"]
    head = f"{'size':>6} | " + " | ".join(f"{_tput_name(t):>30}" for t in tp)
    head += f" | {'NFComms h2d x1/x8':>18} | {'d2h x1/x8':>10}"
    out += [head, "-" * len(head)]
    for i, size in enumerate(sw["sizes"]):
        cells = [f"{_pm(t['rows'][i]['gbps'], 30)}" for t in tp]
        pap = []
        for d in ("h2d", "d2h"):
            a, b = _paper_fig4(d, 1, size), _paper_fig4(d, 8, size)
            pap.append(f"{a if a is not None else '-'}/{b if b is not None else '-'}")
        out.append(f"{_label(size):>6} | " + " | ".join(cells)
                   + f" | {pap[0]:>18} | {pap[1]:>10}")
    out.append(f"  NFComms figures as its text states them (Figure 4 gives no numbers below "
               f"2 MB); its peak: {PAPER_PEAK_GBPS:.0f} Gb/s with 8 transfers")
    copy = {r["size"]: r for r in res["copy"]["rows"]}
    ubw = {r["size"]: r for r in ucx.get("bw", [])} if ucx["available"] else {}
    out += ["", "ceilings and peer at each size, Gb/s, mean ± std (single thread; memcpy "
            "repeats small copies to fill about 1 MiB per sample)"]
    head = (f"{'size':>6} | {'memcpy':>16} | {'process_vm_readv':>16} | {'CRC32C':>16} | "
            f"{'copy+CRC32C':>16} | {'memcpy, x-core':>16} | {'copy+CRC, x-core':>16} | "
            f"{'UCX tag_bw':>16}")
    out += [head, "-" * len(head)]
    for size in sw["sizes"]:
        c = copy.get(size, {})
        out.append(f"{_label(size):>6} | {_pm(c.get('memcpy_gbps'), 16)} | "
                   f"{_pm(c.get('pvr_gbps'), 16)} | {_pm(c.get('crc32c_gbps'), 16)} | "
                   f"{_pm(c.get('crc32c_copy_gbps'), 16)} | "
                   f"{_pm(c.get('xcore_memcpy_gbps'), 16)} | "
                   f"{_pm(c.get('xcore_crc32c_copy_gbps'), 16)} | "
                   f"{_pm(ubw[size]['gbps'] if size in ubw else None, 16)}")
    out.append("  x-core: on the device's CPU, from bytes the host's CPU has just written")
    for key, what in (("crc32c_copy_gbps", "copy+CRC32C / memcpy (means): "),
                      ("xcore_crc32c_copy_gbps", "copy+CRC32C x-core / memcpy (means): ")):
        bound = [f"{_label(size)} {c[key]['mean'] / c['memcpy_gbps']['mean']:.2f}x"
                 for size in sw["sizes"] if key in (c := copy.get(size, {}))]
        if bound:
            out.append(f"  {what}" + ", ".join(bound))
    out.append("  (copy+CRC32C is a bulk receiver's work per byte, landing and checking it "
               "in one pass; x-core: the most a transfer landed by one thread can reach)")
    # Ratios.
    out += ["", "ratios: bulk / memcpy (median over repetitions of the transfer's rate over a "
            "memcpy of the same bytes timed just before it, in the host process)"
            + (", bulk / UCX tag_bw (each normalised by a memcpy timed next to it, on "
               "the same CPU)" if ubw else "")]
    head = f"{'size':>6} | " + " | ".join(f"{_tput_name(t):>30}" for t in tp)
    out += [head, "-" * len(head)]
    for size in sw["sizes"]:
        cells = []
        for j in range(len(tp)):
            mc = rat["bulk_vs_memcpy"][j]["rows"]
            uc = rat["bulk_vs_ucx"][j]["rows"]
            a = next((x["paired_median"] for x in mc if x["size"] == size), None)
            b = next((x["value"] for x in uc if x["size"] == size), None)
            txt = (f"{a:.2f}x memcpy" if a is not None else "-") + (
                f", {b:.2f}x UCX" if b is not None else "")
            cells.append(f"{txt:>30}")
        out.append(f"{_label(size):>6} | " + " | ".join(cells))
    recv = [f"{x['config']}: " + ", ".join(f"{_label(r['size'])} {r['means']:.2f}x"
                                           for r in x["rows"])
            for x in rat["bulk_vs_receiver"] if x["rows"]]
    if recv:
        out.append("bulk / copy+CRC32C x-core (means), one transfer: " + "; ".join(recv))
    if "rtt_vs_pingpong" in rat:
        r = rat["rtt_vs_pingpong"]
        out.append(f"direct round trip / cache-line ping-pong on the channel's lines: "
                   f"{r['paired_median']:.2f}x (median of per-batch ratios to the ping-pong "
                   f"batch run just before each; ratio of means {r['means']:.2f}x); on the "
                   f"harness's lines: {r['harness_paired_median']:.2f}x paired, "
                   f"{r['standalone_medians']:.2f}x to the standalone ping-pong (medians)")
        line = f"direct round trip / pipe round trip: {rat['rtt_vs_pipe']['medians']:.3f}x"
        if "rtt_vs_ucx" in rat:
            r = rat["rtt_vs_ucx"]
            line += f"; / UCX tag_lat round trip: {r['medians']:.2f}x (medians)"
            if "normalised" in r:
                line += (f", {r['normalised']:.2f}x with each normalised by the ping-pong run "
                         "next to it")
        out.append(line)
    out.append("")
    out += [verdict_line(v) for v in rat["verdicts"]]
    return "\n".join(out)


def plot(res: dict, path: Path) -> None:
    """Throughput against payload size, host->device and device->host (the shape of
    NFComms' Figure 4): mean with a ±1 std band per configuration, memcpy and UCX
    tag_bw lines, and the paper's stated levels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    copy = {r["size"]: r for r in res["copy"]["rows"]}
    ucx = res["ucx"]
    for ax, d, title in ((axes[0], "h2d", "(a) host to device"),
                         (axes[1], "d2h", "(b) device to host")):
        for t in res["tput"]:
            if t["dir"] != d:
                continue
            x = [r["size"] / MB for r in t["rows"]]
            mean = [r["gbps"]["mean"] for r in t["rows"]]
            sd = [r["gbps"]["std"] for r in t["rows"]]
            ax.plot(x, mean, marker="o", label=f"offlow {_tput_name(t)}")
            ax.fill_between(x, [a - b for a, b in zip(mean, sd, strict=True)],
                            [a + b for a, b in zip(mean, sd, strict=True)], alpha=0.2)
        sizes = sorted(copy)
        ax.plot([s / MB for s in sizes], [copy[s]["memcpy_gbps"]["mean"] for s in sizes],
                color="black", linestyle="--", label="memcpy (ceiling)")
        ax.plot([s / MB for s in sizes], [copy[s]["pvr_gbps"]["mean"] for s in sizes],
                color="gray", linestyle=":", label="process_vm_readv")
        if ucx["available"]:
            ub = ucx["bw"]
            ax.plot([r["size"] / MB for r in ub], [r["gbps"]["mean"] for r in ub],
                    color="tab:purple", linestyle="-.", marker="s", label="UCX tag_bw (sm)")
        for k, style in ((1, "dashdot"), (8, "dotted")):
            for j, (start, g) in enumerate(PAPER_FIG4.get((d, k), [])):
                ax.hlines(g, start / MB, max(sizes) / MB, colors="tab:red", linestyles=style,
                          label=f"NFComms x{k} (stated in its text)" if j == 0 else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("payload size, MB (log)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("throughput, Gb/s (mean ± 1 std, log)")
    m = res["machine"]
    fig.suptitle(f"offlow bulk channels vs NFComms Figure 4, {m['cpu']} ({m['cpus']} CPUs)",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool = False, out_json: str | os.PathLike[str] | None = None,
        png: str | os.PathLike[str] | None = None, *, sweep: Sweep | None = None,
        ucx: bool = True, install: bool = True) -> dict:
    """Run the channel benchmark, print the report, optionally write JSON and a PNG;
    return the result (the JSON's content).

    quick: fewer batches, sizes and repetitions (well under a minute). sweep: override
    the settings (tests use tiny ones). ucx: False skips the peer; install: False
    never installs ucx-utils."""
    sw = sweep or (QUICK if quick else FULL)
    res = measure(sw, ucx=ucx, install=install)
    res["ratios"] = ratios(res)
    print(format_report(res, res["ratios"]))
    output.save(res, out_json, png, plot)
    return res
