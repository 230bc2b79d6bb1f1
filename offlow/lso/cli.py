"""`offlow lso sends` (write a capture of large sends) and `offlow lso run` (post a
capture's sends to a program whose device cuts them; print what it made)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from offlow.argtypes import SEED, File, Names, NewFile, Whole
from offlow.errors import OfflowError
from offlow.paths import DATA

SOURCES = ("tls", "quic", "stream")


def add_arguments(sub: argparse._SubParsersAction, parser_class: type) -> None:
    """The `lso` subcommands on `sub`."""
    s = sub.add_parser("sends", help="write a capture whose frames each carry a whole large "
                       "send, built from the shared captures' flows or a stream")
    s.add_argument("--output", type=NewFile(), required=True, help="the capture to write")
    s.add_argument("--from", dest="sources", type=Names(SOURCES), default="tls,quic,stream",
                   help="comma-separated: tls (TCP connections of tls_ciphers.pcap), quic "
                        "(UDP flows of quic.pcap), stream (--stream as TCP and UDP)")
    s.add_argument("--stream", type=File(),
                   help="with `--from stream`: the stream's bytes (default: the first MiB "
                        "of the BGP table)")
    s.add_argument("--ipv6", action="store_true", help="IPv6 too (2001:db8::a.b.c.d)")
    s.add_argument("--seed", type=SEED, default=1, help="seed of the send sizes")
    s.set_defaults(fn=_sends)
    r = sub.add_parser("run", help="post a capture's sends through a send port to a program "
                       "whose device cuts them, write what it makes")
    r.add_argument("program", type=File(), nargs="?",
                   help="a Python file defining program() (default: examples/lso.py)")
    r.add_argument("--input", type=File(), required=True,
                   help="a capture whose frames each carry a whole send (offlow lso sends)")
    r.add_argument("--output", type=NewFile(), help="pcap for the packets made (else counted)")
    r.add_argument("--mtu", type=Whole(68, 9216, "the link's IP MTU"), default=1500,
                   help="the link's IP MTU (68..9216)")
    r.add_argument("--move", choices=["pio", "dma", "auto", "place"], default="pio",
                   help="payloads leave the send buffer by the NIC core (pio), its copy "
                        "engine (dma), the engine from --dma-min bytes (auto), or not at "
                        "all: each packet's headers written in place before its payload "
                        "(place)")
    r.add_argument("--dma-min", type=Whole(0, 65535, "payload bytes"),
                   help="with --move auto: the smallest payload the engine moves (default 1024)")
    r.add_argument("--offload", action="store_true",
                   help="leave checksums to the MAC (pseudo-header sums, IPv4 checksum 0)")
    r.add_argument("--json", action="store_true", help="print the statistics as JSON")
    r.set_defaults(fn=_run)


def _sends(a: argparse.Namespace) -> int:
    from offlow.lso import sends as gen

    wanted = [x.strip() for x in a.sources.split(",")]
    if a.stream is not None and "stream" not in wanted:
        raise OfflowError(f"--stream {a.stream}: goes with `--from stream` (--from "
                          f"{a.sources} reads no stream)")
    families = [False, True] if a.ipv6 else [False]
    frames: list[bytes] = []
    for v6 in families:
        if "tls" in wanted:
            frames += gen.tcp_sends(_data("tls_ciphers.pcap"), ipv6=v6, seed=a.seed)
        if "quic" in wanted:
            frames += gen.udp_sends(_data("quic.pcap"), ipv6=v6, seed=a.seed)
        if "stream" in wanted:
            path = a.stream or _data("bgp-full-table.txt.gz")
            data = path.read_bytes()[:1 << 20]
            frames += gen.stream_sends(data, "tcp", ipv6=v6, seed=a.seed)
            frames += gen.stream_sends(data[:1 << 18], "udp", ipv6=v6, seed=a.seed)
    gen.write_pcap(a.output, frames)
    big = sum(1 for f in frames if len(f) > 1514)
    print(f"wrote {len(frames):,} sends ({big:,} longer than a 1500-byte MTU's frame, "
          f"{sum(map(len, frames)):,} bytes) to {a.output}")
    return 0


def _data(name: str) -> Path:
    path = DATA / name
    if not path.is_file():
        raise OfflowError(f"{path}: not found (the shared captures; $OFFLOW_DATA names them)")
    return path


def _run(a: argparse.Namespace) -> int:
    from offlow.dsl.loader import load_program
    from offlow.lso.app import EXAMPLE, format_outcome, kinds_of, run_capture

    if a.dma_min is not None and a.move != "auto":
        raise OfflowError(f"--dma-min {a.dma_min}: goes with --move auto (--move {a.move} "
                          "never asks the payload's size)")
    o = run_capture(load_program(a.program or EXAMPLE), a.input, offload=a.offload, output=a.output,
                    mtu=a.mtu, move=a.move, dma_min=a.dma_min)
    if a.json:
        print(json.dumps({**o.summary, "ok": o.ok, "errors": o.result.errors + o.errors,
                          "kinds": kinds_of(o.summary), "posted": o.posted,
                          "skipped": o.skipped,
                          "refused": sum(1 for c in o.completions if c.status)}, indent=2))
    else:
        print(format_outcome(o))
    for err in o.result.errors + o.errors:
        print(f"offlow: error: {err}")
    return 0 if o.ok else 1
