"""What every example program outputs, recorded as digests, so that a change to the
compiler or the runtime that should not change behaviour is checked to change none.

Each case runs an example (placement settings, an input) and keeps:
- `pcap`: the SHA-256 of the output capture's bytes (file header and every record:
  frames and timestamps), or, for a case whose frames may leave in another order from
  run to run (several cores or processes feed its sink), of its records sorted;
- `counts`: the run's packet accounting and its per-element, per-source, per-sink and
  per-table counters (no timings), where they are the same from run to run.

tests/test_example_outputs.py checks them against example_outputs.json. After a
deliberate change of what an example outputs, record them again (and say so in the
commit message):

    OFFLOW_DATA=/work/shared/data .venv/bin/python -m tests.example_outputs --record
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import struct
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offlow.kvs.steps import OP_GET, OP_SET, bin_req, store_extras, udp_dgram, udp_steps
from offlow.paths import DATA
from offlow.testing.malformed import eth, ipv4, udp, write_malformed_pcap
from tests.e2e import ROOT, run_example

RECORDED = Path(__file__).with_name("example_outputs.json")
EXAMPLES = ROOT / "examples"
BGP = DATA / "bgp-full-table.txt.gz"
SORTED, IN_ORDER = "sorted", "in order"


@dataclass(frozen=True)
class Case:
    """One example run: the program, its settings, its input (a capture name: a
    shared one, `malformed` or `requests` made here; None: synthetic traffic) and
    the run options; `order`: whether the output's records come in one order."""

    name: str
    program: str
    settings: tuple[str, ...] = ()
    capture: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    order: str = IN_ORDER
    counts: bool = True  # the counters are the same from run to run


SYNTH = (("count", 6000), ("seed", 7), ("sizes", "64:5,128:2,576:2,1500:1"))
ROUTED = (("count", 20000), ("seed", 3), ("prefixes", BGP))

CASES = (
    Case("ttl_pipeline-tls", "ttl_pipeline.py", capture="tls_ciphers.pcap"),
    Case("ttl_pipeline-quic", "ttl_pipeline.py", capture="quic.pcap"),
    Case("ttl_pipeline-malformed", "ttl_pipeline.py", capture="malformed"),
    Case("ttl_pipeline-synthetic", "ttl_pipeline.py", options=SYNTH),
    Case("ttl_pipeline-host-only", "ttl_pipeline.py", ("rx.device=host",),
         capture="tls_ciphers.pcap"),
    Case("ttl_pipeline-two-rx-cores", "ttl_pipeline.py", ("rx.cores=0,1",), options=SYNTH,
         order=SORTED),
    Case("router-tls", "router.py", capture="tls_ciphers.pcap"),
    Case("router-quic", "router.py", capture="quic.pcap"),
    Case("router-malformed", "router.py", capture="malformed"),
    Case("router-synthetic", "router.py", options=ROUTED),
    Case("router-route-on-host", "router.py", ("route.device=host",), options=ROUTED),
    Case("router-route-group", "router.py", ("route.cores=0,1", "route.group=on"),
         options=ROUTED, order=SORTED),
    Case("kvs-requests", "kvs.py", capture="requests"),
    # an ordered core group of two NIC cores encrypts: the output keeps the input order
    Case("crypto-quic", "crypto.py", capture="quic.pcap"),
    Case("kvs-split-requests", "kvs.py", ("parse.device=nic",), capture="requests"),
    # hits leave from the NIC and misses come back from the host: the reply segment
    # takes both, in whatever order they arrive, and which requests hit depends on
    # when the store's replies filled the cache
    Case("kvs_cache-requests", "kvs_cache.py", capture="requests", order=SORTED,
         counts=False),
    Case("kvs_cache-write-back-requests", "kvs_cache.py", ("cache.policy=write_back",),
         capture="requests", order=SORTED, counts=False),
)


def request_frames(n: int = 600, seed: int = 5) -> list[bytes]:
    """Memcached requests over UDP in Ethernet frames: every UDP step of `offlow kvs
    interop` (all commands, their errors and malformed datagrams), then `n` seeded GETs
    and SETs over a few dozen keys, from one client port per request."""
    payloads = [s.data for s in udp_steps() if isinstance(s.data, bytes)]
    rng = random.Random(seed)
    for i in range(n):
        key = b"key:%d" % int(rng.paretovariate(1.2) % 40)
        if rng.random() < 0.3:
            value = bytes(rng.choice(b"abcdefgh") for _ in range(rng.choice((3, 64, 700))))
            req = bin_req(OP_SET, key, store_extras(i), value, opaque=i)
        else:
            req = bin_req(OP_GET, key, opaque=i)
        payloads.append(udp_dgram(0x4000 + i, req))
    return [eth(0x0800) + ipv4(udp(20000 + i % 30000, 11211, p, version=4), 17)
            for i, p in enumerate(payloads)]


def _write_requests(path: Path) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(request_frames()):
            f.write(struct.pack("<IIII", 1_700_000_000, i, len(fr), len(fr)))
            f.write(fr)


def _input(case: Case, folder: Path) -> Path | None:
    """The capture the case reads (made in `folder` when it is one of ours)."""
    if case.capture is None:
        return None
    if case.capture == "malformed":
        path = folder / "malformed.pcap"
        write_malformed_pcap(path)
        return path
    if case.capture == "requests":
        path = folder / "requests.pcap"
        _write_requests(path)
        return path
    return DATA / case.capture


def _records(data: bytes) -> list[bytes]:
    """The records (header and frame) of a classic pcap file, in file order."""
    out, off = [], 24
    while off < len(data):
        incl = struct.unpack_from("<I", data, off + 8)[0]
        out.append(data[off:off + 16 + incl])
        off += 16 + incl
    return out


def pcap_digest(data: bytes, order: str) -> str:
    """SHA-256 of the capture's bytes, or of its header and its records sorted."""
    if order == SORTED:
        data = data[:24] + b"".join(sorted(_records(data)))
    return hashlib.sha256(data).hexdigest()


def counters(s: dict[str, Any]) -> dict[str, Any]:
    """What a run counted that does not depend on timing: the accounting, and per
    element, source, sink, queue and table the packets (no rates, waits or
    doorbells)."""
    acc = dict(s["accounting"])
    acc["dropped"] = sorted(acc["dropped"], key=lambda d: (d["at"], d["reason"]))
    return {
        "accounting": acc,
        "elements": s["elements"],
        "sources": s["sources"],
        "sinks": {k: {x: v[x] for x in ("packets", "sent", "dropped", "to_self") if x in v}
                  for k, v in s["sinks"].items()},
        "queues": {q["queue"]: {"packets": q["packets"], "delivered": q["delivered"],
                                "bytes": q["bytes"], "dropped": q["dropped"]}
                   for q in s["queues"]},
        "tables": s["tables"],
    }


def outputs(case: Case) -> dict[str, Any]:
    """Run `case` and return what it output, as recorded."""
    with tempfile.TemporaryDirectory(prefix="offlow-golden-") as tmp:
        folder = Path(tmp)
        out = folder / "out.pcap"
        s = run_example(case.settings, program=EXAMPLES / case.program,
                        input=_input(case, folder), output=out, **dict(case.options))
        if not s["ok"]:
            raise RuntimeError(f"{case.name}: the run failed: {s['errors']}")
        got: dict[str, Any] = {"pcap": pcap_digest(out.read_bytes(), case.order),
                               "frames": s["accounting"]["forwarded"]}
    if case.counts:
        got["counts"] = counters(s)
    return got


def recorded() -> dict[str, Any]:
    return json.loads(RECORDED.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", action="store_true", help=f"write {RECORDED.name}")
    ap.add_argument("--case", action="append", help="only these cases (default: all)")
    a = ap.parse_args(argv)
    cases = [c for c in CASES if not a.case or c.name in a.case]
    results = {c.name: outputs(c) for c in cases}
    if a.record:
        old = recorded() if RECORDED.exists() else {}
        RECORDED.write_text(json.dumps({**old, **results}, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(results)} cases in {RECORDED}")
        return 0
    want = recorded()
    bad = [c for c in results if results[c] != want.get(c)]
    for c in bad:
        print(f"{c}: differs from {RECORDED.name}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
