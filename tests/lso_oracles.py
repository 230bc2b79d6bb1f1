"""Independent readings of segmentation offload input and output: what each flow sent
(dpkt over the sends), what tshark finds and reassembles in the output, what scapy's
defragment rebuilds. None of them uses offlow's code."""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import dpkt

# Datagrams joined from a capture's flows carry the flows' bytes (QUIC, DNS), not whole
# application messages: UDP payloads are read as data, so only IP, UDP and TCP are judged
TSHARK_OPTS = ["-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
               "-o", "udp.check_checksum:TRUE", "-d", "udp.port==1-65535,data"]
# what the output must not show: a malformed packet, a bad checksum, any TCP analysis
# flag, an expert note of warning or worse
TSHARK_PROBLEMS = ('_ws.malformed or tcp.analysis.flags or ip.checksum.status == "Bad" or '
                   'tcp.checksum.status == "Bad" or udp.checksum.status == "Bad" or '
                   '_ws.expert.severity >= "Warning"')


def tshark() -> str | None:
    return shutil.which("tshark")


def _endpoint(addr: bytes, port: int) -> str:
    a = ipaddress.ip_address(addr)
    return f"[{a}]:{port}" if a.version == 6 else f"{a}:{port}"


def _l3(buf: bytes) -> dpkt.Packet | None:
    eth = dpkt.ethernet.Ethernet(buf)
    return eth.data if isinstance(eth.data, dpkt.ip.IP | dpkt.ip6.IP6) else None


def sent_streams(frames: list[bytes]) -> dict[tuple[str, str], bytes]:
    """Each TCP flow direction's bytes, (source, destination) -> the payloads of its
    sends in order (directions that sent none left out)."""
    out: dict[tuple[str, str], bytearray] = defaultdict(bytearray)
    for buf in frames:
        ip = _l3(buf)
        if ip is not None and isinstance(ip.data, dpkt.tcp.TCP):
            t = ip.data
            out[(_endpoint(ip.src, t.sport), _endpoint(ip.dst, t.dport))] += bytes(t.data)
    return {k: bytes(v) for k, v in out.items() if v}


def sent_datagrams(frames: list[bytes]) -> dict[tuple[str, str], list[bytes]]:
    """Each UDP flow direction's datagram payloads, in order."""
    out: dict[tuple[str, str], list[bytes]] = defaultdict(list)
    for buf in frames:
        ip = _l3(buf)
        if ip is not None and isinstance(ip.data, dpkt.udp.UDP):
            u = ip.data
            out[(_endpoint(ip.src, u.sport), _endpoint(ip.dst, u.dport))].append(bytes(u.data))
    return dict(out)


def tshark_problems(path: Path) -> list[str]:
    """The output's lines tshark flags (TSHARK_PROBLEMS), with the reasons it gives."""
    res = subprocess.run(["tshark", "-r", str(path), *TSHARK_OPTS, "-Y", TSHARK_PROBLEMS,
                          "-T", "fields", "-e", "frame.number", "-e", "_ws.expert.message",
                          "-e", "tcp.analysis.flags"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return [line for line in res.stdout.splitlines() if line.strip()]


def tshark_streams(path: Path) -> dict[tuple[str, str], bytes]:
    """Every TCP stream of the output as tshark reassembles it (follow,tcp,raw): (source,
    destination) -> bytes, per direction."""
    res = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "tcp.stream"],
                         capture_output=True, text=True, timeout=300)
    ids = sorted({int(x) for x in res.stdout.split()})
    out: dict[tuple[str, str], bytes] = {}
    for k in range(0, len(ids), 200):  # many streams per tshark run
        args = [a for i in ids[k:k + 200] for a in ("-z", f"follow,tcp,raw,{i}")]
        res = subprocess.run(["tshark", "-r", str(path), "-q", *args],
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr
        for block in res.stdout.split("=" * 67):
            nodes = re.findall(r"^Node (\d): (.+)$", block, re.M)
            if len(nodes) != 2:
                continue
            n0, n1 = nodes[0][1].strip(), nodes[1][1].strip()
            data = {0: bytearray(), 1: bytearray()}
            for line in block.splitlines():
                if re.fullmatch(r"\t?[0-9a-f]+", line):
                    data[1 if line.startswith("\t") else 0] += bytes.fromhex(line.strip())
            if data[0]:
                out[(n0, n1)] = bytes(data[0])
            if data[1]:
                out[(n1, n0)] = bytes(data[1])
    return out


def reassembled_datagrams(path: Path) -> dict[tuple[str, str], list[bytes]]:
    """The output's UDP datagram payloads per flow direction (sorted: reassembly does
    not keep the order), fragments put back together by scapy (defragment for IPv4,
    defragment6 per IPv6 fragment Identification)."""
    from scapy.layers.inet import IP, UDP, defragment
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, defragment6
    from scapy.utils import rdpcap

    pkts = list(rdpcap(str(path)))
    v4 = [p for p in pkts if IP in p and p[IP].proto == 17]
    whole = list(defragment(v4))
    groups: dict[tuple, list] = defaultdict(list)
    for p in pkts:
        if IPv6 in p and IPv6ExtHdrFragment in p:
            groups[(p[IPv6].src, p[IPv6].dst, p[IPv6ExtHdrFragment].id)].append(p)
        elif IPv6 in p and UDP in p:
            whole.append(p)
    whole += [defragment6(g) for g in groups.values()]
    out: dict[tuple[str, str], list[bytes]] = defaultdict(list)
    for p in whole:
        if UDP not in p:
            continue
        ip = p[IP] if IP in p else p[IPv6]
        src = f"[{ip.src}]:{p[UDP].sport}" if IPv6 in p else f"{ip.src}:{p[UDP].sport}"
        dst = f"[{ip.dst}]:{p[UDP].dport}" if IPv6 in p else f"{ip.dst}:{p[UDP].dport}"
        out[(src, dst)].append(bytes(p[UDP].payload))
    return {k: sorted(v) for k, v in out.items()}
