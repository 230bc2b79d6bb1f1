"""The router on a DPDK port in `offlow bench router` (sweep "ports"): offlow's router
reading and writing DPDK's net_pcap through `--port dpdk:...`, beside DPDK's l3fwd and
beside plain I/O forwarding on the same replay, one core each, IPv4 64 B.

The I/O ceiling: Debian's DPDK 22.11 ships no dpdk-testpmd binary (the `dpdk` package
has devbind, hugepages and pmdinfo only), so the ceiling is DPDK's own `skeleton`
example (basicfwd.c from dpdk-doc, compiled unchanged as its Makefile does): an
rx_burst / tx_burst loop per port pair, testpmd's io forwarding without its
bookkeeping. It needs an even number of ports: the replay is port 0
(`net_pcap0,rx_pcap=...,infinite_rx=1`), port 1 a net_null that frees what it is sent
and receives nothing (`no-rx=1`: else the loop also forwards the packets a net_null
makes up, from port 1 to port 0, on the same CPU, which the rate does not count: that
took about a third of the ceiling's CPU); its rate is port 1's output packets, read
through DPDK telemetry. l3fwd
replays the same pcap as in the "l3fwd" sweep. offlow's router runs its one-core
placement (every element in one segment on one NIC core) with the same vdev as its
port, source and sink (the sink's frames are dropped by net_pcap, as l3fwd's are).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from benchmarks import router_fwd, router_instr, router_l3fwd
from benchmarks.common.cpu import busiest
from benchmarks.router_l3fwd import L3fwd
from offlow import cbuild
from offlow.build import Build, build
from offlow.cbuild import cache_dir
from offlow.errors import OfflowError
from offlow.ports import LIBRARY_KINDS
from offlow.runner import RunOptions
from offlow.targets import nic

SKELETON = router_l3fwd.EXAMPLES / "skeleton" / "basicfwd.c"
GOAL = 0.8  # offlow router on a DPDK port / I/O forwarding, per core, IPv4 64 B


@dataclass(frozen=True)
class PortSweep:
    size: int = 64
    duration: float = 1.0
    warmup: float = 0.5
    reps: int = 3
    packets: int = router_l3fwd.PCAP_PACKETS
    # seconds each forwarding loop runs under callgrind for its instructions per packet
    # (benchmarks.router_instr); 0: not counted
    instructions: float = 0.0


FULL = PortSweep(instructions=3.0)
QUICK = PortSweep(duration=0.5, reps=1)


def build_skeleton() -> Path:
    """basicfwd.c compiled unchanged with pkg-config's flags, cached by content."""
    cflags, libs = router_l3fwd.pkg_config("--cflags"), router_l3fwd.pkg_config("--libs")
    if cflags is None or libs is None:
        raise OfflowError("pkg-config does not find libdpdk")
    flags = [*cbuild.flags("l3fwd"), *cflags.split()]
    h = hashlib.sha256(SKELETON.read_bytes() + " ".join(flags + libs.split()).encode())
    exe = cache_dir() / f"basicfwd-{h.hexdigest()[:16]}"
    if not exe.exists():
        tmp = exe.with_name(exe.name + f".tmp{os.getpid()}")
        res = subprocess.run([cbuild.description().cc, *flags, str(SKELETON), "-o", str(tmp),
                              *libs.split()], capture_output=True, text=True)
        if res.returncode != 0:
            raise OfflowError("basicfwd does not compile: "
                              + " ".join(res.stderr.strip().splitlines()[-3:]))
        tmp.replace(exe)
    return exe


class Basicfwd(L3fwd):
    """DPDK's skeleton forwarding port 0 (the replay) to port 1 on one lcore."""

    READY = "forwarding packets"
    NAME = "basicfwd"

    def __init__(self, exe: Path, cpu: int, pcap: Path, log: Path):
        super().__init__(exe, cpu, "", {"rule_ipv4": Path(), "rule_ipv6": Path()}, log)
        # stdbuf: basicfwd prints its READY line with printf into a file
        self.cmd = ["stdbuf", "-oL", str(exe), "--no-huge", "--no-pci", "-m", "512",
                    "--file-prefix", self.prefix, "-l", str(cpu),
                    "--vdev", f"net_pcap0,rx_pcap={pcap},infinite_rx=1",
                    "--vdev", "net_null1,no-rx=1"]


def basicfwd_rate(exe: Path, cpu: int, pcap: Path, sw: PortSweep, work: Path) -> dict:
    with Basicfwd(exe, cpu, pcap, work / "basicfwd.log") as fwd:
        fwd.wait_loop()
        time.sleep(sw.warmup)
        a, t0, c0 = fwd.stats(1), time.monotonic(), fwd.cpu()
        time.sleep(sw.duration)
        b, t1, c1 = fwd.stats(1), time.monotonic(), fwd.cpu()
        back = fwd.stats(0)["opackets"]  # the other way, port 1 to port 0: none
    pkts = b["opackets"] - a["opackets"]
    return {"out": pkts, "back": back, "seconds": t1 - t0, "cpu_s": busiest(c0, c1),
            "mpps": pkts / (t1 - t0) / 1e6 if pkts > 0 else None}


def per_cpu(row: dict) -> float | None:
    """Mpps per CPU-second of the forwarding thread: packets out over its CPU time
    (offlow's core thread from its first packet to its end, as the run's stats count
    it; the peers' lcore over the timed window)."""
    if not row.get("mpps") or not row.get("cpu_s"):
        return None
    return row["out"] / row["cpu_s"] / 1e6


def measure(routes4: np.ndarray, routes6: np.ndarray, sw: PortSweep,
            use_dpdk: bool = True) -> dict:
    """offlow on the port, basicfwd and l3fwd on the same replay, paired per repetition."""
    if not use_dpdk:
        return {"error": "not asked for (--no-dpdk)"}
    l3, info = router_l3fwd.setup()
    if l3 is None:
        return {"error": f"DPDK is not available: {info['reason']}"}
    fwd = build_skeleton()
    cap = info["capacity"]
    r4 = router_l3fwd.slice_routes(routes4, cap["IPV4_L3FWD_LPM_MAX_RULES"])
    while router_l3fwd.tbl8_groups4(r4) > cap["IPV4_L3FWD_LPM_NUMBER_TBL8S"]:
        r4 = r4[np.argsort(r4["len"], kind="stable")][:-1]
    r6 = router_l3fwd.slice_routes(routes6, cap["IPV6_L3FWD_LPM_MAX_RULES"])
    cpu = nic.TARGET.cpu_base(os.cpu_count() or 1)
    b = build(router_fwd.program("one core"), ports=(LIBRARY_KINDS["dpdk"],))
    runs: dict[str, list[float]] = {"offlow": [], "basicfwd": [], "l3fwd": []}
    cpu_runs: dict[str, list[float]] = {k: [] for k in runs}
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="offlow-bench-ports-") as d:
        work = Path(d)
        rules = router_l3fwd.write_rules(r4, r6, work)
        pcap = work / "in.pcap"
        router_l3fwd.write_pcap(pcap, router_l3fwd.frames(4, sw.size, r4, sw.packets,
                                                          router_l3fwd.SEED + sw.size + 4))
        port = f"dpdk:net_pcap0,rx_pcap={pcap},infinite_rx=1"
        opts = RunOptions(duration=sw.duration, ports=(port,), timeout=sw.duration + 120,
                          opts=(f"routes4.path={rules['prefixes']}",
                                f"routes6.path={rules['prefixes']}"))
        l3sw = router_l3fwd.L3fwdSweep(duration=sw.duration, warmup=sw.warmup)
        for _ in range(sw.reps):
            row = router_fwd.forward(b, opts)
            if row["mpps"] is None:
                errors.append(f"offlow: {row.get('why')}")
            else:
                runs["offlow"].append(row["mpps"])
                if per_cpu(row):
                    cpu_runs["offlow"].append(per_cpu(row))
            for name, fn in (("basicfwd", lambda: basicfwd_rate(fwd, cpu, pcap, sw, work)),
                             ("l3fwd", lambda: router_l3fwd.l3fwd_rate(l3, cpu, pcap, rules,
                                                                       l3sw, work))):
                r = fn()
                if r.get("back"):
                    errors.append(f"{name} also forwarded {r['back']} packets from port 1 to "
                                  "port 0: CPU its rate does not count")
                if r["mpps"] is None:
                    errors.append(f"{name}: no packets out")
                else:
                    runs[name].append(r["mpps"])
                    if per_cpu(r):
                        cpu_runs[name].append(per_cpu(r))
        instr = (instructions(b, opts, fwd, l3, cpu, pcap, rules, sw.instructions, work)
                 if sw.instructions else {})
    med, ratio = _medians(runs)
    cpu_med, cpu_ratio = _medians(cpu_runs)
    return {"settings": asdict(sw), "port": port.replace(str(pcap), "in.pcap"), "cpu": cpu,
            "instructions": instr,
            "dpdk": info.get("dpdk"), "routes": {"v4": len(r4), "v6": len(r6)},
            "runs": runs, "mpps": med, "ratio": ratio, "goal": GOAL, "errors": errors,
            "cpu_runs": cpu_runs, "mpps_per_cpu_s": cpu_med, "cpu_ratio": cpu_ratio,
            "ceiling": "DPDK skeleton (basicfwd.c): Debian's DPDK ships no dpdk-testpmd"}


def instructions(b: Build, opts: RunOptions, fwd: Path, l3: Path, cpu: int, pcap: Path,
                 rules: dict[str, Path], seconds: float, work: Path) -> dict:
    """Each forwarding loop's instructions per packet under callgrind (router_instr),
    or {"error": why}."""
    why = router_instr.available()
    if why:
        return {"error": why}
    out = work / "offlow.cg"
    row = router_fwd.forward(b, replace(opts, duration=seconds, timeout=seconds + 600,
                                        wrap=tuple(router_instr.wrap("offlow", out))))
    if row["mpps"] is None:
        return {"error": f"offlow under callgrind: {row.get('why')}"}
    vdev = f"net_pcap0,rx_pcap={pcap},infinite_rx=1"
    return {"offlow": router_instr.offlow_count(out, row["out"]),
            "basicfwd": router_instr.peer_count(
                "basicfwd", Basicfwd(fwd, cpu, pcap, work / "basicfwd-cg.log"),
                work / "basicfwd.cg", seconds),
            "l3fwd": router_instr.peer_count(
                "l3fwd", L3fwd(l3, cpu, vdev, rules, work / "l3fwd-cg.log"),
                work / "l3fwd.cg", seconds)}


def _medians(runs: dict[str, list[float]]) -> tuple[dict, dict]:
    """The median of each one's runs, offlow's over the others' and l3fwd's over the
    ceiling's ("l3fwd_io")."""
    med = {k: float(np.median(v)) if v else None for k, v in runs.items()}
    ratio = {k: med["offlow"] / med[k] if med["offlow"] and med[k] else None
             for k in ("basicfwd", "l3fwd")}
    ratio["l3fwd_io"] = (med["l3fwd"] / med["basicfwd"] if med["l3fwd"] and med["basicfwd"]
                         else None)
    return med, ratio


def format_report(res: dict) -> list[str]:
    out = ["", f"router on a DPDK port (IPv4 {res['settings']['size']} B, one core each, "
               f"CPU {res['cpu']}, DPDK {res['dpdk']}, {res['routes']['v4']:,} IPv4 routes "
               "spread over the table: l3fwd's compile-time limit, for both routers; "
               f"offlow --port {res['port']})"]
    out.append(f"  {'who':<34}{'Mpps median':>12}  {'per CPU-s':>10}  runs (Mpps; per CPU-s)")
    names = {"offlow": "offlow router, --port dpdk:",
             "l3fwd": "DPDK l3fwd-lpm (peer)",
             "basicfwd": "DPDK skeleton io fwd (ceiling)"}
    num = lambda x: f"{x:.2f}" if x else "-"  # noqa: E731
    for k, label in names.items():
        runs = ", ".join(f"{v:.2f}" for v in res["runs"][k])
        cruns = ", ".join(f"{v:.2f}" for v in res["cpu_runs"][k])
        out.append(f"  {label:<34}{num(res['mpps'][k]):>12}  "
                   f"{num(res['mpps_per_cpu_s'][k]):>10}  {runs}; {cruns}")
    fmt = lambda x: f"{x:.2f}x" if x else "-"  # noqa: E731
    for what, r in (("wall clock", res["ratio"]), ("per CPU-second", res["cpu_ratio"])):
        verdict = "met" if r["basicfwd"] and r["basicfwd"] >= GOAL else "NOT met"
        out.append(f"  {what}: offlow / io forwarding {fmt(r['basicfwd'])} (goal {GOAL}x: "
                   f"{verdict}); l3fwd / io forwarding {fmt(r['l3fwd_io'])}; "
                   f"offlow / l3fwd {fmt(r['l3fwd'])}")
    out.append("  (per CPU-second: packets out / CPU time of the forwarding thread, which "
               "holds when other work shares the cores)")
    out.append(f"  ceiling: {res['ceiling']}")
    out += _format_instructions(res.get("instructions") or {})
    out += [f"  error: {e}" for e in res["errors"]]
    return out


def _format_instructions(ins: dict) -> list[str]:
    """The callgrind counts: per packet, over the ceiling's, and the ratios."""
    if not ins:
        return []
    if "error" in ins:
        return [f"  instructions per packet: not counted ({ins['error']})"]
    failed = [f"{k}: {ins[k].get('error') or 'no packets counted'}"
              for k in ("offlow", "l3fwd", "basicfwd") if not ins[k].get("per_packet")]
    if failed:
        return [f"  instructions per packet: not counted ({'; '.join(failed)})"]
    per = {k: ins[k]["per_packet"] for k in ("offlow", "l3fwd", "basicfwd")}
    io = per["basicfwd"]
    out = ["  instructions per packet of the forwarding loop (callgrind; the load does not "
           "move them):"]
    for k, label in (("offlow", "offlow router"), ("l3fwd", "DPDK l3fwd-lpm"),
                     ("basicfwd", "io forwarding")):
        row = ins[k]
        full = "" if row.get("full_bursts", True) else " (bursts not all full: count approximate)"
        out.append(f"    {label:<16}{per[k]:8.1f}  ({per[k] - io:+.1f} over io; "
                   f"{row['packets']:,} packets){full}")
    out.append(f"    io / offlow {io / per['offlow']:.2f}x, io / l3fwd {io / per['l3fwd']:.2f}x, "
               f"l3fwd / offlow {per['l3fwd'] / per['offlow']:.2f}x (as instructions; the "
               "time ratios above also pay the memory's latency)")
    return out

