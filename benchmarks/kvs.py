"""`offlow bench kvs`: the key-value store's designs (Floem, seed 001) side by side under
one load generator, beside a real memcached and a ceiling measured in the same run.

Every design serves memcached's binary protocol on 127.0.0.1 and is driven, in turn, by
the same kvs_loadgen settings (runtime/lib/kvs/tools/kvs_loadgen.c): closed loop, Floem's
workload by default (100,000 keys of 32 bytes, Zipf 0.9, 90% GET), after the loadgen's
warm-up (one SET of every key, not timed), for each workload (WORKLOADS): 64-byte
values over UDP (Floem's), 1 KB values over UDP, and 64 KB values over TCP (a 64 KB
value does not fit a datagram; 1,000 keys). The designs are data (DESIGNS below): a
name, a kind (memcached, kvs_server, the echo ceiling or an offlow program), the
program file and its `--set` settings, and the transports it serves (the cache designs
are not served over TCP: TCP goes to the store, around the cache). A program file that
does not exist (yet) makes its design "not available: FILE missing" in the table and
the JSON, not a failure.

The ceiling (design `udp_echo`, runtime/tools/udp_echo.c): a minimal server that sends
every datagram back as it came, in recvmmsg / sendmmsg batches, nothing parsed, polling
as offlow's cores do, on the server CPUs the loadgen leaves free (CPU 0 of 2), under
the same loadgen (`--echo`: an answer is the request's own bytes): the most any
server answers through the kernel's UDP sockets here. Each design's ops/s is divided
by memcached's and by the ceiling's of the same round.

Repetitions alternate the designs (A B C ... A B C ...), a fresh server process each
time, so that the machine's drift spreads over all of them; each design reports the
median and min..max of its repetitions, and its ratio to memcached is taken per
repetition (the memcached run of the same round) before the median.

CPUs (documented in the report and the JSON): kvs_loadgen runs `client_threads`
threads pinned to `client_cpu` (default: the last CPU, the one the offlow designs
leave most free: they put host core 0 on CPU 0) for every design; memcached (`-t
CORES`) and kvs_server (`-t CORES`) are pinned to CPUs 0..CORES-1 (memcached's workers
block in epoll when idle; kvs_server's poll, then block after 50 ms idle); the offlow
designs run where their program places their segments (host core k on CPU k, NIC core
k on CPU ncpu/2 + k, see offlow.plan; segments on the same device core share one
thread), every thread busy-polling. The loadgen itself busy-polls (spin, then yield),
so its thread counts against the same CPUs: a design whose polling threads plus the
loadgen's outnumber the CPUs, or share one, is oversubscribed, and the report prints a
warning line for it.

Lines of code: for each offlow design, the lines of its program that differ from the
CPU-only design (`difflib` over the two files' code lines: blank lines, comments and
docstrings left out; a changed line counts once) plus its `--set` settings that
differ, one line each; and the same against the design Floem's claim is measured
from (15 lines to split, 40 to add a NIC cache, 1 to switch its policy).
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common.machine import machine_line
from benchmarks.common.spread import spread
from offlow.errors import OfflowError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

ROOT = Path(__file__).resolve().parents[1]
TARGET_VS_MEMCACHED = 1.0  # the best offlow design's ops/s over memcached's, at least
BUSY = 0.2  # busy fraction of a CPU before the run above which the report warns


@dataclass(frozen=True)
class Design:
    """One way of serving the store."""

    name: str
    kind: str                        # "memcached", "kvs_server", "echo" or "offlow"
    what: str
    program: str | None = None       # offlow: the program file, relative to the repository
    settings: tuple[str, ...] = ()   # offlow: its --set settings
    step_from: str | None = None     # the design Floem's line count is measured from
    floem_lines: int | None = None   # Floem's lines for that step
    protos: tuple[str, ...] = ("udp", "tcp")   # the transports it serves


DESIGNS: tuple[Design, ...] = (
    Design("memcached", "memcached", "Debian memcached, -t CORES, UDP (-U) and TCP"),
    Design("udp_echo", "echo", "UDP echo, recvmmsg/sendmmsg, nothing parsed (the ceiling)",
           protos=("udp",)),
    Design("cpu", "offlow", "everything on the host", "examples/kvs.py"),
    Design("split", "offlow", "NIC parses, hashes, steers by key to host store cores",
           "examples/kvs.py", ("parse.device=nic",), "cpu", 15),
    Design("cache_wt", "offlow", "NIC cache, write-through", "examples/kvs_cache.py",
           ("cache.policy=write_through",), "cpu", 40, ("udp",)),
    Design("cache_wb", "offlow", "NIC cache, write-back", "examples/kvs_cache.py",
           ("cache.policy=write_back",), "cache_wt", 1, ("udp",)),
    Design("kvs_server", "kvs_server", "hand-written C server (reference), -t CORES"),
)
BASELINE = "cpu"      # the CPU-only design the line counts start from
PEER = "memcached"    # what every design's ops/s is divided by
CEILING = "udp_echo"  # ... and by this
TARGET_VS_CEILING = 0.8  # the best offlow design's ops/s over the ceiling's, at 64 B


@dataclass(frozen=True)
class Workload:
    """One value size and transport every design serves in turn."""

    name: str
    proto: str                   # "udp" or "tcp"
    value_size: int
    keys: int | None = None      # None: the settings' keys


WORKLOADS: tuple[Workload, ...] = (
    Workload("64 B", "udp", 64),
    Workload("1 KB", "udp", 1024),
    Workload("64 KB", "tcp", 64 << 10, 1000),   # 64 MB of values; a datagram cannot hold one
)


@dataclass(frozen=True)
class Settings:
    """One run's load and budget (the same for every design)."""

    duration: float       # measured seconds per run (after the warm-up)
    repeat: int           # rounds over the designs
    cores: int            # the server core budget (memcached / kvs_server -t)
    client_cpu: int       # the CPU kvs_loadgen's threads are pinned to; -1: the last
    client_threads: int
    conns: int            # UDP sockets per loadgen thread
    depth: int            # outstanding requests per socket (closed loop)
    keys: int
    key_size: int
    value_size: int
    zipf: float
    get_ratio: float
    timeout_ms: float     # a request unanswered this long is a timeout error
    memory_mb: int        # memcached -m / kvs_server -m
    workloads: tuple[str, ...] = ("64 B", "1 KB", "64 KB")   # names of WORKLOADS to run


# Closed loop with 2 sockets x 32 outstanding requests: tried 16..128 outstanding on
# this 2-CPU machine; 64 saturates every design here, and beyond it memcached starts
# dropping datagrams (warm-up retries). The request timeout is 1 s rather than the
# loadgen's 200 ms: on a loaded shared machine answers do arrive 200 ms late at times
# (the loadgen counts them as late answers), and a lost datagram still shows as an
# error.
FULL = Settings(duration=3.0, repeat=3, cores=2, client_cpu=-1, client_threads=1, conns=2,
                depth=32, keys=100_000, key_size=32, value_size=64, zipf=0.9, get_ratio=0.9,
                timeout_ms=1000, memory_mb=1024)
# Quick: one short round on a tenth of the keys (the warm-up SETs every key).
QUICK = replace(FULL, duration=1.0, repeat=1, keys=10_000)


def workloads_of(st: Settings) -> list[Workload]:
    """The workloads `st` names, in WORKLOADS' order; their keys capped at st.keys."""
    known = {w.name: w for w in WORKLOADS}
    bad = [n for n in st.workloads if n not in known]
    if bad:
        raise OfflowError(f"no kvs workload {', '.join(map(repr, bad))}; workloads: "
                          + ", ".join(w.name for w in WORKLOADS))
    return [replace(w, keys=min(w.keys or st.keys, st.keys)) for w in WORKLOADS
            if w.name in st.workloads]


# ---- lines of code ---------------------------------------------------------------------


def code_lines(path: Path) -> list[str]:
    """A program's code lines, stripped: no blank lines, comments or docstrings."""
    text = path.read_text()
    skip: set[int] = set()
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or not body:
            continue
        first = body[0]
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            skip.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if i in skip or not s or s.startswith("#"):
            continue
        out.append(s)
    return out


def _settings_diff(a: Sequence[str], b: Sequence[str]) -> int:
    """Settings that differ between two designs: a changed value, an added or a removed
    setting, one line each."""
    da = dict(s.partition("=")[::2] for s in a)
    db = dict(s.partition("=")[::2] for s in b)
    return sum(1 for k in da.keys() | db.keys() if da.get(k) != db.get(k))


def lines_changed(a: Design, b: Design) -> dict[str, int]:
    """Lines to go from design `a` to design `b` (both offlow programs whose files
    exist): code lines that differ (a replaced block counts its longer side) and
    settings that differ."""
    assert a.program and b.program
    la, lb = code_lines(ROOT / a.program), code_lines(ROOT / b.program)
    code = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, la, lb,
                                                      autojunk=False).get_opcodes():
        if op != "equal":
            code += max(i2 - i1, j2 - j1)
    settings = _settings_diff(a.settings, b.settings)
    return {"code": code, "settings": settings, "total": code + settings}


def _by_name(name: str) -> Design:
    for d in DESIGNS:
        if d.name == name:
            return d
    raise OfflowError(f"no kvs design `{name}`; designs: {', '.join(x.name for x in DESIGNS)}")


def missing(d: Design) -> str | None:
    """Why an offlow design cannot run here (its program file is missing), or None."""
    if d.program and not (ROOT / d.program).exists():
        return f"{d.program} missing"
    return None


def lines_of(d: Design) -> dict[str, Any] | None:
    """The design's line counts: against the CPU-only design and against Floem's step."""
    if d.kind != "offlow" or missing(d):
        return None
    base = _by_name(BASELINE)
    out: dict[str, Any] = {"vs": BASELINE, **lines_changed(base, d)}
    if d.step_from:
        step = _by_name(d.step_from)
        if not missing(step):
            out["step"] = {"from": step.name, "floem_lines": d.floem_lines,
                           **lines_changed(step, d)}
    return out


# ---- CPUs and threads -------------------------------------------------------------------


def _ncpu() -> int:
    return os.cpu_count() or 1


def client_cpu(st: Settings) -> int:
    """The CPU kvs_loadgen is pinned to: `st.client_cpu`, or the last CPU when it is
    negative (the offlow designs put host core 0 on CPU 0)."""
    return st.client_cpu % _ncpu() if st.client_cpu >= 0 else _ncpu() - 1


def server_cpus(cores: int) -> list[int]:
    """The CPUs memcached and kvs_server are pinned to: 0..cores-1 (wrapping)."""
    return sorted({c % _ncpu() for c in range(cores)})


def echo_cpus(st: Settings) -> list[int]:
    """The ceiling's CPUs: the server CPUs the loadgen leaves free (one thread each), or
    the first when it leaves none."""
    free = [c for c in server_cpus(st.cores) if c != client_cpu(st)]
    return free or server_cpus(st.cores)[:1]


def placement(d: Design, st: Settings, b: Any = None) -> dict[str, Any]:
    """Where the design's threads run and how many poll; the loadgen's thread(s) too;
    and the oversubscription warning, if any. `b`: the offlow design's Build."""

    ncpu = _ncpu()
    client = [client_cpu(st)] * st.client_threads
    out: dict[str, Any] = {"cpus": ncpu, "client": {"threads": st.client_threads,
                                                     "cpus": sorted(set(client)),
                                                     "polls": True}}
    if d.kind == "offlow":
        ths = [{"device": t.device, "core": t.core, "cpu": b.plan.cpu(t.device, t.core),
                "segments": [seg for seg, _ in t.loops]} for t in b.plan.threads]
        out["server"] = {"threads": len(ths), "polls": True, "loops": ths,
                         "cpus": sorted({t["cpu"] for t in ths}),
                         "processes": sorted({s.device for s in b.graph.segments})}
        pollers = [t["cpu"] for t in ths] + client
    elif d.kind == "echo":
        cpus = echo_cpus(st)
        out["server"] = {"threads": len(cpus), "polls": True, "cpus": cpus}
        pollers = client + cpus
    else:
        out["server"] = {"threads": st.cores, "polls": d.kind == "kvs_server",
                         "cpus": server_cpus(st.cores)}
        pollers = client + (server_cpus(st.cores) if d.kind == "kvs_server" else [])
    threads = out["server"]["threads"] + st.client_threads
    shared = sorted({c for c in pollers if pollers.count(c) > 1})
    warn = None
    if threads > ncpu or shared:
        what = ("memcached's workers block when idle" if d.kind == "memcached"
                else "busy-polling server threads")
        warn = (f"oversubscribed: {out['server']['threads']} server threads ({what}) + "
                f"{st.client_threads} polling loadgen thread(s) on {ncpu} CPUs"
                + (f"; CPU {','.join(map(str, shared))} shared by polling threads"
                   if shared else ""))
    out["busy_threads"] = threads
    out["oversubscribed"] = warn
    return out


# ---- running one design --------------------------------------------------------------------


def _loadgen(port: int, st: Settings, w: Workload, *, echo: bool = False) -> dict:
    from offlow.kvs.tools import run_loadgen

    return run_loadgen(port, proto=w.proto, duration=st.duration, threads=st.client_threads,
                       conns=st.conns, depth=st.depth, keys=w.keys or st.keys,
                       key_size=st.key_size, value_size=w.value_size, zipf=st.zipf,
                       get_ratio=st.get_ratio, timeout_ms=st.timeout_ms,
                       cpus=[client_cpu(st)] * st.client_threads, progress="off",
                       timeout=st.duration + 180, echo=echo)


def run_once(d: Design, st: Settings, w: Workload, b: Any = None) -> dict:
    """One run of one design under workload `w` (a fresh server process): the loadgen's
    report, trimmed, and what the server said about itself."""
    from offlow.kvs.tools import kvs_server, memcached, udp_echo

    t0 = time.monotonic()
    server: dict[str, Any] = {}
    if d.kind == "memcached":
        with memcached(threads=st.cores, cpus=server_cpus(st.cores),
                       memory_mb=st.memory_mb) as m:
            rep = _loadgen(m.port, st, w)
            server["alive"] = m.alive()
    elif d.kind == "echo":
        cpus = echo_cpus(st)
        with udp_echo(threads=len(cpus), cpus=cpus) as e:
            rep = _loadgen(e.port, st, w, echo=True)
            server["alive"] = e.alive()
    elif d.kind == "kvs_server":
        with kvs_server(threads=st.cores, cpus=server_cpus(st.cores),
                        capacity=max(1_000_000, 2 * st.keys), memory_mb=st.memory_mb) as k:
            rep = _loadgen(k.port, st, w)
            server["alive"] = k.alive()
        server["stats"] = k.stats()
    else:
        from offlow.report import summarize
        from offlow.runner import Run, RunOptions

        tcp = w.proto == "tcp"
        r = Run(b, RunOptions(udp_port=0, tcp_port=0 if tcp else None,
                              timeout=st.duration + 240))
        r.start()
        try:
            port = r.tcp_port if tcp else r.udp_port
            assert port is not None
            rep = _loadgen(port, st, w)
        finally:
            r.stop()
            res = r.wait()
        server["ok"], server["errors"] = res.ok, res.errors[:5]
        try:
            s = summarize(b.plan, res.stats)
            server["segments"] = [{k: x.get(k) for k in ("segment", "device", "packets",
                                                          "mpps", "drops") if k in x}
                                  for x in s.get("segments", [])]
        except (KeyError, TypeError, ValueError) as e:
            server["segments_error"] = str(e)
    keep = ("ops", "seconds", "ops_per_s", "gets", "sets", "hits", "misses", "hit_rate",
            "latency_ns", "errors", "error_counts", "late_answers", "warmup",
            "connection_failed")
    out = {k: rep[k] for k in keep if k in rep}
    out["server"] = server
    out["wall_s"] = round(time.monotonic() - t0, 2)
    return out


def _failed(run: dict) -> str | None:
    """Why a run does not count (the server failed, nothing answered), or None. Loadgen
    errors (timeouts, bad answers) do not drop a run: they are counted and shown."""
    srv = run.get("server", {})
    if srv.get("errors"):
        return f"server: {srv['errors'][0]}"
    if srv.get("alive") is False:
        return "server exited during the run"
    if run.get("connection_failed"):
        return "loadgen lost its connection"
    if not run.get("ops_per_s"):
        return "no answers"
    return None


def _progress(msg: str) -> None:
    print(f"kvs bench: {msg}", file=sys.stderr, flush=True)


# ---- the whole benchmark -------------------------------------------------------------------


def _prepare(d: Design, st: Settings) -> dict[str, Any]:
    """The design's entry before any run: available or why not, its build (offlow),
    lines of code, placement."""
    entry: dict[str, Any] = {"name": d.name, "kind": d.kind, "what": d.what,
                             "program": d.program, "settings": list(d.settings),
                             "available": True, "why": None, "runs": []}
    if d.kind == "memcached":
        from offlow.kvs.tools import setup_memcached

        path, why = setup_memcached()
        if path is None:
            entry.update(available=False, why=f"memcached unavailable: {why}")
        else:
            entry["binary"] = path
            entry["version"] = _memcached_version(path)
    why = missing(d)
    if why:
        entry.update(available=False, why=why)
        return entry
    entry["lines"] = lines_of(d)
    build = None
    if d.kind == "offlow" and entry["available"]:
        from offlow.build import build as build_program
        from offlow.dsl.loader import load_program

        assert d.program
        try:
            build = build_program(load_program(ROOT / d.program, list(d.settings)))
        except Exception as e:  # noqa: BLE001 (a program being written may break anyhow)
            entry.update(available=False, why=f"does not build: {type(e).__name__}: {e}")
            return entry
    if entry["available"]:
        entry["placement"] = placement(d, st, build)
    entry["_build"] = build
    return entry


def _memcached_version(path: str) -> str | None:
    import subprocess

    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def measure(st: Settings, names: Sequence[str] | None = None,
            progress: bool = True) -> dict:
    """Run every design under every workload `st.repeat` times, alternating; return every
    number: res["workloads"], one entry per workload with its designs' runs and ratios."""
    from benchmarks.common.machine import machine, quiet_check

    t_start = time.monotonic()
    designs = [_by_name(n) for n in names] if names else list(DESIGNS)
    loads = workloads_of(st)
    info: dict[str, Any] = machine()
    info["busy_before"] = quiet_check(0.5 if st.repeat == 1 else 1.0)
    info["loadavg_before"] = list(os.getloadavg())
    prepared = [_prepare(d, st) for d in designs]
    tables = [{"name": w.name, "proto": w.proto, "value_size": w.value_size, "keys": w.keys,
               "designs": [_for_workload(e, d, w) for d, e in zip(designs, prepared,
                                                                  strict=True)]}
              for w in loads]
    for rnd in range(st.repeat):
        for w, table in zip(loads, tables, strict=True):
            for d, e, base in zip(designs, table["designs"], prepared, strict=True):
                if not e["available"]:
                    continue
                try:
                    run = run_once(d, st, w, base["_build"])
                except (OfflowError, OSError) as err:
                    run = {"error": str(err)}
                run["round"] = rnd
                why = run.get("error") or _failed(run)
                run["failed"] = why
                e["runs"].append(run)
                if progress:
                    _report_run(rnd, st.repeat, w, d, run, why)
    info["loadavg_after"] = list(os.getloadavg())
    for table in tables:
        for e in table["designs"]:
            e["summary"] = _summary(e["runs"])
        table["ratios"] = ratios(table)
    res: dict[str, Any] = {"benchmark": "kvs", "machine": info, "settings": asdict(st),
                           "workloads": tables}
    res["verdicts"] = verdicts(res)
    res["seconds"] = round(time.monotonic() - t_start, 1)
    return res


def _for_workload(e: dict[str, Any], d: Design, w: Workload) -> dict[str, Any]:
    """A design's entry for one workload: its prepared entry, not available over a
    transport it does not serve."""
    out = {k: v for k, v in e.items() if k != "_build"}
    out["runs"] = []
    if out["available"] and w.proto not in d.protos:
        why = ("a UDP server" if d.kind == "echo" else
               "a cache in front of the store is not served over TCP (TCP requests go to "
               "the store)")
        out.update(available=False, why=f"not over {w.proto.upper()}: {why}")
    return out


def _summary(runs: list[dict]) -> dict[str, Any]:
    ok = [r for r in runs if not r["failed"]]
    return {
        "ok_runs": len(ok), "runs": len(runs),
        "ops_per_s": spread([r["ops_per_s"] for r in ok]),
        "p50_us": spread([r["latency_ns"]["p50"] / 1e3 for r in ok]),
        "p99_us": spread([r["latency_ns"]["p99"] / 1e3 for r in ok]),
        "hit_rate": spread([r["hit_rate"] for r in ok]),
        "errors": sum(int(r.get("errors", 0)) for r in runs),
    }


def _report_run(rnd: int, repeat: int, w: Workload, d: Design, run: dict,
                why: str | None) -> None:
    where = f"round {rnd + 1}/{repeat} {w.name:>5} {d.name:>10}"
    if "ops_per_s" not in run:
        _progress(f"{where}: FAILED: {why}")
        return
    lat = run["latency_ns"]
    _progress(f"{where}: {run['ops_per_s']:>10,.0f} ops/s  p50 {lat['p50'] / 1e3:7.1f} us  "
              f"p99 {lat['p99'] / 1e3:7.1f} us  hit rate {run['hit_rate']:.3f}  "
              f"errors {run['errors']}" + (f"  FAILED: {why}" if why else ""))


def _per_round(e: dict, against: dict[int, dict]) -> list[float]:
    return [r["ops_per_s"] / against[r["round"]]["ops_per_s"]
            for r in e["runs"] if not r["failed"] and r["round"] in against]


def _ok_runs(table: dict, name: str) -> dict[int, dict]:
    e = next((x for x in table["designs"] if x["name"] == name), None)
    if not e or not e["available"]:
        return {}
    return {r["round"]: r for r in e["runs"] if not r["failed"]}


def ratios(table: dict) -> dict:
    """One workload: each design's ops/s over memcached's and over the ceiling's, per
    round (the same round), then median and min..max."""
    peer, ceil = _ok_runs(table, PEER), _ok_runs(table, CEILING)
    out: dict[str, Any] = {"peer": PEER, "ceiling": CEILING, "per_design": {},
                           "vs_ceiling": {}}
    for e in table["designs"]:
        if not e["available"]:
            continue
        if e["name"] != PEER:
            v = _per_round(e, peer)
            out["per_design"][e["name"]] = {"values": v, **(spread(v) or {})}
        if e["name"] != CEILING and ceil:
            v = _per_round(e, ceil)
            out["vs_ceiling"][e["name"]] = {"values": v, **(spread(v) or {})}
    return out


def _best(table: dict, key: str, target: float, against: str) -> dict[str, Any]:
    """The verdict on the best offlow design of `table` in ratios[key] against `target`."""
    kinds = {e["name"]: e["kind"] for e in table["designs"]}
    rats = table["ratios"][key]
    offl = [(n, v) for n, v in rats.items() if kinds[n] == "offlow" and v.get("median")]
    base = {"target": target, "against": against, "workload": table["name"]}
    if not _ok_runs(table, against):
        e = next((x for x in table["designs"] if x["name"] == against), None)
        why = e["why"] if e and not e["available"] else f"{against} not measured"
        return {**base, "design": None, "met": None, "why": why}
    if not offl:
        return {**base, "design": None, "met": None, "why": "no offlow design measured"}
    name, v = max(offl, key=lambda x: x[1]["median"])
    return {**base, "design": name, "value": v["median"], "min": v["min"], "max": v["max"],
            "met": v["median"] >= target}


def verdicts(res: dict) -> list[dict]:
    """The best offlow design at 64 B (Floem's workload, or the first measured) against
    memcached (target 1.0x) and against the ceiling (target 0.8x)."""
    tables = res["workloads"]
    if not tables:
        return []
    t = next((x for x in tables if x["name"] == "64 B"), tables[0])
    return [_best(t, "per_design", TARGET_VS_MEMCACHED, PEER),
            _best(t, "vs_ceiling", TARGET_VS_CEILING, CEILING)]


# ---- the report ---------------------------------------------------------------------------


def verdict_line(v: dict) -> str:
    """One verdict: the best offlow design at a workload against memcached or the
    ceiling, and its target."""
    against = "memcached" if v["against"] == PEER else f"{v['against']} (the ceiling)"
    if v["met"] is None:
        return (f"verdict: best offlow design at {v['workload']} vs {against}: not judged "
                f"({v['why']}) vs target {v['target']:.2f}x")
    # Two decimals, unless they would hide which side of the target the median is on.
    d = 2 if (f"{v['value']:.2f}" != f"{v['target']:.2f}"
              or v["value"] == v["target"]) else 4
    return (f"verdict: best offlow design at {v['workload']} ({v['design']}) vs {against}: "
            f"{v['value']:.{d}f}x ({v['min']:.2f}..{v['max']:.2f}) vs target "
            f"{v['target']:.2f}x: {'meets' if v['met'] else 'misses'}")


def _lines_cell(e: dict) -> str:
    ln = e.get("lines")
    if not ln:
        return "-"
    txt = f"{ln['total']} ({ln['code']}+{ln['settings']}s)"
    return txt


def _step_cell(e: dict) -> str:
    ln = e.get("lines") or {}
    s = ln.get("step")
    if not s:
        return "-"
    return f"{s['total']} from {s['from']} (Floem {s['floem_lines']})"


def _range(s: dict | None, fmt: str, scale: float = 1.0) -> str:
    if not s:
        return "-"
    return (f"{format(s['median'] * scale, fmt)} ({format(s['min'] * scale, fmt)}.."
            f"{format(s['max'] * scale, fmt)})")


def _threads_cell(e: dict) -> str:
    p = e.get("placement")
    if not p:
        return "-"
    srv = p["server"]
    if e["kind"] == "offlow":
        per = ", ".join(f"{t['device'][0]}{t['core']}@{t['cpu']} {'+'.join(t['segments'])}"
                        for t in srv["loops"])
        return f"{srv['threads']} polling ({per})"
    how = "polling" if srv["polls"] else "blocking"
    return f"{srv['threads']} {how} @{','.join(map(str, srv['cpus']))}"


def _ratio_cell(r: dict | None, peer: bool) -> str:
    if peer:
        return "1.00x (peer)"
    if not r or r.get("median") is None:
        return "-"
    return f"{r['median']:.2f}x ({r['min']:.2f}..{r['max']:.2f})"


def _workload_table(t: dict) -> list[str]:
    """One workload's rows: a design each."""
    rat = t["ratios"]
    head = (f"{'design':<10} {'ops/s median (min..max)':>28} {'p50 us':>18} {'p99 us':>20} "
            f"{'hit':>6} {'err':>4} {'vs memcached':>20} {'vs ceiling':>20} "
            f"{'server threads':<36} {'lines vs cpu':>13} {'step (Floem)':<26}")
    out = ["", f"{t['name']} values over {t['proto'].upper()} ({t['keys']:,} keys):", head,
           "-" * len(head)]
    for e in t["designs"]:
        if not e["available"]:
            out.append(f"{e['name']:<10} not available: {e['why']}")
            continue
        s = e["summary"]
        hit = f"{s['hit_rate']['median']:.3f}" if s["hit_rate"] and e["kind"] != "echo" else "-"
        vs_c = ("1.00x (ceiling)" if e["name"] == CEILING
                else _ratio_cell(rat["vs_ceiling"].get(e["name"]), False))
        failed = [x["failed"] for x in e["runs"] if x["failed"]]
        out.append(f"{e['name']:<10} {_range(s['ops_per_s'], ',.0f'):>28} "
                   f"{_range(s['p50_us'], '.0f'):>18} {_range(s['p99_us'], '.0f'):>20} "
                   f"{hit:>6} {s['errors']:>4} "
                   f"{_ratio_cell(rat['per_design'].get(e['name']), e['name'] == PEER):>20} "
                   f"{vs_c:>20} {_threads_cell(e):<36} {_lines_cell(e):>13} "
                   f"{_step_cell(e):<26}")
        if failed:
            out.append(f"{'':<10} {len(failed)} of {s['runs']} run(s) failed: {failed[0]}")
        if s["errors"]:
            kinds: dict[str, int] = {}
            for x in e["runs"]:
                for k, v in x.get("error_counts", {}).items():
                    kinds[k] = kinds.get(k, 0) + v
            late = sum(x.get("late_answers", 0) for x in e["runs"])
            out.append(f"{'':<10} errors: " + ", ".join(f"{k} {v}" for k, v in kinds.items()
                                                        if v)
                       + f" ({late} answers came after their timeout)")
    return out


def format_report(res: dict) -> str:
    """The result as text: setup, a table per workload (a row per design), warnings,
    ratios and the verdicts."""
    m, st = res["machine"], res["settings"]
    loads = ", ".join(f"{t['name']} values over {t['proto'].upper()}" for t in res["workloads"])
    out = [f"offlow bench kvs: memcached binary protocol on 127.0.0.1, kvs_loadgen closed "
           f"loop, {st['client_threads']} thread(s) x {st['conns']} connections x "
           f"{st['depth']} outstanding, {st['duration']:g} s per run after the warm-up "
           f"(one SET per key), {st['repeat']} round(s) alternating the designs",
           f"workloads: {loads}; "
           f"keys of {st['key_size']} B, Zipf {st['zipf']:g}, {st['get_ratio']:.0%} GET; "
           f"request timeout {st['timeout_ms']:g} ms",
           machine_line(m) + "; busy before the run: "
           + ", ".join(f"{k} {v:.0%}" for k, v in m.get("busy_before", {}).items())
           + f"; load average {m['loadavg_before'][0]:.2f} before, "
             f"{m['loadavg_after'][0]:.2f} after",
           f"CPUs: kvs_loadgen pinned to CPU {client_cpu(Settings(**st))} (it busy-polls: "
           f"its thread counts against the same {m['cpus']} CPUs); memcached and kvs_server "
           f"-t {st['cores']} pinned to CPUs {','.join(map(str, server_cpus(st['cores'])))}; "
           f"the ceiling ({CEILING}) on CPU(s) "
           f"{','.join(map(str, echo_cpus(Settings(**st))))}; offlow designs where their "
           "program places them (h/n = host/NIC core @CPU, its segments: segments on one "
           "device core share a thread)"]
    busy = [k for k, v in m.get("busy_before", {}).items() if v > BUSY]
    if busy:
        out.append(f"warning: {', '.join(busy)} busy before the run; expect noisy numbers "
                   "(the ratios, taken per round, hold better than absolute figures)")
    for t in res["workloads"]:
        out += _workload_table(t)
    out.append("  lines: program lines that differ from examples/kvs.py (code; blank lines, "
               "comments, docstrings left out) + --set settings (s), one line each; step: the "
               "same from the design Floem's count starts from")
    first = res["workloads"][0]["designs"] if res["workloads"] else []
    warns = [(e["name"], e["placement"]["oversubscribed"]) for e in first
             if e.get("placement") and e["placement"]["oversubscribed"]]
    if warns:
        out.append("")
        out += [f"warning: {n}: {w}" for n, w in warns]
    out += [""] + [verdict_line(v) for v in res["verdicts"]]
    return "\n".join(out)


def plot(t: dict, ax: Axes, cpus: int) -> None:
    """One workload: ops/s per design (median, min..max bars) and p99 latency (points,
    right axis)."""
    rows = [e for e in t["designs"] if e["available"] and e["summary"]["ops_per_s"]]
    names = [e["name"] for e in rows]
    x = list(range(len(rows)))
    ops = [e["summary"]["ops_per_s"] for e in rows]
    med = [o["median"] / 1e3 for o in ops]
    err = [[(o["median"] - o["min"]) / 1e3 for o in ops],
           [(o["max"] - o["median"]) / 1e3 for o in ops]]
    colors = ["tab:blue" if e["kind"] == "offlow" else "tab:olive" if e["kind"] == "echo"
              else "tab:gray" for e in rows]
    ax.bar(x, med, yerr=err, color=colors, capsize=4)
    ax.set_xticks(x, names, fontsize=7)
    ax.set_ylabel("thousand ops/s (median, min..max)", fontsize=8)
    ax2 = ax.twinx()
    p99 = [e["summary"]["p99_us"]["median"] if e["summary"]["p99_us"] else 0 for e in rows]
    ax2.plot(x, p99, "o", color="tab:red", label="p99 latency")
    ax2.set_ylabel("p99 latency, us", color="tab:red", fontsize=8)
    ax2.set_ylim(bottom=0)
    ax.set_title(f"{t['name']} values over {t['proto'].upper()}, {cpus} CPUs", fontsize=9)


def write_png(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = res["workloads"]
    fig, axes = plt.subplots(1, max(1, len(tables)), figsize=(6 * max(1, len(tables)), 4.5),
                             squeeze=False)
    for t, ax in zip(tables, axes[0], strict=False):
        plot(t, ax, res["machine"]["cpus"])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool = False, out_json: Path | None = None, out_png: Path | None = None,
        designs: Sequence[str] | None = None, duration: float | None = None,
        cores: int | None = None, repeat: int | None = None,
        settings: Settings | None = None, workloads: Sequence[str] | None = None) -> dict:
    """`offlow bench kvs`: measure, print the tables, write JSON and a PNG."""
    st = settings or (QUICK if quick else FULL)
    if workloads is not None:
        st = replace(st, workloads=tuple(workloads))
    if duration is not None:
        st = replace(st, duration=duration)
    if cores is not None:
        st = replace(st, cores=cores)
    if repeat is not None:
        st = replace(st, repeat=repeat)
    if st.repeat < 1 or st.cores < 1 or st.duration <= 0:
        raise OfflowError("--repeat and --cores must be at least 1, --duration above 0")
    res = measure(st, designs)
    print(format_report(res))
    if out_json:
        Path(out_json).write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {out_json}")
    if out_png:
        write_png(res, Path(out_png))
        print(f"wrote {out_png}")
    return res
