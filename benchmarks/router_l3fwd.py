"""DPDK's l3fwd beside offlow's router in `offlow bench router`: the same replayed pcap,
the same routes, one core each.

l3fwd comes from Debian's dpdk-doc (the examples of DPDK 22.11, installed with apt-get
when missing, as root). It is compiled as its Makefile does (-O3, `pkg-config
libdpdk`, -DALLOW_EXPERIMENTAL_API) into the build cache, never into the repository,
with ONE change to main.c, applied by this module and reported with every result:
l3fwd 22.11 always asks its ports for Rx checksum offload, which the pcap PMD does not
offer, so rte_eth_dev_configure fails ("Rx offloads 0xe doesn't match Rx offloads
capabilities 0x0"); the change masks the requested Rx offloads with the port's
capabilities. l3fwd never reads the offload's results on the LPM path, so its
forwarding work is unchanged.

Routes: l3fwd reads rule files (--rule_ipv4 / --rule_ipv6), but its LPM tables are
created with a compile-time capacity (IPV4_L3FWD_LPM_MAX_RULES, 1,024 rules and 256
tbl8 groups in 22.11; read from its source). So both sides get the same slice of the
prefix file: that many prefixes per family, evenly spaced, /0 left out (rte_lpm takes
depths 1..32). All l3fwd rules point at port 0, the one port (l3fwd only installs
routes to enabled ports); offlow derives hops by its file rule. The rewrite work is the
same: one next-hop lookup, TTL decrement with checksum update, two MAC addresses.

Traffic: a pcap of UDP frames of one size (IPv4, or IPv6), destinations drawn
uniformly from the slice's prefixes with random host bits, valid checksums, TTL 64.
l3fwd replays it with EAL `--no-huge --no-pci`, one lcore, and one pcap vdev with
`infinite_rx=1` and no tx file (the PMD counts and drops what l3fwd sends, as
offlow's sink counts without a file). Its rate is read from outside, through DPDK
telemetry (/ethdev/stats of port 0): output packets over a timed window after a
warm-up. offlow's router replays the same pcap from memory (its pcap source) for the
same time, in the one-core placement on the same CPU, and as the example places it.
Before the timing, a finite replay through l3fwd with a tx pcap checks that it
forwards every packet (count, destination MAC, TTL and checksum for IPv4).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks import router_fwd
from benchmarks.common.cpu import busiest, thread_cpu
from benchmarks.common.peers import pkg_config, setup_dpdk
from benchmarks.common.routes import addresses4, addresses6, take
from benchmarks.common.spread import spread
from offlow import cbuild
from offlow.build import Build, build
from offlow.cbuild import cache_dir
from offlow.debian import apt_install
from offlow.errors import OfflowError
from offlow.netsum import csum, l4_csum
from offlow.runner import RunOptions
from offlow.targets import nic

if TYPE_CHECKING:
    from matplotlib.axes import Axes

EXAMPLES = Path("/usr/share/dpdk/examples")
L3FWD_SRC = EXAMPLES / "l3fwd"
# The one change to l3fwd's main.c, inserted before this line (see the docstring).
PATCH_AT = "\t\tret = config_port_max_pkt_len(&local_port_conf, &dev_info);\n"
PATCH = ("\t\t/* offlow bench: ask only for the Rx offloads the port offers (net_pcap "
         "offers none). */\n"
         "\t\tport_conf.rxmode.offloads &= dev_info.rx_offload_capa;\n"
         "\t\tlocal_port_conf.rxmode.offloads &= dev_info.rx_offload_capa;\n")
PATCH_TEXT = ("main.c: the requested Rx offloads (RTE_ETH_RX_OFFLOAD_CHECKSUM) are masked "
              "with the port's rx_offload_capa before rte_eth_dev_configure (net_pcap offers "
              "none; unpatched, l3fwd 22.11 exits: 'Rx offloads 0xe doesn't match Rx "
              "offloads capabilities 0x0')")
ETH_DEST = "02:00:00:00:00:11"  # l3fwd --eth-dest for port 0; checked in its output
PCAP_PACKETS = 4096  # packets per pcap: they must fit l3fwd's mbuf pool (8,192)
SEED = 7
TARGET = 1.0  # offlow router Mpps per core / l3fwd-lpm Mpps per core, reported only


@dataclass(frozen=True)
class L3fwdSweep:
    """What the l3fwd comparison measures."""

    cases: tuple[tuple[int, int], ...] = ((4, 64), (4, 128), (4, 256), (4, 512), (4, 1024),
                                          (4, 1500), (6, 64))  # (family, frame size)
    duration: float = 1.0   # seconds per timed run (both sides)
    warmup: float = 0.5     # l3fwd: seconds between entering its loop and the window
    reps: int = 3           # paired repetitions per case
    packets: int = PCAP_PACKETS


FULL = L3fwdSweep()
QUICK = L3fwdSweep(cases=((4, 64), (4, 1500), (6, 64)), duration=0.5, warmup=0.3, reps=2)


# ---- l3fwd: install, patch, build ------------------------------------------------------


def _makefile_sources(src: Path) -> list[str]:
    """The C files l3fwd's Makefile compiles (SRCS-y)."""
    names: list[str] = []
    for line in (src / "Makefile").read_text().splitlines():
        m = re.match(r"\s*SRCS-y\s*[:+]?=\s*(.*)", line)
        if m:
            names += m.group(1).split()
    if not names:
        raise OfflowError(f"no SRCS-y in {src / 'Makefile'}")
    return names


def lpm_capacity(src: Path) -> dict[str, int]:
    """l3fwd's compile-time LPM capacities, from its l3fwd_lpm.c."""
    text = (src / "l3fwd_lpm.c").read_text()
    caps = {}
    for key in ("IPV4_L3FWD_LPM_MAX_RULES", "IPV4_L3FWD_LPM_NUMBER_TBL8S",
                "IPV6_L3FWD_LPM_MAX_RULES"):
        m = re.search(rf"#define\s+{key}\s+(\(1 << \d+\)|\d+)", text)
        if not m:
            raise OfflowError(f"cannot read {key} from l3fwd_lpm.c")
        v = m.group(1)
        caps[key] = 1 << int(v.split("<<")[1].rstrip(") ")) if "<<" in v else int(v)
    return caps


def build_l3fwd(src: Path = L3FWD_SRC) -> Path:
    """Copy l3fwd's sources into the build cache, apply the one change, compile as its
    Makefile does; cached per content hash (sources, change, flags)."""
    cflags, libs = pkg_config("--cflags"), pkg_config("--libs")
    if cflags is None or libs is None:
        raise OfflowError("pkg-config does not find libdpdk")
    common = src.parent / "common"
    flags = [*cbuild.flags("l3fwd"), *cflags.split(), f"-I{common}"]
    h = hashlib.sha256()
    for f in sorted([*src.iterdir(), *common.rglob("*")]):
        if f.is_file():
            h.update(f.name.encode() + f.read_bytes())
    h.update(PATCH.encode() + " ".join(flags + libs.split()).encode())
    out = cache_dir() / f"l3fwd-{h.hexdigest()[:16]}"
    exe = out / "l3fwd"
    if exe.exists():
        return exe
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    main = tmp / "main.c"
    text = main.read_text()
    if text.count(PATCH_AT) != 1:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OfflowError("l3fwd's main.c is not the 22.11 one this benchmark patches "
                          "(the line to insert the Rx offload mask before is not there once)")
    main.write_text(text.replace(PATCH_AT, PATCH + PATCH_AT))
    srcs = [str(tmp / n) for n in _makefile_sources(tmp)]
    res = subprocess.run([cbuild.description().cc, *flags, *srcs, "-o", str(tmp / "l3fwd"),
                          *libs.split()],
                         capture_output=True, text=True)
    if res.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = " ".join(res.stderr.strip().splitlines()[-3:])
        raise OfflowError(f"l3fwd does not compile: {tail}")
    try:
        tmp.rename(out)
    except OSError:  # another build won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return exe


def setup() -> tuple[Path | None, dict]:
    """l3fwd built and ready: (executable, facts) or (None, facts with the reason)."""
    info: dict = {"available": False, "reason": None, "source": str(L3FWD_SRC),
                  "change": PATCH_TEXT}
    version, why = setup_dpdk()
    if not version:
        info["reason"] = why
        return None, info
    info["dpdk"] = version
    if not (L3FWD_SRC / "main.c").exists():
        why = apt_install(["dpdk-doc"], "dpdk-doc", "l3fwd setup")
        if why or not (L3FWD_SRC / "main.c").exists():
            info["reason"] = why or f"dpdk-doc installed but {L3FWD_SRC} has no main.c"
            return None, info
    try:
        info["capacity"] = lpm_capacity(L3FWD_SRC)
        exe = build_l3fwd()
    except (OfflowError, OSError) as e:
        info["reason"] = str(e)
        return None, info
    info["available"] = True
    return exe, info


# ---- routes and traffic -----------------------------------------------------------------


def slice_routes(routes: np.ndarray, n: int) -> np.ndarray:
    """n routes evenly spaced over the list, /0 left out."""
    return take(routes[routes["len"] > 0], n)


def _text4(a: int) -> str:
    return ".".join(str((a >> s) & 0xFF) for s in (24, 16, 8, 0))


def _text6(a: np.ndarray) -> str:
    return str(ipaddress.IPv6Address(bytes(a)))


def write_rules(r4: np.ndarray, r6: np.ndarray, work: Path) -> dict[str, Path]:
    """l3fwd rule files (every rule to port 0) and one offlow prefix file, same routes."""
    p4 = [f"{_text4(int(a))}/{int(n)}" for a, n in zip(r4["addr"], r4["len"], strict=True)]
    p6 = [f"{_text6(a)}/{int(n)}" for a, n in zip(r6["addr"], r6["len"], strict=True)]
    files = {"rule_ipv4": work / "l3fwd-v4.cfg", "rule_ipv6": work / "l3fwd-v6.cfg",
             "prefixes": work / "routes-slice.txt"}
    files["rule_ipv4"].write_text("".join(f"R{p} 0\n" for p in p4))
    files["rule_ipv6"].write_text("".join(f"R{p} 0\n" for p in p6))
    files["prefixes"].write_text("".join(f"{p}\n" for p in p4 + p6))
    return files


def tbl8_groups4(r4: np.ndarray) -> int:
    """/24s holding prefixes longer than /24 (rte_lpm's tbl8 groups)."""
    return len(np.unique(r4["addr"][r4["len"] > 24] >> 8))


def frames(family: int, size: int, routes: np.ndarray, n: int, seed: int) -> list[bytes]:
    """n Ethernet/IP/UDP frames of `size` bytes (no FCS) to destinations inside
    uniformly chosen routes (random host bits); TTL / hop limit 64, valid checksums."""
    rng = np.random.default_rng(seed)
    l3 = 20 if family == 4 else 40
    if size < 14 + l3 + 8 or size > 1514:
        raise OfflowError(f"frame size {size} does not fit an IPv{family}/UDP frame (.. 1514)")
    dst = (addresses4 if family == 4 else addresses6)(routes, n, rng)["hits"]
    eth = bytes.fromhex("020000000001" "020000000002") + (b"\x08\x00" if family == 4
                                                           else b"\x86\xdd")
    out = []
    plen = size - 14 - l3
    for i in range(n):
        udp = struct.pack("!HHHH", 1024 + i % 60000, 443, plen, 0) + bytes(plen - 8)
        if family == 4:
            src, dst_b = bytes([10, 0, (i >> 8) & 0xFF, i & 0xFF]), int(dst[i]).to_bytes(4, "big")
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, size - 14, i & 0xFFFF, 0, 64, 17, 0,
                             src, dst_b)
            ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        else:
            src = bytes(14) + i.to_bytes(2, "big")
            src = b"\xfd" + src[1:]
            dst_b = bytes(dst[i])
            ip = struct.pack("!IHBB16s16s", 6 << 28, plen, 17, 64, src, dst_b)
        c = l4_csum(src, dst_b, 17, udp)
        out.append(eth + ip + udp[:6] + struct.pack("!H", c) + udp[8:])
    return out


def write_pcap(path: Path, pkts: list[bytes]) -> None:
    """A classic pcap file (Ethernet, microsecond timestamps 1 us apart)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, p in enumerate(pkts):
            f.write(struct.pack("<IIII", i // 1_000_000, i % 1_000_000, len(p), len(p)) + p)


def read_pcap(path: Path) -> list[bytes]:
    """The frames of a classic little-endian pcap file (micro- or nanosecond)."""
    data = path.read_bytes()
    if len(data) < 24 or struct.unpack_from("<I", data)[0] not in (0xA1B2C3D4, 0xA1B23C4D):
        raise OfflowError(f"{path} is not a little-endian pcap file")
    out, off = [], 24
    while off + 16 <= len(data):
        incl = struct.unpack_from("<I", data, off + 8)[0]
        out.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return out


# ---- running l3fwd ----------------------------------------------------------------------


def _runtime_dirs(prefix: str) -> list[Path]:
    base = [Path("/var/run/dpdk"), Path("/tmp/dpdk")]
    if os.environ.get("XDG_RUNTIME_DIR"):
        base.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "dpdk")
    return [b / prefix for b in base]


def telemetry(sock_path: Path, cmd: str) -> dict:
    """One DPDK telemetry query (v2 socket: a greeting, then one reply per command)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(5.0)
        s.connect(str(sock_path))
        s.recv(16384)
        s.send(cmd.encode())
        return json.loads(s.recv(1 << 16).decode())


class L3fwd:
    """One l3fwd process on one lcore with one pcap vdev; a context manager that stops
    it (SIGTERM, then SIGKILL after 10 s) and removes its runtime folder. (A subclass
    runs another DPDK application: its command, and READY, the line it logs when
    forwarding.) SIGTERM: l3fwd ends on it as on SIGINT, DPDK's skeleton has no handler
    and ends by default, and a process a shell's background job starts inherits SIGINT
    ignored."""

    READY = "entering main loop"
    NAME = "l3fwd"

    def __init__(self, exe: Path, cpu: int, vdev: str, rules: dict[str, Path], log: Path):
        self.prefix = f"offlow-l3fwd-{os.getpid()}-{time.monotonic_ns() % 10**9}"
        self.log = log
        self.cmd = [str(exe), "--no-huge", "--no-pci", "-m", "512", "--file-prefix",
                    self.prefix, "-l", str(cpu), "--vdev", vdev, "--",
                    "-p", "0x1", "--config", f"(0,0,{cpu})", "--parse-ptype",
                    "--lookup", "lpm", f"--eth-dest=0,{ETH_DEST}",
                    "--rule_ipv4", str(rules["rule_ipv4"]),
                    "--rule_ipv6", str(rules["rule_ipv6"])]
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: Path | None = None

    def __enter__(self) -> L3fwd:
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(self.cmd, stdout=f, stderr=subprocess.STDOUT)
        return self

    def wait_loop(self, timeout: float = 60.0) -> None:
        """Until l3fwd runs its forwarding loop and its telemetry socket answers."""
        assert self.proc is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise OfflowError(f"{self.NAME} exited with status {self.proc.returncode} before "
                                  f"forwarding: {self.tail()}")
            if self.READY in self.log.read_text(errors="replace"):
                for d in _runtime_dirs(self.prefix):
                    if (d / "dpdk_telemetry.v2").exists():
                        self.sock = d / "dpdk_telemetry.v2"
                        return
            time.sleep(0.02)
        raise OfflowError(f"{self.NAME} did not start forwarding within {timeout:.0f} s: "
                          f"{self.tail()}")

    def stats(self, port: int = 0) -> dict:
        assert self.sock is not None
        return telemetry(self.sock, f"/ethdev/stats,{port}")["/ethdev/stats"]

    def cpu(self) -> dict[str, float]:
        """CPU seconds of each of its threads so far."""
        return thread_cpu(self.proc.pid) if self.proc else {}

    def tail(self) -> str:
        lines = [s for s in self.log.read_text(errors="replace").splitlines()
                 if "Adding route" not in s]
        return " | ".join(lines[-4:])

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for d in _runtime_dirs(self.prefix):
            shutil.rmtree(d, ignore_errors=True)


def l3fwd_rate(exe: Path, cpu: int, pcap: Path, rules: dict[str, Path], sw: L3fwdSweep,
               work: Path) -> dict:
    """l3fwd replaying `pcap` for ever: packets out per second over a timed window."""
    vdev = f"net_pcap0,rx_pcap={pcap},infinite_rx=1"
    with L3fwd(exe, cpu, vdev, rules, work / "l3fwd.log") as l3:
        l3.wait_loop()
        time.sleep(sw.warmup)
        a, t0, c0 = l3.stats(), time.monotonic(), l3.cpu()
        time.sleep(sw.duration)
        b, t1, c1 = l3.stats(), time.monotonic(), l3.cpu()
    dt = t1 - t0
    pkts = b["opackets"] - a["opackets"]
    row = {"seconds": dt, "out": pkts, "in": b["ipackets"] - a["ipackets"],
           "cpu_s": busiest(c0, c1),
           "errors": {k: b[k] - a[k] for k in ("ierrors", "oerrors", "imissed", "rx_nombuf")},
           "mpps": pkts / dt / 1e6 if pkts > 0 else None,
           "gbps": (b["obytes"] - a["obytes"]) * 8 / dt / 1e9 if pkts > 0 else None}
    if pkts <= 0:
        row["why"] = "l3fwd sent no packets in the window"
    return row


def l3fwd_check(exe: Path, cpu: int, pcap: Path, family: int, rules: dict[str, Path],
                work: Path) -> dict:
    """One finite replay through l3fwd into a tx pcap: did every packet come out,
    rewritten? (count, destination MAC; IPv4: TTL 63 and a valid header checksum)"""
    sent = read_pcap(pcap)
    out = work / "l3fwd-out.pcap"
    vdev = f"net_pcap0,rx_pcap={pcap},tx_pcap={out}"
    with L3fwd(exe, cpu, vdev, rules, work / "l3fwd-check.log") as l3:
        l3.wait_loop()
        end = time.monotonic() + 20
        while l3.stats()["opackets"] < len(sent) and time.monotonic() < end:
            time.sleep(0.05)
    got = read_pcap(out) if out.exists() else []
    mac = bytes.fromhex(ETH_DEST.replace(":", ""))
    bad_mac = sum(1 for p in got if p[:6] != mac)
    bad_ttl = bad_sum = 0
    if family == 4:
        bad_ttl = sum(1 for p in got if p[22] != 63)
        bad_sum = sum(1 for p in got if csum(p[14:34]) != 0)
    ok = len(got) == len(sent) and not (bad_mac or bad_ttl or bad_sum)
    return {"sent": len(sent), "forwarded": len(got), "wrong_mac": bad_mac,
            "wrong_ttl": bad_ttl, "wrong_checksum": bad_sum, "ok": ok}


# ---- the comparison -------------------------------------------------------------------


def measure(routes4: np.ndarray, routes6: np.ndarray, sw: L3fwdSweep,
            prefixes: Path | None = None, use_l3fwd: bool = True) -> dict:
    """Every case of `sw`: offlow's router (one core, as placed) and l3fwd, paired per
    repetition; or l3fwd's reason for not running, with offlow measured alone.
    use_l3fwd: False measures offlow alone."""
    if use_l3fwd:
        exe, info = setup()
    else:
        exe, info = None, {"available": False, "reason": "not asked for",
                           "source": str(L3FWD_SRC), "change": PATCH_TEXT}
    res: dict = {"settings": asdict(sw), "l3fwd": info, "cases": [], "checks": [],
                 "verdicts": []}
    cap = info.get("capacity") or {"IPV4_L3FWD_LPM_MAX_RULES": 1024,
                                   "IPV4_L3FWD_LPM_NUMBER_TBL8S": 256,
                                   "IPV6_L3FWD_LPM_MAX_RULES": 1024}
    r4 = slice_routes(routes4, cap["IPV4_L3FWD_LPM_MAX_RULES"])
    r6 = slice_routes(routes6, cap["IPV6_L3FWD_LPM_MAX_RULES"])
    # rte_lpm's tbl8 groups: drop the longest prefixes of the slice until they fit.
    while tbl8_groups4(r4) > cap["IPV4_L3FWD_LPM_NUMBER_TBL8S"]:
        r4 = r4[np.argsort(r4["len"], kind="stable")][:-1]
    res["routes"] = {"from": str(prefixes) if prefixes else None, "v4": len(r4), "v6": len(r6),
                     "tbl8_groups_v4": tbl8_groups4(r4),
                     "rule": "every k-th prefix of the file (evenly spaced), /0 left out, "
                             "up to l3fwd's compile-time LPM capacity"}
    cpu = nic.TARGET.cpu_base(os.cpu_count() or 1)
    res["cpu"] = cpu
    builds: dict[str, Build] = {p: build(router_fwd.program(p)) for p in router_fwd.PLACEMENTS}
    with tempfile.TemporaryDirectory(prefix="offlow-bench-l3fwd-") as d:
        work = Path(d)
        rules = write_rules(r4, r6, work)
        tables = (f"routes4.path={rules['prefixes']}", f"routes6.path={rules['prefixes']}")
        for family, size in sw.cases:
            routes = r4 if family == 4 else r6
            case: dict = {"family": family, "size": size, "packets": sw.packets}
            if len(routes) == 0:
                case["why"] = f"no IPv{family} routes"
                res["cases"].append(case)
                continue
            pcap = work / f"in-v{family}-{size}.pcap"
            write_pcap(pcap, frames(family, size, routes, sw.packets, SEED + size + family))
            opts = RunOptions(input=pcap, duration=sw.duration, opts=tables,
                              timeout=sw.duration + 120)
            runs: dict[str, list[dict]] = {p: [] for p in (*router_fwd.PLACEMENTS, "l3fwd")}
            if exe is not None and all(c["family"] != family for c in res["checks"]):
                try:
                    res["checks"].append({"family": family, "size": size,
                                          **l3fwd_check(exe, cpu, pcap, family, rules, work)})
                except OfflowError as e:
                    info.update(available=False, reason=f"l3fwd failed its check run: {e}")
                    exe = None
            for _ in range(sw.reps):
                for p in router_fwd.PLACEMENTS:
                    runs[p].append(router_fwd.forward(builds[p], opts))
                if exe is not None:
                    try:
                        runs["l3fwd"].append(l3fwd_rate(exe, cpu, pcap, rules, sw, work))
                    except OfflowError as e:
                        info.update(available=False, reason=str(e))
                        exe = None
            case["placements"] = {p: router_fwd.placement_info(builds[p], opts)
                                  for p in router_fwd.PLACEMENTS}
            case["runs"] = runs
            for side, rs in runs.items():
                ok = [r for r in rs if r.get("mpps")]
                case[side] = {"mpps": spread([r["mpps"] for r in ok]),
                              "gbps": spread([r["gbps"] for r in ok]),
                              "why": None if ok or not rs else rs[0].get("why")}
            case["ratios"] = _ratios(case, runs)
            res["cases"].append(case)
    res["verdicts"] = [_verdict(c, info, res["checks"]) for c in res["cases"] if "ratios" in c]
    return res


def _ratios(case: dict, runs: dict[str, list[dict]]) -> dict:
    """Per core, paired by repetition: offlow one core / l3fwd, and offlow as placed
    (its rate over the CPUs it busy-polls) / l3fwd."""
    out = {}
    l3 = runs["l3fwd"]
    for p in router_fwd.PLACEMENTS:
        ncpu = len(case["placements"][p]["cpus"])
        per = [a["mpps"] / ncpu / b["mpps"] for a, b in zip(runs[p], l3, strict=False)
               if a.get("mpps") and b.get("mpps")]
        if per:
            out[p] = {"cpus": ncpu, **(spread(per) or {}), "per_rep": per}
    return out


def _verdict(case: dict, info: dict, checks: list[dict]) -> dict:
    r = case["ratios"].get("one core")
    bad = [c for c in checks if c["family"] == case["family"] and not c["ok"]]
    if bad:
        r = None
    v = {"family": case["family"], "size": case["size"], "target": TARGET,
         "ratio": r["median"] if r else None, "meets": r["median"] >= TARGET if r else None}
    if bad:
        v["why"] = "l3fwd failed its forwarding check for this family"
    elif r is None:
        v["why"] = (f"l3fwd not measured: {info.get('reason')}" if not info.get("available")
                    else "no paired rates")
    return v


def verdict_line(v: dict) -> str:
    """One line per case: the per-core target."""
    head = (f"verdict: router IPv{v['family']} {v['size']} B, offlow one core vs l3fwd-lpm "
            "one lcore, same pcap")
    if v["ratio"] is None:
        return f"{head}: not judged ({v['why']})"
    return (f"{head}: {v['ratio']:.2f}x vs target {v['target']:.2f}x: "
            f"{'meets' if v['meets'] else 'misses'}")


def _cell(s: dict | None, why: str | None) -> str:
    if s is None:
        return f"{'-':>20}" if why is None else f"{'n/a':>20}"
    return f"{s['median']:>7.2f} ({s['min']:.2f}-{s['max']:.2f})"


def format_report(l3: dict) -> list[str]:
    """The comparison as report lines."""
    info, st, rt = l3["l3fwd"], l3["settings"], l3["routes"]
    out = ["", f"router vs DPDK l3fwd (LPM mode), same replayed pcap ({st['packets']:,} "
               f"packets, replayed for {st['duration']:g} s per run; median (min-max) of "
               f"{st['reps']} paired runs), same {rt['v4']:,} IPv4 + {rt['v6']:,} IPv6 routes"]
    if info.get("dpdk"):
        cap = info.get("capacity", {})
        out.append(f"  l3fwd: {info['source']} (DPDK {info.get('dpdk')}), EAL --no-huge "
                   f"--no-pci -m 512, lcore {l3['cpu']}, one net_pcap vdev with infinite_rx=1, "
                   "tx dropped by the PMD; rate from telemetry /ethdev/stats (opackets)")
        out.append(f"  l3fwd's LPM capacity (compile time): {cap.get('IPV4_L3FWD_LPM_MAX_RULES')}"
                   f" IPv4 rules, {cap.get('IPV4_L3FWD_LPM_NUMBER_TBL8S')} tbl8 groups, "
                   f"{cap.get('IPV6_L3FWD_LPM_MAX_RULES')} IPv6 rules: so the routes are a "
                   f"slice of {rt['from']} ({rt['rule']}), not the full table")
        out.append(f"  l3fwd changed in one place: {info['change']}")
    if not info["available"]:
        out.append(f"  l3fwd not measured: {info['reason']}")
    for chk in l3["checks"]:
        v4 = (f", TTL {chk['wrong_ttl']}, checksum {chk['wrong_checksum']}"
              if chk["family"] == 4 else "")
        out.append(f"  l3fwd check (IPv{chk['family']} {chk['size']} B, finite replay into a tx "
                   f"pcap): {chk['forwarded']:,} of {chk['sent']:,} forwarded; wrong: MAC "
                   f"{chk['wrong_mac']}{v4}: {'ok' if chk['ok'] else 'NOT OK'}")
    case0 = next((c for c in l3["cases"] if "placements" in c), None)
    if case0:
        for p, inf in case0["placements"].items():
            note = f"; {inf['oversubscribed']}" if inf["oversubscribed"] else ""
            out.append(f"  offlow {p}: {inf['threads']} busy-polling thread(s) on CPU(s) "
                       f"{','.join(map(str, inf['cpus']))}{note}")
    head = (f"{'case':12} | {'l3fwd Mpps':>20} | {'offlow 1 core Mpps':>20} | "
            f"{'offlow as placed Mpps':>21} | {'per core: 1 core/l3fwd':>22} | "
            f"{'as placed/CPU / l3fwd':>21}")
    out += [head, "-" * len(head)]
    for c in l3["cases"]:
        name = f"IPv{c['family']} {c['size']} B"
        if "placements" not in c:
            out.append(f"{name:12} | {c.get('why')}")
            continue
        r = c["ratios"]

        def ratio(p: str, r: dict = r) -> str:
            x = r.get(p)
            return f"{x['median']:.2f}x ({x['min']:.2f}-{x['max']:.2f})" if x else "-"

        out.append(f"{name:12} | {_cell(c['l3fwd']['mpps'], c['l3fwd']['why'])} | "
                   f"{_cell(c['one core']['mpps'], c['one core']['why'])} | "
                   f"{_cell(c['as placed']['mpps'], c['as placed']['why']):>21} | "
                   f"{ratio('one core'):>22} | {ratio('as placed'):>21}")
        for side in ("l3fwd", *router_fwd.PLACEMENTS):
            if c[side]["why"]:
                out.append(f"    {side}: no rate: {c[side]['why']}")
    out += [verdict_line(v) for v in l3["verdicts"]]
    return out


def plot(l3: dict, ax: Axes) -> None:
    """Mpps per case: l3fwd and offlow's two placements, min-max bars."""
    cases = [c for c in l3["cases"] if "placements" in c]
    names = [f"IPv{c['family']}\n{c['size']} B" for c in cases]
    x = np.arange(len(cases))
    sides = ("l3fwd", *router_fwd.PLACEMENTS)
    for k, side in enumerate(sides):
        med, lo, hi = [], [], []
        for c in cases:
            s = c[side]["mpps"]
            med.append(s["median"] if s else 0)
            lo.append(s["median"] - s["min"] if s else 0)
            hi.append(s["max"] - s["median"] if s else 0)
        label = "DPDK l3fwd, 1 lcore" if side == "l3fwd" else f"offlow router, {side}"
        ax.bar(x + (k - 1) * 0.27, med, 0.27, yerr=[lo, hi], capsize=2, label=label)
    ax.set_xticks(x, names, fontsize=7)
    ax.set_ylabel("Mpps (median, min-max)")
    ax.set_title("router vs l3fwd-lpm, same pcap replayed"
                 + ("" if l3["l3fwd"]["available"] else " (l3fwd not measured)"))
    ax.legend(fontsize=7)
