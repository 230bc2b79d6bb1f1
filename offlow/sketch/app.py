"""NFComms' application: the NIC keeps a PCSA sketch of IPv4 sources; the host asks
for it over a direct channel and compares the estimate with the exact count and with
Apache DataSketches' HLL over the same sources."""

from __future__ import annotations

import struct
from pathlib import Path

import dpkt
import numpy as np

from offlow.dsl.loader import load_program
from offlow.runner import RunOptions
from offlow.session import session
from offlow.sketch.pcsa import parse_summary, pcsa_estimate, pcsa_raw, pcsa_standard_error

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pcsa.py"


def ipv4_sources(path: Path) -> np.ndarray:
    """IPv4 source addresses of the frames of a pcap that the NIC counts (Ethernet,
    up to two VLAN tags, an IPv4 header with a valid checksum); pcap read by dpkt."""
    out = []
    with open(path, "rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            off, etype = 14, int.from_bytes(buf[12:14], "big")
            for _ in range(2):
                if etype in (0x8100, 0x88A8) and len(buf) >= off + 4:
                    etype, off = int.from_bytes(buf[off + 2:off + 4], "big"), off + 4
            if etype != 0x0800 or len(buf) < off + 20 or buf[off] >> 4 != 4:
                continue
            hdr = bytes(buf[off:off + (buf[off] & 0xF) * 4])
            if len(hdr) < 20 or len(hdr) != (buf[off] & 0xF) * 4:
                continue
            if sum(struct.unpack(f"!{len(hdr) // 2}H", hdr)) % 0xFFFF:
                continue
            out.append(int.from_bytes(hdr[12:16], "big"))
    return np.array(out, dtype=np.uint32)


def hll_estimate(sources: np.ndarray, lg_k: int = 11) -> float:
    """Apache DataSketches HLL (2^lg_k buckets) over the same sources."""
    from datasketches import hll_sketch

    h = hll_sketch(lg_k)
    for s in sources.tolist():
        h.update(int(s))
    return float(h.get_estimate())


def run(input: Path, loops: int = 1, program: Path = EXAMPLE) -> dict:
    """Run the PCSA program over `input` and return the three counts."""
    with session(load_program(program), RunOptions(input=input, loops=loops)) as s:
        s.wait_drained()
        summary = s.channel("pcsa").request(b"summary")
    sources = ipv4_sources(input)
    exact = len(np.unique(sources))
    est = pcsa_estimate(summary)
    _, m, empty = parse_summary(summary)
    hll = hll_estimate(sources)
    return {"packets": int(len(sources)) * loops, "exact": exact, "pcsa": est,
            "pcsa_error": (est - exact) / exact if exact else None,
            "pcsa_raw": pcsa_raw(summary), "empty_bitmaps": empty,
            "pcsa_standard_error": pcsa_standard_error(m), "bitmaps": m,
            "hll": hll, "hll_error": (hll - exact) / exact if exact else None}


def format_result(r: dict) -> str:
    """The comparison as a few lines."""
    def err(x: float | None) -> str:
        return f"{x:+.2%}" if x is not None else "-"
    return "\n".join([
        f"IPv4 packets counted: {r['packets']:,}",
        f"exact distinct sources: {r['exact']:,}",
        f"PCSA on the NIC ({r['bitmaps']} bitmaps): {r['pcsa']:,.0f} ({err(r['pcsa_error'])}; "
        f"standard error {r['pcsa_standard_error']:.2%}; raw Flajolet-Martin "
        f"{r['pcsa_raw']:,.0f}, {r['empty_bitmaps']} empty bitmaps)",
        f"DataSketches HLL (lg_k 11, host): {r['hll']:,.0f} ({err(r['hll_error'])})",
    ])
