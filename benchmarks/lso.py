"""`offlow bench lso`: the segmentation offload beside DPDK 22.11's rte_gso on the same
sends in the same run, the copy engine beside the core (the DMA/PIO crossover), and the
LSO seed's cycle tables from instruction counts of offlow's own code.

- Rates (benchmarks/c/bench_dpdk_gso.c; bench_lso.c alone when DPDK is missing): 64 KB
  TCP/IPv4 and UDP/IPv4 sends of the BGP table's bytes cut at IP MTU 512, 1024 and 1500
  by the NIC element's code (lso_nic.c over lso.c) and by rte_gso_segment, one pinned
  core, repetitions taking turns; Mpps and Gb/s of output (frame bytes) per core, and
  the ratio per repetition. Checksums offloaded (neither computes them) or computed
  (rte_gso followed by DPDK's software checksums, as an application without checksum
  offload must); offlow's payloads copied into packet buffers (pio) or left in place,
  each packet's headers written before its payload in the send buffer (place: no copy,
  as rte_gso's indirect mbufs make none).
- DMA vs PIO (bench_lso.c): the same sends cut with the payloads moved by the core or by
  the copy engine (a thread on the other CPU, 8 packets a job, the next job's copy
  overlapping the current packets), over payload sizes; the crossover is the smallest
  payload from which the engine is at least as fast.
- Instructions (valgrind's callgrind over bench_lso.c count): per packet of each message
  kind (the path functions ofl_lso_ssm/bom/com/eom, inclusive) and per packet overall
  (everything the device does for a send, over its packets), for the headers written in
  place with checksums offloaded (the seed's method: its Table 2) and for PIO (the core
  copies each packet: the seed's "header copied" column of Table 4). From them, the
  clock a core needs for 40 and 100 Gb/s at each size at one instruction a cycle (the
  seed's RISC), with the seed's Tables 3 and 4 beside.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import C
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from benchmarks.common.peers import bench_cpu, pkg_config, setup_dpdk
from benchmarks.common.spread import spread
from offlow.cbuild import build_exe
from offlow.errors import OfflowError
from offlow.lso import sends as gen
from offlow.paths import DATA
from offlow.planner.model import clock_needed_mhz

SETS = ("base", "gnu", "native", "werror")
MTUS = (512, 1024, 1500)
PROTOS = ("tcp", "udp")
KINDS = ("ssm", "bom", "com", "eom")
WIRE = 38  # bytes a packet takes on the wire beyond its IP packet: Ethernet 14, FCS 4,
#            preamble and gap 20 (the seed's 8,127,438 packets/s at 1500 B and 100 Gb/s)
TARGET_RATIO, TARGET_GBPS = 1.0, 40.0

# The seed's tables (University Bulletin 19(2), 2017): Table 2, RISC instructions per
# packet with the DMA at 2,115 MHz; Table 3 (= Table 4's in-place columns), the RISC
# clock in MHz for 40 / 100 Gb/s; Table 4's other columns, the RISC copying headers.
SEED_T2 = {"tcp": {"ssm": (18, 15, 20), "bom": (23, 20, 24), "com": (14, 11, 16),
                   "eom": (15, 11, 17)},
           "udp": {"ssm": (8, 8, 22), "bom": (23, 20, 25), "com": (13, 11, 16),
                   "eom": (13, 11, 16)}}  # at 1500, 1024, 512 B
SEED_T3 = {40: {1500: 60, 1024: 87, 512: 170}, 100: {1500: 148, 1024: 216, 512: 423}}
SEED_T4_COPIED = {40: {1500: 125, 1024: 182, 512: 357}, 100: {1500: 313, 1024: 455, 512: 893}}


@dataclass(frozen=True)
class Sweep:
    sends: int             # 64 KB sends per protocol
    reps: int
    min_time: float        # seconds per repetition
    move_sizes: tuple[int, ...]  # IP MTUs of the DMA/PIO sweep
    count_sends: int       # sends per callgrind run


FULL = Sweep(sends=32, reps=7, min_time=0.2, move_sizes=(256, 512, 1024, 1500, 4000, 9000),
             count_sends=8)
QUICK = Sweep(sends=8, reps=3, min_time=0.05, move_sizes=(512, 1500, 9000), count_sends=2)


def build_offlow() -> Path:
    return build_exe("bench_lso", [C / "bench_lso.c", C / "lso_bench.c"], ["lso"], SETS,
                     includes=[C])


def build_dpdk() -> Path:
    cflags, libs = pkg_config("--cflags"), pkg_config("--libs")
    if cflags is None or libs is None:
        raise OfflowError("pkg-config does not find libdpdk")
    # DPDK's flags first: ours override them (its -march=corei7)
    return build_exe("bench_dpdk_gso", [C / "bench_dpdk_gso.c", C / "lso_bench.c"],
                     ["lso"], SETS, includes=[C], peer=cflags.split(), link=libs.split())


def write_inputs(work: Path, sends: int) -> dict[str, Path]:
    """64 KB sends of the BGP table's bytes, TCP/IPv4 and UDP/IPv4 (the handshake and
    the pure ACKs left out: each frame a send of 65,000 bytes)."""
    table = DATA / "bgp-full-table.txt.gz"
    if not table.is_file():
        raise OfflowError(f"{table}: not found (the shared data; $OFFLOW_DATA names it)")
    data = table.read_bytes()[:sends * gen.SEND_MAX]
    out = {}
    for proto in PROTOS:
        frames = [f for f in gen.stream_sends(data, proto) if len(f) > 1514]
        out[proto] = work / f"{proto}.pcap"
        gen.write_pcap(out[proto], frames)
    return out


def _json(cmd: list[str], what: str, timeout: float = 600) -> dict[str, Any]:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise OfflowError(f"{what} failed (exit {res.returncode}): "
                          f"{' '.join(res.stderr.strip().splitlines()[-3:])}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def rates(exe: Path, dpdk: Path | None, inputs: dict[str, Path], sw: Sweep,
          cpu: int) -> list[dict[str, Any]]:
    """Every (protocol, MTU, checksums, move) row: offlow beside rte_gso."""
    rows = []
    for proto in PROTOS:
        for mtu in MTUS:
            for offload in (1, 0):
                for move in ("place", "pio"):
                    row: dict[str, Any] = {"proto": proto, "mtu": mtu, "move": move,
                                           "checksums": "offloaded" if offload else "computed"}
                    if dpdk is not None:
                        d = _json([str(dpdk), "rate", str(inputs[proto]), str(mtu), str(offload),
                                   move, str(sw.reps), str(sw.min_time), str(cpu)],
                                  "bench_dpdk_gso")
                        reps = d["reps"]
                        row.update(version=d["version"], packets=d["packets"]["offlow"],
                                   same_count=d["packets"]["offlow"] == d["packets"]["rte_gso"]
                                   and d["bytes"]["offlow"] == d["bytes"]["rte_gso"])
                        ours = [r["offlow"] for r in reps]
                        peer = [r["rte_gso"] for r in reps]
                        row["rte_gso_mpps"] = spread([p[0] / 1e6 for p in peer])
                        row["rte_gso_gbps"] = spread([p[1] / 1e9 for p in peer])
                        row["ratio"] = spread([o[0] / p[0] for o, p in zip(ours, peer,
                                                                            strict=True)])
                    else:
                        d = _json([str(exe), "rate", str(inputs[proto]), str(mtu), str(offload),
                                   move, str(sw.reps), str(sw.min_time), str(cpu), "-1"],
                                  "bench_lso")
                        ours = d["pps"]
                        row["packets"] = d["packets"]
                    row["offlow_mpps"] = spread([o[0] / 1e6 for o in ours])
                    row["offlow_gbps"] = spread([o[1] / 1e9 for o in ours])
                    rows.append(row)
    return rows


def move_sweep(exe: Path, inputs: dict[str, Path], sw: Sweep, cpu: int,
               dma_cpu: int) -> dict[str, Any]:
    """PIO beside DMA over payload sizes (TCP, checksums offloaded)."""
    rows = []
    for mtu in sw.move_sizes:
        row: dict[str, Any] = {"mtu": mtu, "payload": mtu - 40}
        for move in ("pio", "dma"):
            d = _json([str(exe), "rate", str(inputs["tcp"]), str(mtu), "1", move, str(sw.reps),
                       str(sw.min_time), str(cpu), str(dma_cpu)], "bench_lso")
            row[f"{move}_mpps"] = spread([p[0] / 1e6 for p in d["pps"]])
            row[f"{move}_gbps"] = spread([p[1] / 1e9 for p in d["pps"]])
        rows.append(row)
    faster = [r["payload"] for r in rows
              if r["dma_mpps"]["median"] >= r["pio_mpps"]["median"]]
    return {"rows": rows, "crossover_payload": min(faster) if faster else None,
            "dma_cpu": dma_cpu}


def _inclusive(path: Path) -> dict[str, int]:
    """Inclusive instruction counts per function from a callgrind output."""
    res = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                          str(path)], capture_output=True, text=True, timeout=300)
    out: dict[str, int] = {}
    for line in res.stdout.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*:(\w+)\s", line)
        if m:
            out[m.group(2)] = max(out.get(m.group(2), 0), int(m.group(1).replace(",", "")))
    return out


def _callgrind(exe: Path, work: Path, path: Path, mtu: int, move: str,
               offload: str) -> tuple[dict[str, Any], dict[str, int]]:
    """bench_lso count under callgrind: its counts and the inclusive instructions per
    function."""
    cg = work / f"cg-{path.stem}-{move}-{offload}-{mtu}.out"
    res = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}",
                          str(exe), "count", str(path), str(mtu), offload, move],
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise OfflowError(f"callgrind on bench_lso failed: {res.stderr[-500:]}")
    return json.loads(res.stdout.strip().splitlines()[-1]), _inclusive(cg)


def instructions(exe: Path, work: Path, sw: Sweep) -> dict[str, Any]:
    """Per protocol, method and MTU: instructions per packet of each message kind (64 KB
    sends for BOM, COM, EOM; sends of 400 bytes for SSM) and per packet overall for a
    64 KB send (what ofl_lso_nic_begin and ofl_lso_nic_next run, over its packets)."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        return {"skipped": "valgrind is not installed"}
    table = (DATA / "bgp-full-table.txt.gz").read_bytes()[:sw.count_sends * gen.SEND_MAX]
    out: dict[str, Any] = {}
    for proto in PROTOS:
        big, small = work / f"count-{proto}.pcap", work / f"count-{proto}-ssm.pcap"
        gen.write_pcap(big, [f for f in gen.stream_sends(table, proto) if len(f) > 1514])
        gen.write_pcap(small, [f for f in gen.stream_sends(table[:8_000], proto, large=400)
                               if len(f) > 400])
        base = 0 if proto == "tcp" else len(KINDS) + 1
        for method, move, offload in (("in place", "place", "1"), ("pio", "pio", "1"),
                                      ("pio, checksums", "pio", "0")):
            for mtu in MTUS:
                counts, inc = _callgrind(exe, work, big, mtu, move, offload)
                per_kind: dict[str, float | None] = {}
                for k, kind in enumerate(KINDS):
                    n = counts["kinds"][base + k]
                    per_kind[kind] = round(inc[f"ofl_lso_{kind}"] / n, 1) if n and \
                        f"ofl_lso_{kind}" in inc else None
                if method == "in place":
                    c2, inc2 = _callgrind(exe, work, small, mtu, move, offload)
                    n = c2["kinds"][base]
                    per_kind["ssm"] = round(inc2.get("ofl_lso_ssm", 0) / n, 1) if n else None
                total = inc.get("ofl_lso_nic_next", 0) + inc.get("ofl_lso_nic_begin", 0)
                out.setdefault(proto, {}).setdefault(method, {})[mtu] = {
                    "kinds": per_kind, "per_packet": round(total / counts["packets"], 1),
                    "packets": counts["packets"], "sends": counts["sends"]}
    return out


def clock_mhz(ins: float, gbps: int, mtu: int) -> float:
    """The clock for `gbps` of packets of IP size `mtu` at one instruction a cycle."""
    return clock_needed_mhz(ins, 1.0, gbps, mtu + WIRE)


def _fmt(x: dict[str, float] | None, digits: int = 2) -> str:
    if not x:
        return "-"
    return f"{x['median']:.{digits}f} ({x['min']:.{digits}f}-{x['max']:.{digits}f})"


def report(doc: dict[str, Any]) -> str:
    lines = []
    m = doc["machine"]
    lines.append(machine_line(m, doc['features']) + f"; busy before: {doc['busy']}")
    lines.append(f"peer: {doc['peer']}")
    lines.append(f"input: {doc['input']}")
    lines.append("")
    lines.append("segmentation per core (median and min-max over repetitions; ratio per "
                 "repetition, offlow / rte_gso)")
    head = ["proto", "MTU", "checksums", "offlow", "offlow Mpps", "offlow Gb/s",
            "rte_gso Mpps", "rte_gso Gb/s", "ratio"]
    rows = [head]
    for r in doc["rates"]:
        rows.append([r["proto"], str(r["mtu"]), r["checksums"], r["move"],
                     _fmt(r["offlow_mpps"]), _fmt(r["offlow_gbps"], 1),
                     _fmt(r.get("rte_gso_mpps")), _fmt(r.get("rte_gso_gbps"), 1),
                     _fmt(r.get("ratio"))])
    lines += columns(rows)
    mv = doc["move"]
    lines.append("")
    lines.append(f"payload moved by the core (PIO) or the copy engine (DMA, its thread on CPU "
                 f"{mv['dma_cpu']}); TCP, checksums offloaded")
    rows = [["MTU", "payload", "PIO Mpps", "DMA Mpps", "PIO Gb/s", "DMA Gb/s"]]
    for r in mv["rows"]:
        rows.append([str(r["mtu"]), str(r["payload"]), _fmt(r["pio_mpps"]), _fmt(r["dma_mpps"]),
                     _fmt(r["pio_gbps"], 1), _fmt(r["dma_gbps"], 1)])
    lines += columns(rows)
    cross = mv["crossover_payload"]
    lines.append("crossover: " + (f"DMA from {cross} B of payload" if cross else
                                  "none: PIO is as fast or faster at every size measured"))
    ins = doc["instructions"]
    if "skipped" in ins:
        lines.append(f"\ninstruction counts skipped: {ins['skipped']}")
    else:
        lines += _instruction_tables(ins)
    lines.append("")
    lines += doc["verdicts"]
    return "\n".join(lines)


def _instruction_tables(ins: dict[str, Any]) -> list[str]:
    lines = ["", "instructions per packet by message kind (callgrind; offlow in place, "
             "checksums offloaded | the seed's Table 2, RISC instructions)"]
    rows = [["proto", "kind", *(f"{m} B" for m in reversed(MTUS)),
             *(f"seed {m}" for m in reversed(MTUS))]]
    for proto in PROTOS:
        for kind in KINDS:
            ours = [ins[proto]["in place"][m]["kinds"][kind] for m in reversed(MTUS)]
            rows.append([proto, kind.upper(), *(f"{x:.0f}" if x is not None else "-"
                                               for x in ours),
                         *(str(v) for v in SEED_T2[proto][kind])])
    lines += columns(rows)
    lines.append("")
    lines.append("per packet overall (every instruction the device runs for a 64 KB send, "
                 "over its packets) and the clock for 40 / 100 Gb/s at one instruction a "
                 "cycle, beside the seed's Tables 3 and 4")
    rows = [["proto", "method", "MTU", "inst/pkt", "MHz 40G", "MHz 100G", "seed MHz 40G",
             "seed MHz 100G"]]
    for proto in PROTOS:
        for method, seed in (("in place", SEED_T3), ("pio", SEED_T4_COPIED),
                             ("pio, checksums", None)):
            for mtu in reversed(MTUS):
                n = ins[proto][method][mtu]["per_packet"]
                rows.append([proto, method, str(mtu), f"{n:.0f}", f"{clock_mhz(n, 40, mtu):.0f}",
                             f"{clock_mhz(n, 100, mtu):.0f}",
                             str(seed[40][mtu]) if seed else "-",
                             str(seed[100][mtu]) if seed else "-"])
    lines += columns(rows)
    lines.append("(seed: in place = its header template updated in the send buffer, the DMA "
                 "moving the payload; pio = its RISC moving the headers, Table 4)")
    return lines


def columns(rows: list[list[str]]) -> list[str]:
    """Rows of cells as aligned text (the first two columns left, the rest right)."""
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(c.ljust(w[i]) if i < 2 else c.rjust(w[i])
                             for i, c in enumerate(r)).rstrip())
        if k == 0:
            out.append("  ".join("-" * x for x in w))
    return out


def verdicts(doc: dict[str, Any]) -> list[str]:
    """The targets, reported (never enforced)."""
    out = []
    have = [r for r in doc["rates"] if "ratio" in r]
    for move in ("place", "pio"):
        rs = [r for r in have if r["move"] == move]
        if rs:
            worst = min(rs, key=lambda r: r["ratio"]["median"])
            ok = all(r["ratio"]["median"] >= TARGET_RATIO for r in rs)
            out.append(f"target >= {TARGET_RATIO:.1f}x rte_gso per core, offlow {move}: "
                       f"{'meets' if ok else 'misses'} (worst {worst['ratio']['median']:.2f}x: "
                       f"{worst['proto']} MTU {worst['mtu']}, checksums {worst['checksums']})")
    if not have:
        out.append(f"target >= {TARGET_RATIO:.1f}x rte_gso: not measured ({doc['peer']})")
    big = [r for r in doc["rates"] if r["mtu"] == 1500]
    for move in ("place", "pio"):
        rs = [r for r in big if r["move"] == move]
        worst = min(rs, key=lambda r: r["offlow_gbps"]["median"])
        ok = worst["offlow_gbps"]["median"] >= TARGET_GBPS
        out.append(f"target >= {TARGET_GBPS:.0f} Gb/s of output per core at 1500 B, offlow "
                   f"{move}: {'meets' if ok else 'misses'} (worst "
                   f"{worst['offlow_gbps']['median']:.1f} Gb/s: {worst['proto']}, checksums "
                   f"{worst['checksums']})")
    return out


def run(quick: bool = False, out_json: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    sw = QUICK if quick else FULL
    exe = build_offlow()
    version, why = setup_dpdk()
    dpdk = None
    if version:
        try:
            dpdk = build_dpdk()
        except OfflowError as e:
            why = str(e)
    cpu = bench_cpu()
    ncpu = os.cpu_count() or 1
    busy = quiet_check(1.0)
    with tempfile.TemporaryDirectory(prefix="offlow-bench-lso-") as d:
        work = Path(d)
        inputs = write_inputs(work, sw.sends)
        doc: dict[str, Any] = {
            "machine": machine(), "features": cpu_features(), "busy": busy,
            "peer": f"DPDK {version} rte_gso" if dpdk else f"rte_gso not measured: {why}",
            "input": f"{sw.sends} sends of 65,000 bytes (the BGP table's bytes) per protocol, "
                     "TCP/IPv4 and UDP/IPv4, the largest MSS each MTU allows; one core "
                     f"(CPU {cpu})",
            "sweep": sw.__dict__}
        doc["rates"] = rates(exe, dpdk, inputs, sw, cpu)
        doc["move"] = move_sweep(exe, inputs, sw, cpu, (cpu + 1) % ncpu)
        doc["instructions"] = instructions(exe, work, sw)
    doc["verdicts"] = verdicts(doc)
    print(report(doc))
    if out_json:
        Path(out_json).write_text(json.dumps(doc, indent=2))
    return doc
