"""Run-time balance (issue 30 item 7, NBA's adaptive load balancing): a segment on the
emulated NIC and the host at once, its split moved towards balance while running, beside
every static split of it, on a workload whose mix changes during the run.

The segment does one of two kinds of work per packet: frames under 200 B take `light`
(integer work), the others `heavy` (hashing work), about the same time on this host. The
NIC runs at the LiquidIO CN23xx profile's speed (offlow run --profile: integer work at
0.22 of this host, hashing at 0.6), so the share of packets the NIC should take moves
when the mix does. The capture is a phase of small frames, then one of large frames,
then small again. Each design's rate is the packets over the run's elapsed time (the
slowest core's); the ratio printed is the adaptive rate over the best static split's,
all measured in this run, with a verdict line. The balance point of each phase from the
profile (the NIC's speed at that kind of work over one plus it: where both sides finish
together, the host's reading and writing aside) is printed beside the table: the phases'
best static splits differ, which is what an adaptive split can win by. The adaptive runs
set their share from each side's packets per busy CPU-second (`time=cpu`) or per busy
wall-second (`time=wall`: also the time a side was kept from a CPU while it had work);
profile-scaled runs count both (docs/planner.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dpkt

from benchmarks.common.machine import machine, machine_line, quiet_check
from offlow import Element, Port, Program, Sink, Source, runner
from offlow.planner.profile import load as load_profile

PROFILE = "liquidio-cn23xx"
SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 1.0)  # the NIC's share in the static splits
ADAPTIVE = ("cpu", "wall")  # the adaptive runs: the sides' rates per busy CPU or wall ns
_SUM = r"""
    /* a keyed running sum over the payload, ROUNDS times, written over its first bytes */
    uint32_t acc = 2166136261u;
    for (uint32_t r = 0; r < rounds; r++)
        for (uint32_t i = 14; i < pkt->len; i++)
            acc = (acc ^ pkt->data[i]) * 16777619u;
    if (pkt->len >= 18)
        for (int b = 0; b < 4; b++)
            pkt->data[14 + b] = (uint8_t)(acc >> (8 * b));
"""


class Pick(Element):
    outputs = (Port("small"), Port("large"))
    body = "if (pkt->len < 200)\n    EMIT(small);\nEMIT(large);"


class Light(Element):
    params = {"rounds": "uint32_t"}
    body = _SUM


class Heavy(Element):
    work = "hash"
    params = {"rounds": "uint32_t"}
    body = _SUM


def program(small: int, large: int) -> Program:
    """The balanced segment, rounds set so each kind costs about the same here."""
    p = Program("balance_bench")
    # the default rings (1,024 entries, a doorbell every 32): the rates need no
    # back-pressure within an epoch (the climb did: it ran with 64 entries, a doorbell
    # every 8), and fewer hand-offs cost less on a shared machine
    p.set_queues(ring_size=1024, batch=32)
    src, pick, out = Source("rx"), Pick("pick"), Sink("tx")
    light = Light("light", rounds=max(1, 2400 // (small - 14)))
    heavy = Heavy("heavy", rounds=max(1, 2400 // (large - 14)))
    src >> pick
    pick["small"] >> light >> out
    pick["large"] >> heavy >> out
    p.segment("rx", [src], device="host", cores=[0])
    p.segment("work", [pick, light, heavy], device=["nic", "host"], cores=[0])
    p.segment("tx", [out], device="host", cores=[0])
    return p


def write_capture(path: Path, phases: list[tuple[int, int]]) -> int:
    """UDP frames: (count, frame size) per phase, in order. Returns the frames written."""
    n = 0
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)  # (dpkt: 1500, which cuts longer frames)
        for count, size in phases:
            for i in range(count):
                payload = (n + i).to_bytes(8, "big") * ((size - 42) // 8 + 1)
                udp = dpkt.udp.UDP(sport=1000 + i % 64, dport=9000, data=payload[:size - 42])
                udp.ulen = len(udp)
                ip = dpkt.ip.IP(src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02", p=17,
                                data=udp, ttl=64)
                ip.len = len(ip)
                eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, data=ip)
                w.writepkt(bytes(eth), ts=(n + i) * 1e-6)
            n += count
    return n


def _rate(b: runner.Build, o: runner.RunOptions) -> tuple[float | None, dict, str]:
    res = runner.run(b, o)
    if not res.ok:
        return None, {}, "; ".join(res.errors[:2])
    elapsed = max(c["elapsed_ns"] for s in res.stats.values() for c in s["cores"])
    sent = sum(c["pkts_in"] for s in res.stats.values() for c in s["cores"]
               if c["segment"] == "rx")
    bal = res.stats["host"].get("tables", {}).get("work_balance", {})
    return sent / elapsed * 1e3 if elapsed else None, bal, ""


def measure(packets: int, reps: int, tmp: Path, progress: bool = True) -> dict:
    """Every design `reps` times over one capture; the best rate of each."""
    small, large = 128, 512
    cap = tmp / "balance_mix.pcap"
    third = packets // 3
    total = write_capture(cap, [(third, small), (third, large), (third, small)])
    prog = program(small, large)
    designs: list[tuple[str, tuple[str, ...]]] = [
        (f"static {s:.1f}", ("work_balance.adapt=off", f"work_balance.share={s}"))
        for s in SHARES]
    designs += [(f"adaptive {t}", ("work_balance.epoch_us=20000", f"work_balance.time={t}"))
                for t in ADAPTIVE]
    rows = []
    for name, opts in designs:
        o = runner.RunOptions(input=cap, opts=opts, profile=PROFILE, timeout=600)
        b = runner.build_for(prog, o)
        rates, bals, errors = [], [], []
        for _ in range(reps):
            if progress:
                print(f"  balance: {name}", flush=True)
            r, bal, err = _rate(b, o)
            if r is None:
                errors.append(err)
                continue
            rates.append(r)
            bals.append(bal)
        rows.append({"design": name, "mpps": max(rates) if rates else None, "runs": rates,
                     "mean_share": bals[0].get("mean_share") if bals else None,
                     "errors": errors[:2]})
    static = [r for r in rows if r["design"].startswith("static") and r["mpps"]]
    best = max(static, key=lambda r: r["mpps"]) if static else None
    both = [r for r in static if 0 < r["mean_share"] < 1]
    best_both = max(both, key=lambda r: r["mpps"]) if both else None
    ratios = {}
    for r in rows[len(SHARES):]:
        ok = best and r["mpps"]
        ratios[r["design"]] = {
            "best": r["mpps"] / best["mpps"] if ok else None,
            "split": r["mpps"] / best_both["mpps"] if ok and best_both else None}
    speed = load_profile(PROFILE).speed
    return {"packets": total, "phases": f"{third} x {small} B, {third} x {large} B, "
            f"{third} x {small} B", "profile": PROFILE, "reps": reps, "rows": rows,
            "best_static": best["design"] if best else None, "ratios": ratios,
            "best_split": best_both["design"] if best_both else None,
            "balance_points": {f"{small} B ({Light.work or 'integer'})":
                               speed["integer"] / (1 + speed["integer"]),
                               f"{large} B ({Heavy.work})": speed["hash"] / (1 + speed["hash"])}}


def format_report(res: dict) -> str:
    """The designs as a table, with the adaptive over the best static ratio."""
    lines = [f"run-time balance: segment on nic ({res['profile']}) and host, "
             f"{res['packets']:,} packets ({res['phases']}), best of {res['reps']}",
             f"{'design':<14} {'Mpps':>8}  {'NIC share (mean)':>16}  runs"]
    for r in res["rows"]:
        mpps = f"{r['mpps']:.4f}" if r["mpps"] else "failed"
        share = f"{r['mean_share']:.3f}" if r["mean_share"] is not None else "-"
        runs = " ".join(f"{x:.4f}" for x in r["runs"]) + (
            f" error: {r['errors'][0]}" if r["errors"] else "")
        lines.append(f"{r['design']:<14} {mpps:>8}  {share:>16}  {runs}")
    points = ", ".join(f"{k} {v:.3f}" for k, v in res["balance_points"].items())
    lines.append(f"NIC share at balance per phase, from the profile: {points}")
    for name, q in res["ratios"].items():
        if not q["best"]:
            lines.append(f"verdict: {name}: none (a design failed)")
            continue
        split = (f", {q['split']:.2f}x the best static split using both sides "
                 f"({res['best_split']})" if q["split"] else "")
        lines.append(f"{name} / best static ({res['best_static']}): {q['best']:.2f}x{split}")
    wins = [f"{n} {'WINS over' if q['best'] > 1 else 'LOSES to'} it ({q['best']:.2f}x)"
            for n, q in res["ratios"].items() if q["best"]]
    if wins:
        lines.append("verdict against the best static split: " + "; ".join(wins))
    return "\n".join(lines)


def run(quick: bool = False, out_json: Path | None = None) -> dict:
    """`offlow bench balance`: print the table and the machine, write JSON."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="offlow-bench-balance-") as tmp:
        busy = quiet_check(1.0)
        res = measure(30_000 if quick else 300_000, 1 if quick else 3, Path(tmp))
    res["machine"], res["busy_before"], res["load"] = machine(), busy, os.getloadavg()
    print(format_report(res))
    print(machine_line(res["machine"]) + f"; busy before: {busy}; load {res['load']}")
    if out_json:
        out_json.write_text(json.dumps(res, indent=1))
        print(f"wrote {out_json}")
    return res
