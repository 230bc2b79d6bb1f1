"""`offlow bench xdp --e2e`: the end-to-end half. Packets per second through a veth
pair, the same program (tests/programs/xdp_ttl.py) placed three ways, one after the
other in one run, beside the generator alone:

- "generator alone" (the ceiling): benchmarks/c/veth_gen.c sends 64-byte IPv4 frames
  into one end of the pair (AF_PACKET, sendmmsg, the qdisc bypassed) with nothing
  attached to the other; the kernel drops them in its stack;
- "xdp": the program attached to the other end in XDP (`offlow run --iface`), each
  frame sent back by XDP_TX;
- "xdp+host": the same program with its path split (tests/programs/xdp_ttl_split.py):
  its first segment in XDP (`--iface`), the rest in the host process, each frame sent
  up through an AF_XDP socket (copy mode) with its live fields in XDP metadata, and
  written back out of the same end by the host's sink (an AF_PACKET port);
- "nic", "host": the program on the emulated NIC process or on the host, reading and
  writing the other end through an AF_PACKET port (`--port afpacket:IFACE`).

Each row counts the frames the program's source took in while the generator ran,
over the generator's seconds. The generator starts once every process of the run
answers for its counters (attached, its port's socket bound), and the run is stopped
(as by Ctrl-C) once the generator is done and the counters have stopped moving for
SETTLED seconds: every frame the generator got in has been taken and passed on. The
run's --duration stays the generator's seconds + 6 s, the bound when the counters
never settle. The pair lives in a network namespace the bench makes
and removes. Root is needed. In generic mode the kernel runs XDP in the sender's
softirq, on the sender's CPU: the xdp row shares a CPU with the generator, as the
ceiling does; the nic and host rows have processes of their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import C, output
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from offlow import cbuild, live, windowfile
from offlow.errors import OfflowError
from offlow.netsum import csum
from offlow.runner import progress_totals

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "programs" / "xdp_ttl.py"
SPLIT = ROOT / "tests" / "programs" / "xdp_ttl_split.py"  # the same, edge -> app
OFFLOW = [sys.executable, "-m", "offlow.cli"]
GEN = [C / "veth_gen.c"]
CEILING, PLACEMENTS = "generator alone", ("xdp", "xdp+host", "nic", "host")
IN, PEER = "ofl-e2e-a", "ofl-e2e-b"
SETTLED = 1.0  # seconds the counters stay still, the generator done: the row ends
STARTED = 600.0  # seconds `offlow run` has to build and start its processes (a cold cache)
UP = 30.0  # seconds the processes have to answer once the run's window file is written


def frames() -> list[bytes]:
    """64-byte IPv4/UDP frames (60 without the FCS) to 8 destinations, TTL 64, with a
    good header checksum: forwarded by the program (TTL down, DSCP set)."""
    out = []
    for k in range(8):
        ip = bytearray(bytes.fromhex("4500002e000040004011") + b"\0\0" +
                       bytes([192, 0, 2, 1, 198, 51, 100, k + 1]))
        ip[10:12] = csum(bytes(ip)).to_bytes(2, "big")
        udp = bytes.fromhex("00070009001a0000") + b"z" * 18
        out.append(bytes.fromhex("020000000002" "020000000001" "0800") + bytes(ip) + udp)
    return out


def _sh(ns: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]


def make_pair(ns: str) -> None:
    """A namespace with the veth pair up and IPv6 off (no chatter on the pair)."""
    subprocess.run(["ip", "netns", "add", ns], check=True)
    for setting in ("all", "default"):
        subprocess.run(_sh(ns, "sysctl", "-qw", f"net.ipv6.conf.{setting}.disable_ipv6=1"),
                       check=True)
    subprocess.run(["ip", "-n", ns, "link", "add", "name", IN, "type", "veth", "peer", "name",
                    PEER], check=True)
    for end in (IN, PEER):
        subprocess.run(["ip", "-n", ns, "link", "set", end, "up"], check=True)


def generate(ns: str, gen: Path, seconds: float) -> dict:
    """The generator's count: frames sent into PEER for `seconds`."""
    res = subprocess.run(_sh(ns, str(gen), PEER, str(seconds), *(f.hex() for f in frames())),
                         capture_output=True, text=True, timeout=seconds + 60)
    if res.returncode != 0:
        raise OfflowError(f"veth_gen failed: {res.stderr.strip()}")
    return json.loads(res.stdout)


def placement(ns: str, gen: Path, where: str, seconds: float) -> dict:
    """One row: `offlow run` of the program placed at `where` on the pair's IN end, the
    generator on PEER for `seconds` once the program is attached or its port open."""
    program = SPLIT if where == "xdp+host" else PROGRAM
    args = ["--set", f"edge.device={where.split('+')[0]}"]
    if where == "xdp+host":  # (the host's sink writes back out of IN)
        args += ["--iface", IN, "--port", f"back=afpacket:{IN}"]
    else:
        args += ["--iface", IN] if where == "xdp" else ["--port", f"afpacket:{IN}"]
    with tempfile.TemporaryDirectory(prefix="offlow-bench-e2e-") as folder:
        named = Path(folder) / "window.json"
        run = subprocess.Popen(_sh(ns, *OFFLOW, "run", str(program), *args, "--duration",
                                   str(seconds + 6), "--json", "--window-file", str(named)),
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        try:
            started = _started(named, run, where)
            window = started.window
            if not _answering(window, set(started.devices), run):
                if run.poll() is None:
                    raise OfflowError(f"offlow run ({where}): its processes did not answer "
                                      f"for their counters within {UP:g} s")
                raise OfflowError(f"offlow run ({where}) ended early: "
                                  f"{run.communicate()[1]}")
            g = generate(ns, gen, seconds)
            if _settled(window, run):
                run.send_signal(signal.SIGINT)  # (it stops cleanly: its counts are kept)
            out, err = run.communicate(timeout=seconds + 120)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    if run.returncode != 0:
        raise OfflowError(f"offlow run ({where}) failed: {err.strip()}")
    s = json.loads(out)
    el = s["elements"]
    took = el.get("wire", {}).get("in", 0)
    back = el.get("back", {}).get("in", 0) - el.get("back", {}).get("drop", 0)
    return {"row": where, "sent": g["sent"], "refused": g["refused"], "seconds": g["seconds"],
            "took": took, "forwarded": back, "mpps": took / g["seconds"] / 1e6}


def _started(named: Path, run: subprocess.Popen, where: str) -> windowfile.RunWindow:
    """What the row's `offlow run` writes in its window file `named` once its processes
    are started (`ip netns exec` execs offlow: the pid it names is the run's)."""
    try:
        return windowfile.wait_for(named, run, STARTED)
    except OfflowError as e:
        if run.poll() is None:
            raise OfflowError(f"offlow run ({where}): {e}") from e
        raise OfflowError(f"offlow run ({where}) ended early: {run.communicate()[1]}") from e


def _totals(window: Path) -> dict[str, dict] | None:
    """The run's live counters (device -> its stats), or None once it has ended."""
    try:
        return live.read(window, timeout=1.0)
    except OfflowError:
        return None


def _answering(window: Path, devices: set[str], run: subprocess.Popen) -> bool:
    """Wait until every process of the run answers for its counters: it has attached
    its program, bound its port's socket, and its cores run (live.h: the thread that
    answers starts just before them). False when the run ends first."""
    deadline = time.monotonic() + UP
    while run.poll() is None and time.monotonic() < deadline:
        stats = _totals(window)
        if stats is not None and devices <= set(stats):
            return True
        time.sleep(0.05)
    return False


def _settled(window: Path, run: subprocess.Popen) -> bool:
    """Wait (the generator done) until the frames read, forwarded and dropped by the
    run have not moved for SETTLED seconds. False when the run ended first (its
    --duration)."""
    last, since = None, time.monotonic()
    while run.poll() is None:
        stats = _totals(window)
        if stats is None:
            return False
        now, totals = time.monotonic(), progress_totals(stats)
        if totals != last:
            last, since = totals, now
        elif now - since >= SETTLED:
            return True
        time.sleep(0.1)
    return False


def measure(seconds: float) -> dict:
    if os.geteuid() != 0:
        raise OfflowError("offlow bench xdp --e2e needs root (a network namespace, XDP)")
    gen = cbuild.build_exe("veth_gen", GEN, sets=cbuild.TOOL)
    info = machine()
    info["quiet"] = quiet_check(0.5)
    ns = f"ofl-bench-e2e-{os.getpid()}"
    make_pair(ns)
    rows = []
    try:
        g = generate(ns, gen, seconds)
        rows.append({"row": CEILING, "sent": g["sent"], "refused": g["refused"],
                     "seconds": g["seconds"], "took": g["sent"], "forwarded": 0,
                     "mpps": g["sent"] / g["seconds"] / 1e6})
        rows += [placement(ns, gen, where, seconds) for where in PLACEMENTS]
    finally:
        subprocess.run(["ip", "netns", "del", ns])
    by = {r["row"]: r["mpps"] for r in rows}
    ratios = {f"{x}/{p}": by[x] / by[p] for x in ("xdp", "xdp+host") for p in ("nic", "host")
              if by[p]}
    ratios["xdp/generator alone"] = by["xdp"] / by[CEILING] if by[CEILING] else 0.0
    return {"benchmark": "xdp-e2e", "machine": info, "features": cpu_features(),
            "program": str(PROGRAM.relative_to(ROOT)), "frame_bytes": 60,
            "seconds": seconds, "rows": rows, "ratios": ratios}


def format_report(res: dict) -> str:
    """The result as text: setup, machine, the rows, the ratios."""
    m = res["machine"]
    quiet = ", ".join(f"{k} {v:.0%}" for k, v in m.get("quiet", {}).items())
    out = [f"offlow bench xdp --e2e: {res['program']} through a veth pair, "
           f"{res['frame_bytes']}-byte frames, {res['seconds']} s per row",
           machine_line(m, res["features"]) + f"; busy before the run: {quiet}"]
    head = f"{'row':>16} | {'Mpps in':>8} | {'sent':>11} | {'took':>11} | {'forwarded':>11}"
    out += [head, "-" * len(head)]
    for r in res["rows"]:
        out.append(f"{r['row']:>16} | {r['mpps']:>8.3f} | {r['sent']:>11,} | {r['took']:>11,} "
                   f"| {r['forwarded']:>11,}")
    out.append("ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in res["ratios"].items()))
    out.append("(Mpps in: frames the program's source took in over the generator's seconds; "
               "the generator alone: frames the kernel took from it)")
    return "\n".join(out)


def plot(res: dict, path: Path) -> None:
    """Mpps per row, bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.barh([r["row"] for r in rows], [r["mpps"] for r in rows],
            color=["tab:gray"] + ["tab:blue"] * (len(rows) - 1))
    ax.invert_yaxis()
    ax.set_xlabel(f"Mpps ({res['frame_bytes']}-byte frames through a veth pair)")
    ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"offlow bench xdp --e2e: {res['program']} on {res['machine']['cpu']}",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool, out_json: str | os.PathLike[str] | None,
        out_png: str | os.PathLike[str] | None = None) -> dict:
    """Run it (--quick: 1 s per row, else 5 s), print the report, write JSON and plot."""
    res = measure(1.0 if quick else 5.0)
    print(format_report(res))
    output.save(res, out_json, out_png, plot)
    return res
