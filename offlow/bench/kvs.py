"""`offlow bench kvs`: the key-value store's designs (Floem, seed 001) side by side under
one load generator, beside a real memcached measured in the same run.

Every design serves memcached's binary protocol over UDP on 127.0.0.1 and is driven,
in turn, by the same kvs_loadgen settings (runtime/bench/kvs_loadgen.c): closed loop,
Floem's workload by default (100,000 keys of 32 bytes, 64-byte values, Zipf 0.9, 90%
GET), after the loadgen's warm-up (one SET of every key, not timed). The designs are
data (DESIGNS below): a name, a kind (memcached, kvs_server or an offlow program), the
program file and its `--set` settings. A program file that does not exist (yet) makes
its design "not available: FILE missing" in the table and the JSON, not a failure.

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
k on CPU ncpu/2 + k, see runner.cpu_of; segments on the same device core share one
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
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offlow.errors import OfflowError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

ROOT = Path(__file__).resolve().parents[2]
TARGET_VS_MEMCACHED = 1.0  # the best offlow design's ops/s over memcached's, at least
BUSY = 0.2  # busy fraction of a CPU before the run above which the report warns


@dataclass(frozen=True)
class Design:
    """One way of serving the store."""

    name: str
    kind: str                        # "memcached", "kvs_server" or "offlow"
    what: str
    program: str | None = None       # offlow: the program file, relative to the repository
    settings: tuple[str, ...] = ()   # offlow: its --set settings
    step_from: str | None = None     # the design Floem's line count is measured from
    floem_lines: int | None = None   # Floem's lines for that step


DESIGNS: tuple[Design, ...] = (
    Design("memcached", "memcached", "Debian memcached, -t CORES, UDP (-U)"),
    Design("cpu", "offlow", "everything on the host", "examples/kvs.py"),
    Design("split", "offlow", "NIC parses, hashes, steers by key to host store cores",
           "examples/kvs.py", ("parse.device=nic",), "cpu", 15),
    Design("cache_wt", "offlow", "NIC cache, write-through", "examples/kvs_cache.py",
           ("cache.policy=write_through",), "cpu", 40),
    Design("cache_wb", "offlow", "NIC cache, write-back", "examples/kvs_cache.py",
           ("cache.policy=write_back",), "cache_wt", 1),
    Design("kvs_server", "kvs_server", "hand-written C server (reference), -t CORES"),
)
BASELINE = "cpu"      # the CPU-only design the line counts start from
PEER = "memcached"    # what every design's ops/s is divided by


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


# Closed loop with 2 sockets x 32 outstanding requests: tried 16..128 outstanding on
# this 2-CPU machine; 64 saturates every design here, and beyond it memcached starts
# dropping datagrams (warm-up retries). The request timeout is 1 s rather than the
# loadgen's 200 ms: on a loaded shared machine answers do arrive 200 ms late at times
# (the loadgen counts them as late answers), and a lost datagram still shows as an
# error.
FULL = Settings(duration=5.0, repeat=3, cores=2, client_cpu=-1, client_threads=1, conns=2,
                depth=32, keys=100_000, key_size=32, value_size=64, zipf=0.9, get_ratio=0.9,
                timeout_ms=1000, memory_mb=1024)
# Quick: one short round on a tenth of the keys (the warm-up SETs every key).
QUICK = replace(FULL, duration=1.0, repeat=1, keys=10_000)


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


def placement(d: Design, st: Settings, b: Any = None) -> dict[str, Any]:
    """Where the design's threads run and how many poll; the loadgen's thread(s) too;
    and the oversubscription warning, if any. `b`: the offlow design's Build."""
    from offlow import runner

    ncpu = _ncpu()
    client = [client_cpu(st)] * st.client_threads
    out: dict[str, Any] = {"cpus": ncpu, "client": {"threads": st.client_threads,
                                                     "cpus": sorted(set(client)),
                                                     "polls": True}}
    if d.kind == "offlow":
        from offlow.passes.fuse import threads as core_threads

        ths = [{"device": t.device, "core": t.core, "cpu": runner.cpu_of(t.device, t.core),
                "segments": [seg for seg, _ in t.loops]} for t in core_threads(b.graph)]
        out["server"] = {"threads": len(ths), "polls": True, "loops": ths,
                         "cpus": sorted({t["cpu"] for t in ths}),
                         "processes": sorted({s.device for s in b.graph.segments})}
        pollers = [t["cpu"] for t in ths] + client
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


def _loadgen(port: int, st: Settings, *, warmup: bool = True) -> dict:
    from offlow.kvs.tools import run_loadgen

    return run_loadgen(port, duration=st.duration, threads=st.client_threads,
                       conns=st.conns, depth=st.depth, keys=st.keys, key_size=st.key_size,
                       value_size=st.value_size, zipf=st.zipf, get_ratio=st.get_ratio,
                       warmup=warmup, timeout_ms=st.timeout_ms,
                       cpus=[client_cpu(st)] * st.client_threads, progress="off",
                       timeout=st.duration + 180)


def run_once(d: Design, st: Settings, b: Any = None) -> dict:
    """One run of one design (a fresh server process): the loadgen's report, trimmed,
    and what the server said about itself."""
    from offlow.kvs.tools import kvs_server, memcached

    t0 = time.monotonic()
    server: dict[str, Any] = {}
    if d.kind == "memcached":
        with memcached(threads=st.cores, cpus=server_cpus(st.cores),
                       memory_mb=st.memory_mb) as m:
            rep = _loadgen(m.port, st)
            server["alive"] = m.alive()
    elif d.kind == "kvs_server":
        with kvs_server(threads=st.cores, cpus=server_cpus(st.cores),
                        capacity=max(1_000_000, 2 * st.keys), memory_mb=st.memory_mb) as k:
            rep = _loadgen(k.port, st)
            server["alive"] = k.alive()
        server["stats"] = k.stats()
    else:
        from offlow.report import summarize
        from offlow.runner import Run, RunOptions

        r = Run(b, RunOptions(udp_port=0, timeout=st.duration + 240))
        r.start()
        try:
            assert r.udp_port is not None
            rep = _loadgen(r.udp_port, st)
        finally:
            r.stop()
            res = r.wait()
        server["ok"], server["errors"] = res.ok, res.errors[:5]
        try:
            s = summarize(b.graph, res.stats)
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


def _stats(v: Sequence[float]) -> dict[str, float] | None:
    if not v:
        return None
    return {"n": len(v), "median": statistics.median(v), "min": min(v), "max": max(v)}


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
        from offlow.cli import load_program

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
    """Run every design `st.repeat` times, alternating; return every number."""
    from offlow.bench.machine import machine, quiet_check

    t_start = time.monotonic()
    designs = [_by_name(n) for n in names] if names else list(DESIGNS)
    info: dict[str, Any] = machine()
    info["busy_before"] = quiet_check(0.5 if st.repeat == 1 else 1.0)
    info["loadavg_before"] = list(os.getloadavg())
    entries = [_prepare(d, st) for d in designs]
    for rnd in range(st.repeat):
        for d, e in zip(designs, entries, strict=True):
            if not e["available"]:
                continue
            try:
                run = run_once(d, st, e["_build"])
            except (OfflowError, OSError) as err:
                run = {"error": str(err)}
            run["round"] = rnd
            why = run.get("error") or _failed(run)
            run["failed"] = why
            e["runs"].append(run)
            if progress:
                if "ops_per_s" in run:
                    lat = run["latency_ns"]
                    _progress(f"round {rnd + 1}/{st.repeat} {d.name:>10}: "
                              f"{run['ops_per_s']:>10,.0f} ops/s  p50 {lat['p50'] / 1e3:7.1f} us"
                              f"  p99 {lat['p99'] / 1e3:7.1f} us  hit rate "
                              f"{run['hit_rate']:.3f}  errors {run['errors']}"
                              + (f"  FAILED: {why}" if why else ""))
                else:
                    _progress(f"round {rnd + 1}/{st.repeat} {d.name:>10}: FAILED: {why}")
    info["loadavg_after"] = list(os.getloadavg())
    for e in entries:
        e.pop("_build", None)
        ok = [r for r in e["runs"] if not r["failed"]]
        e["summary"] = {
            "ok_runs": len(ok), "runs": len(e["runs"]),
            "ops_per_s": _stats([r["ops_per_s"] for r in ok]),
            "p50_us": _stats([r["latency_ns"]["p50"] / 1e3 for r in ok]),
            "p99_us": _stats([r["latency_ns"]["p99"] / 1e3 for r in ok]),
            "hit_rate": _stats([r["hit_rate"] for r in ok]),
            "errors": sum(int(r.get("errors", 0)) for r in e["runs"]),
        }
    res: dict[str, Any] = {"benchmark": "kvs", "machine": info, "settings": asdict(st),
                           "designs": entries}
    res["ratios"] = ratios(res)
    res["seconds"] = round(time.monotonic() - t_start, 1)
    return res


def ratios(res: dict) -> dict:
    """Each design's ops/s over memcached's, per round (same round), then median and
    min..max; and the verdict on the best offlow design."""
    by = {e["name"]: e for e in res["designs"]}
    peer = by.get(PEER)
    out: dict[str, Any] = {"peer": PEER, "per_design": {}}
    peer_runs = ({r["round"]: r for r in peer["runs"] if not r["failed"]}
                 if peer and peer["available"] else {})
    for e in res["designs"]:
        if e["name"] == PEER or not e["available"]:
            continue
        per = [r["ops_per_s"] / peer_runs[r["round"]]["ops_per_s"]
               for r in e["runs"] if not r["failed"] and r["round"] in peer_runs]
        out["per_design"][e["name"]] = {"values": per, **(_stats(per) or {})}
    offl = [(n, v) for n, v in out["per_design"].items()
            if by[n]["kind"] == "offlow" and v.get("median") is not None]
    if not peer_runs:
        why = peer["why"] if peer and not peer["available"] else "memcached not measured"
        out["verdict"] = {"design": None, "met": None, "target": TARGET_VS_MEMCACHED,
                          "why": why}
    elif not offl:
        out["verdict"] = {"design": None, "met": None, "target": TARGET_VS_MEMCACHED,
                          "why": "no offlow design measured"}
    else:
        name, v = max(offl, key=lambda x: x[1]["median"])
        out["verdict"] = {"design": name, "value": v["median"], "min": v["min"],
                          "max": v["max"], "target": TARGET_VS_MEMCACHED,
                          "met": v["median"] >= TARGET_VS_MEMCACHED}
    return out


# ---- the report ---------------------------------------------------------------------------


def verdict_line(v: dict) -> str:
    if v["met"] is None:
        return (f"verdict: best offlow design vs memcached: not judged ({v['why']}) vs "
                f"target {v['target']:.2f}x")
    # Two decimals, unless they would hide which side of the target the median is on.
    d = 2 if (f"{v['value']:.2f}" != f"{v['target']:.2f}"
              or v["value"] == v["target"]) else 4
    return (f"verdict: best offlow design ({v['design']}) vs memcached: {v['value']:.{d}f}x "
            f"({v['min']:.2f}..{v['max']:.2f}) vs target {v['target']:.2f}x: "
            f"{'meets' if v['met'] else 'misses'}")


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


def format_report(res: dict) -> str:
    """The result as text: setup, one row per design, warnings, ratios and the verdict."""
    m, st = res["machine"], res["settings"]
    out = [f"offlow bench kvs: memcached binary protocol over UDP on 127.0.0.1, kvs_loadgen "
           f"closed loop, {st['client_threads']} thread(s) x {st['conns']} sockets x "
           f"{st['depth']} outstanding, {st['duration']:g} s per run after the warm-up "
           f"(one SET per key), {st['repeat']} round(s) alternating the designs",
           f"workload: {st['keys']:,} keys of {st['key_size']} B, {st['value_size']} B values, "
           f"Zipf {st['zipf']:g}, {st['get_ratio']:.0%} GET; request timeout "
           f"{st['timeout_ms']:g} ms",
           f"machine: {m['cpu']}, {m['cpus']} CPUs, kernel {m['kernel']}; busy before the run: "
           + ", ".join(f"{k} {v:.0%}" for k, v in m.get("busy_before", {}).items())
           + f"; load average {m['loadavg_before'][0]:.2f} before, "
             f"{m['loadavg_after'][0]:.2f} after",
           f"CPUs: kvs_loadgen pinned to CPU {client_cpu(Settings(**st))} (it busy-polls: "
           "its thread "
           f"counts against the same {m['cpus']} CPUs); memcached and kvs_server -t "
           f"{st['cores']} pinned to CPUs {','.join(map(str, server_cpus(st['cores'])))}; "
           "offlow designs where their program places them (h/n = host/NIC core @CPU, its "
           "segments: segments on one device core share a thread)"]
    busy = [k for k, v in m.get("busy_before", {}).items() if v > BUSY]
    if busy:
        out.append(f"warning: {', '.join(busy)} busy before the run; expect noisy numbers "
                   "(the ratios, taken per round, hold better than absolute figures)")
    rat = res["ratios"]["per_design"]
    head = (f"{'design':<10} {'ops/s median (min..max)':>28} {'p50 us':>18} {'p99 us':>20} "
            f"{'hit':>6} {'err':>4} {'vs memcached':>20} {'server threads':<36} "
            f"{'lines vs cpu':>13} {'step (Floem)':<26}")
    out += ["", head, "-" * len(head)]
    for e in res["designs"]:
        if not e["available"]:
            out.append(f"{e['name']:<10} not available: {e['why']}")
            continue
        s = e["summary"]
        r = rat.get(e["name"])
        vs = "1.00x (peer)" if e["name"] == PEER else (
            f"{r['median']:.2f}x ({r['min']:.2f}..{r['max']:.2f})"
            if r and r.get("median") is not None else "-")
        hit = f"{s['hit_rate']['median']:.3f}" if s["hit_rate"] else "-"
        failed = [x["failed"] for x in e["runs"] if x["failed"]]
        out.append(f"{e['name']:<10} {_range(s['ops_per_s'], ',.0f'):>28} "
                   f"{_range(s['p50_us'], '.0f'):>18} {_range(s['p99_us'], '.0f'):>20} "
                   f"{hit:>6} {s['errors']:>4} {vs:>20} {_threads_cell(e):<36} "
                   f"{_lines_cell(e):>13} {_step_cell(e):<26}")
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
    out.append("  lines: program lines that differ from examples/kvs.py (code; blank lines, "
               "comments, docstrings left out) + --set settings (s), one line each; step: the "
               "same from the design Floem's count starts from")
    warns = [(e["name"], e["placement"]["oversubscribed"]) for e in res["designs"]
             if e.get("placement") and e["placement"]["oversubscribed"]]
    if warns:
        out.append("")
        out += [f"warning: {n}: {w}" for n, w in warns]
    out += ["", verdict_line(res["ratios"]["verdict"])]
    return "\n".join(out)


def plot(res: dict, ax: Axes) -> None:
    """Ops/s per design (median, min..max bars) and p99 latency (points, right axis)."""
    rows = [e for e in res["designs"] if e["available"] and e["summary"]["ops_per_s"]]
    names = [e["name"] for e in rows]
    x = list(range(len(rows)))
    ops = [e["summary"]["ops_per_s"] for e in rows]
    med = [o["median"] / 1e3 for o in ops]
    err = [[(o["median"] - o["min"]) / 1e3 for o in ops],
           [(o["max"] - o["median"]) / 1e3 for o in ops]]
    colors = ["tab:gray" if e["kind"] != "offlow" else "tab:blue" for e in rows]
    ax.bar(x, med, yerr=err, color=colors, capsize=4)
    ax.set_xticks(x, names)
    ax.set_ylabel("thousand ops/s (median, min..max)")
    ax2 = ax.twinx()
    p99 = [e["summary"]["p99_us"]["median"] if e["summary"]["p99_us"] else 0 for e in rows]
    ax2.plot(x, p99, "o", color="tab:red", label="p99 latency")
    ax2.set_ylabel("p99 latency, us", color="tab:red")
    ax2.set_ylim(bottom=0)
    missing_names = [e["name"] for e in res["designs"] if not e["available"]]
    m = res["machine"]
    title = f"kvs designs vs memcached, {m['cpus']} CPUs"
    if missing_names:
        title += f" (not available: {', '.join(missing_names)})"
    ax.set_title(title, fontsize=10)
    ax2.legend(loc="upper right", fontsize=8)


def write_png(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    plot(res, ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool = False, out_json: Path | None = None, out_png: Path | None = None,
        designs: Sequence[str] | None = None, duration: float | None = None,
        cores: int | None = None, repeat: int | None = None,
        settings: Settings | None = None) -> dict:
    """`offlow bench kvs`: measure, print the table, write JSON and a PNG."""
    st = settings or (QUICK if quick else FULL)
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
