"""Instructions per packet of each forwarding thread in the ports sweep of `offlow bench
router` (benchmarks.router_ports): offlow's router, DPDK's l3fwd-lpm and the I/O
ceiling (DPDK's skeleton) on the same net_pcap replay, each under valgrind's callgrind.
Unlike Mpps on these shared CPUs, the count does not move with the load: it says what
each one spends per packet, and what the router adds over the ceiling.

Counted only inside each one's forwarding loop (`--toggle-collect`: offlow's segment
turn `ofl_turnv_all`, the skeleton's `lcore_main`, l3fwd's `lpm_main_loop`), so
start-up and table loading are left out. Packets: offlow's from its run's stats; the
peers' as the number of calls to net_pcap's receive function (from their loop) times
the burst (32): an
endless replay always fills the burst (callgrind's stop comes late after a signal, so
a telemetry count taken before it falls short). The check that every burst was full:
offlow's call count times 32 equals its stats' count, and l3fwd's per-four-packet
step (`processx4_step3`) runs 8 times per receive call.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from benchmarks.router_l3fwd import L3fwd

BURST = 32  # what the skeleton and l3fwd ask of each rx_burst, and offlow's source
RX = "librte_net_pcap"  # the receiving PMD, whose calls count the peers' bursts
LOOPS = {"offlow": "ofl_turnv_all", "basicfwd": "lcore_main", "l3fwd": "lpm_main_loop"}
# where each one calls the PMD's receive function (rte_eth_rx_burst is inline)
RX_CALLERS = {"offlow": "src_next", "basicfwd": "lcore_main", "l3fwd": "lpm_main_loop"}


def available() -> str | None:
    """Why the count cannot run here, or None."""
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: valgrind)"
    return None


def wrap(name: str, out: Path) -> list[str]:
    """The valgrind command that counts `name`'s forwarding loop into `out`."""
    return ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}",
            f"--toggle-collect={LOOPS[name]}"]


def _annotate(out: Path, *more: str) -> str:
    res = subprocess.run(["callgrind_annotate", "--threshold=100", *more, str(out)],
                         capture_output=True, text=True)
    return res.stdout


def total(out: Path) -> int:
    """Instructions counted in callgrind output `out`."""
    m = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", _annotate(out))
    return int(m.group(1).replace(",", "")) if m else 0


def calls(out: Path, callee: str, caller: str) -> int:
    """Calls from functions named like `caller` into functions whose line in callgrind's
    caller tree names `callee` (a function or its object file)."""
    n, callers = 0, []
    for line in _annotate(out, "--tree=caller").splitlines():
        # a block: its callers "  1,234 (5.6%)  < caller (10,131x) [obj]", then "* callee"
        m = re.match(r"\s*[\d,]+ \(\s*[\d.]+%\)\s+<\s+(.*) \(([\d,]+)x\)", line)
        if m:
            callers.append((m.group(1), int(m.group(2).replace(",", ""))))
            continue
        m = re.match(r"\s*[\d,]+ \(\s*[\d.]+%\)\s+\*\s+(.*)", line)
        if m and callee in m.group(1):
            n += sum(k for name, k in callers if caller in name)
        if not line.strip() or m:
            callers = []
    return n


def peer_count(name: str, peer: L3fwd, out: Path, seconds: float) -> dict:
    """Run `peer` (an L3fwd or its skeleton, not yet started) under callgrind for
    `seconds` of forwarding: its instructions per packet."""
    peer.cmd = (peer.cmd[:2] + wrap(name, out) + peer.cmd[2:] if peer.cmd[0] == "stdbuf"
                else wrap(name, out) + peer.cmd)
    with peer:
        peer.wait_loop(timeout=600)  # (started under valgrind: slow)
        time.sleep(seconds)
        assert peer.proc is not None
        # stopped here, given the time valgrind takes to end and write its count under
        # load (the peer's own stop kills it after 10 s: no count); SIGTERM: the
        # skeleton has no handler and a shell's background job inherits SIGINT ignored
        peer.proc.send_signal(signal.SIGTERM)
        try:
            peer.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            return {"error": f"{name} did not end under callgrind within 300 s"}
    if not out.exists():
        return {"error": f"callgrind wrote no count for {name}"}
    bursts = calls(out, RX, RX_CALLERS[name])
    row = {"instructions": total(out), "packets": bursts * BURST, "rx_bursts": bursts}
    if name == "l3fwd":  # every burst full: 8 four-packet steps a burst
        row["full_bursts"] = calls(out, "processx4_step3", "") == bursts * BURST // 4
    row["per_packet"] = row["instructions"] / row["packets"] if row["packets"] else None
    return row


def offlow_count(out: Path, packets: int) -> dict:
    """offlow's forwarding thread from a run under `wrap("offlow", out)` that forwarded
    `packets` (its stats)."""
    ir, bursts = total(out), calls(out, RX, RX_CALLERS["offlow"])
    return {"instructions": ir, "packets": packets, "rx_bursts": bursts,
            "full_bursts": bursts * BURST == packets,
            "per_packet": ir / packets if packets else None}
