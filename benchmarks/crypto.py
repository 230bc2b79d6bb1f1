"""`offlow bench crypto`: the crypto elements' code beside OpenSSL per core, and the
active-NIC seed's Figure 6 (MD5 and Blowfish decryption partitioned over 1, 2, 4 device
cores).

- Per core (benchmarks/c/bench_crypto.c): the functions the element bodies call
  (ofl_md5, ofl_md5_chains, ofl_cbc_encrypt / _decrypt) beside libcrypto called directly
  (EVP with a context kept across packets, BF_cbc_encrypt) on the same random payloads,
  one message per payload, one pinned core, repetitions taking turns: MB/s of payload,
  median and spread, and the median of the per-repetition ratios. MD5 "per chain" is one
  chain (ofl_md5) beside OpenSSL's MD5; the K-chain digests beside the same MD5 show what
  interleaving buys on one core. Python's hashlib and `cryptography` (one call per
  payload, from Python) run on the same payloads where installed.
- Figure 6 (offlow run): an IPv4/UDP capture of Blowfish-CBC ciphertexts on one flow;
  the NIC reads it on core 0, a segment on 1, 2 or 4 more NIC cores computes each
  datagram's 4-chain MD5 (data-parallel) or decrypts it (an ordered core group, output in
  input order), the host counts. MB/s of payload through that segment and the speed-up
  over one core, beside the seed's 1.98x / 3.92x (MD5) and 3.45x (Blowfish, 4 cores).
  Rows with more busy threads than CPUs say "oversubscribed": on a 2-CPU machine every
  row is, and the speed-up then shows the cost of sharing CPUs, not the gain of cores.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dpkt

from benchmarks.common import C
from benchmarks.common.machine import cpu_features, machine, machine_line, quiet_check
from benchmarks.common.peers import bench_cpu
from benchmarks.common.spread import spread
from offlow import Program, Sink, Source, runner
from offlow.build import build
from offlow.cbuild import build_exe
from offlow.crypto.clib import KeyTable
from offlow.crypto.keys import FlowKey, key_table_text
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.crypto import CbcDecrypt, Md5Chains, cbc_keys
from offlow.errors import OfflowError
from offlow.report import summarize

TARGETS = {"aes_128_cbc_enc": 0.8, "aes_128_cbc_dec": 0.8, "md5": 0.9}
SEED_FIG6 = {"md5": {2: 1.98, 4: 3.92}, "blowfish": {4: 3.45}}
KEY = bytes(range(1, 17))
IV = bytes(range(16, 0, -1))


@dataclass(frozen=True)
class Sweep:
    sizes: tuple[int, ...]  # payload bytes
    count: int              # payloads per size (the set each rate loops over)
    seconds: float          # per repetition and side
    reps: int
    cores: tuple[int, ...]  # Figure 6
    datagrams: int          # per Figure 6 run (a capture looped)
    fig_reps: int


FULL = Sweep(sizes=(64, 1472), count=256, seconds=0.3, reps=5, cores=(1, 2, 4),
             datagrams=200_000, fig_reps=3)
QUICK = Sweep(sizes=(1472,), count=64, seconds=0.05, reps=2, cores=(1, 2),
              datagrams=5_000, fig_reps=1)


def per_core(sw: Sweep, cpu: int) -> list[dict[str, Any]]:
    """Every (operation, size) row: offlow beside libcrypto, and the Python peers."""
    exe = build_exe("bench_crypto", [C / "bench_crypto.c"], ["crypto"],
                    ("base", "optimize", "werror"))
    rows = []
    for size in sw.sizes:
        res = subprocess.run([str(exe), str(cpu), str(size), str(sw.count), str(sw.seconds),
                              str(sw.reps)], capture_output=True, text=True, timeout=600)
        if res.returncode != 0:
            raise OfflowError(f"bench_crypto failed (exit {res.returncode}): "
                              f"{res.stderr.strip()[-500:]}")
        out = json.loads(res.stdout)
        py = python_peers(size, sw)
        for op, v in out["ops"].items():
            ratios = [a / b for a, b in zip(v["offlow"], v["peer"], strict=True) if b]
            rows.append({"op": op, "size": size, "offlow": spread(v["offlow"]),
                         "openssl": spread(v["peer"]), "ratio": statistics.median(ratios),
                         "python": py.get(op), "target": TARGETS.get(op),
                         "openssl_version": out["openssl"]})
    return rows


def python_peers(size: int, sw: Sweep) -> dict[str, dict[str, Any]]:
    """hashlib's MD5 and `cryptography`'s AES-128-CBC (PKCS#7 included), one call per
    payload from Python, MB/s over the same number of payloads and time."""
    import hashlib

    data = [os.urandom(size) for _ in range(sw.count)]

    def rate(fn: Any) -> float:
        done, t0 = 0, time.perf_counter()
        while (t := time.perf_counter()) - t0 < sw.seconds or not done:
            for d in data:
                fn(d)
            done += len(data)
        return done * size / (t - t0) / 1e6

    out: dict[str, dict[str, Any]] = {"md5": {"peer": "hashlib",
                                              "mbps": rate(lambda d: hashlib.md5(d).digest())}}
    try:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:
        return out
    cipher = Cipher(algorithms.AES(KEY), modes.CBC(IV))

    def enc(d: bytes) -> bytes:
        p = padding.PKCS7(128).padder()
        e = cipher.encryptor()
        return e.update(p.update(d) + p.finalize()) + e.finalize()

    out["aes_128_cbc_enc"] = {"peer": "cryptography", "mbps": rate(enc)}
    return out


# ---- Figure 6 ----------------------------------------------------------------------

FLOW = FlowKey("10.0.0.1", 4000, "10.0.0.2", 5000, KEY, IV[:8])
PAYLOAD = 1464  # plaintext bytes: 1472 of ciphertext with its padding block


def write_capture(path: Path, keys: Path, n: int) -> None:
    """`n` datagrams of Blowfish-CBC ciphertext of random plaintexts (encrypted by
    offlow's library), and the key table."""
    keys.write_text(key_table_text([FLOW], "offlow bench crypto"))
    with KeyTable(keys.read_text(), "bf-cbc") as t, open(path, "wb") as f:
        if t.rc:
            raise OfflowError(f"bench crypto: key table: {t.error}")
        flow = t.flow(0x0A000001, 0x0A000002, FLOW.sport, FLOW.dport)
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for i in range(n):
            ct = t.encrypt(flow, os.urandom(PAYLOAD))
            if not isinstance(ct, bytes):
                raise OfflowError(f"bench crypto: encryption failed ({ct})")
            udp = dpkt.udp.UDP(sport=FLOW.sport, dport=FLOW.dport, ulen=8 + len(ct), data=ct)
            ip = dpkt.ip.IP(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]), p=17, data=udp)
            ip.len = 20 + 8 + len(ct)
            eth = dpkt.ethernet.Ethernet(src=b"\x02" + bytes(5), dst=b"\x02" + bytes(4) + b"\x01",
                                         type=0x0800, data=ip)
            w.writepkt(bytes(eth), ts=i * 1e-6)


def fig6_program(work: str, cores: int, keys: Path) -> Program:
    """rx on NIC core 0; `work` (md5: 4-chain MD5, data-parallel; blowfish: decryption
    on an ordered group) on NIC cores 1..cores; the host counts."""
    p = Program(f"fig6_{work}")
    rx, eth, ip4, l4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4")
    el = (Md5Chains("work", k=4) if work == "md5"
          else CbcDecrypt("work", keys=cbc_keys("keys", keys, cipher="bf-cbc")))
    out, junk = Sink("out"), Discard("junk")
    rx >> eth
    eth["ipv4"] >> ip4 >> l4 >> el >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("rx", [rx, eth, ip4, l4, junk], device="nic", cores=[0])
    p.segment("work", [el], device="nic", cores=range(1, cores + 1),
              ordered=work == "blowfish" and cores > 1)
    p.segment("host", [out], device="host")
    return p


def figure6(sw: Sweep, work_dir: Path) -> list[dict[str, Any]]:
    """MB/s of payload through the work segment on 1, 2, 4 NIC cores, best of reps."""
    cap, keys = work_dir / "fig6.pcap", work_dir / "keys.txt"
    n = min(sw.datagrams, 20_000)
    write_capture(cap, keys, n)
    rows = []
    for work in ("md5", "blowfish"):
        for cores in sw.cores:
            b = build(fig6_program(work, cores, keys))
            o = runner.RunOptions(input=cap, loops=max(1, sw.datagrams // n), timeout=600)
            rates, errors = [], []
            for _ in range(sw.fig_reps):
                res = runner.run(b, o)
                s = summarize(b.plan, res.stats)
                seg = next(x for x in s["segments"] if x["segment"] == "work")
                lost = s["accounting"]["dropped"]
                if not res.ok or lost:
                    errors += res.errors or [f"dropped: {lost}"]
                    continue
                rates.append(seg["packets"] * (PAYLOAD + 8) / seg["seconds"] / 1e6)
            rows.append({"work": work, "cores": cores, "mbps": max(rates) if rates else None,
                         "runs": rates, "errors": errors[:2],
                         "oversubscribed": runner.oversubscription(b, o) is not None})
    for r in rows:
        one = next((x["mbps"] for x in rows if x["work"] == r["work"] and x["cores"] == 1),
                   None)
        r["speedup"] = r["mbps"] / one if r["mbps"] and one else None
        r["seed"] = SEED_FIG6[r["work"]].get(r["cores"])
    return rows


def format_report(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [machine_line(m, res['features']) + f"; busy before timing: {res['busy']}",
             f"peer: {res['rows'][0]['openssl_version'] if res['rows'] else '?'}, libcrypto "
             f"called directly (EVP, a context kept across packets; BF_cbc_encrypt)", "",
             "per core, one message per payload (MB/s of payload, median [min-max] over "
             f"{res['reps']} turns)",
             f"{'operation':<16} {'bytes':>5}  {'offlow':>20}  {'OpenSSL':>20}  {'ratio':>5}  "
             f"{'target':>6}  Python peer"]
    for r in res["rows"]:
        o, p = r["offlow"], r["openssl"]
        tgt = f">={r['target']}" if r["target"] else ""
        verdict = ("" if not r["target"] else " ok" if r["ratio"] >= r["target"] else " MISS")
        py = f"{r['python']['peer']} {r['python']['mbps']:.0f}" if r["python"] else ""
        lines.append(f"{r['op']:<16} {r['size']:>5}  {o['median']:>7.0f} [{o['min']:.0f}-"
                     f"{o['max']:.0f}]".ljust(29) + f"  {p['median']:>7.0f} [{p['min']:.0f}-"
                     f"{p['max']:.0f}]".ljust(22) + f"  {r['ratio']:>5.2f}  {tgt:>6}{verdict}"
                     f"  {py}")
    lines += ["", "Figure 6 shape: one stream over NIC cores (MB/s of payload through the "
              "work segment, best of runs)",
              f"{'work':<9} {'cores':>5} {'MB/s':>8} {'speed-up':>8} {'seed':>6}  note"]
    for r in res["figure6"]:
        mb = f"{r['mbps']:.1f}" if r["mbps"] else "failed"
        sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        seed = f"{r['seed']:.2f}x" if r["seed"] else "-"
        note = "oversubscribed" if r["oversubscribed"] else ""
        if r["errors"]:
            note += f" error: {r['errors'][0]}"
        lines.append(f"{r['work']:<9} {r['cores']:>5} {mb:>8} {sp:>8} {seed:>6}  {note}")
    return "\n".join(lines)


def measure(sw: Sweep) -> dict[str, Any]:
    """Both tables (per core, Figure 6) and the machine they ran on."""
    res: dict[str, Any] = {"machine": machine(), "features": cpu_features(),
                           "busy": quiet_check(1.0), "reps": sw.reps}
    res["rows"] = per_core(sw, bench_cpu())
    with tempfile.TemporaryDirectory(prefix="offlow-bench-crypto-") as d:
        res["figure6"] = figure6(sw, Path(d))
    return res


def run(quick: bool = False, out_json: Path | None = None) -> dict[str, Any]:
    """`offlow bench crypto`: print the tables, write the JSON."""
    res = measure(QUICK if quick else FULL)
    print(format_report(res))
    if out_json:
        out_json.write_text(json.dumps(res, indent=1))
        print(f"wrote {out_json}")
    return res
