"""`offlow tuples generate` (a seeded tuple stream to a CSV, binary or capture file),
`offlow tuples convert` (a CSV or binary tuple file to the capture a program's source
reads) and `offlow tuples send` (a tuple file's tuples as UDP datagrams to a program run
with --udp PORT, ts added on arrival)."""

from __future__ import annotations

import argparse
import socket
import struct
import time
from pathlib import Path

from offlow.argtypes import INT_MAX, PORT, SEED, File, NewFile, Whole, rate
from offlow.errors import OfflowError
from offlow.streams import tuples as tf

DEFAULT_PORT = 7001  # a capture's UDP destination port


def add_arguments(sub: argparse._SubParsersAction) -> None:
    """The `tuples` subcommands on `sub`."""
    g = sub.add_parser("generate", help="write a seeded random tuple stream")
    g.add_argument("output", type=NewFile(), help="FILE.csv, FILE.bin (binary) or FILE.pcap")
    g.add_argument("--count", type=Whole(0), default=10_000, help="tuples")
    g.add_argument("--values", type=Whole(1, tf.MAX_VALUES), default=tf.SEED_VALUES,
                   help="values a tuple (39: 164-byte records, the seed's tuples)")
    g.add_argument("--seed", type=SEED, default=1, help="random seed")
    g.add_argument("--gap-ns", type=Whole(0), default=1000,
                   help="ts grow by 0..2*GAP ns from one tuple to the next")
    g.add_argument("--disorder", type=Whole(0), default=0,
                   help="shuffle blocks of DISORDER+1 tuples (each at most DISORDER places "
                        "from its place in ts order)")
    g.add_argument("--high", type=Whole(0, INT_MAX, "the largest 32-bit value"), default=99,
                   help="values are uniform in 0..HIGH")
    g.add_argument("--port", type=PORT, default=None,
                   help=f"a .pcap output's UDP destination port (default {DEFAULT_PORT})")
    g.set_defaults(fn=_generate)
    c = sub.add_parser("convert", help="a CSV or binary tuple file to a capture (one frame a "
                       "tuple, stamped with its ts)")
    c.add_argument("input", type=File(), help="a CSV or binary tuple file")
    c.add_argument("output", type=NewFile(), help="the capture to write")
    c.add_argument("--port", type=PORT, default=DEFAULT_PORT, help="the UDP destination port")
    c.set_defaults(fn=_convert)
    s = sub.add_parser("send", help="send a tuple file's tuples as UDP datagrams")
    s.add_argument("input", type=File(), help="a CSV or binary tuple file")
    s.add_argument("--to", type=PORT, required=True, help="the UDP port on 127.0.0.1")
    s.add_argument("--rate", type=rate("tuples/s"), default=0.0,
                   help="tuples/s (0: as fast as possible)")
    s.set_defaults(fn=_send)


def _read(path: Path) -> list[tf.Tuple]:
    got = tf.read_tuples(path)
    if got.bad:
        print(f"offlow tuples: skipped {got.bad} line(s) or record(s) that hold no tuple: "
              + "; ".join(got.where))
    return got.tuples


def _write(path: Path, tuples: list[tf.Tuple], port: int) -> None:
    if path.suffix == ".csv":
        tf.write_csv(path, tuples)
    elif path.suffix == ".bin":
        tf.write_binary(path, tuples)
    else:
        tf.write_pcap(path, [(t, port) for t in tuples])
    print(f"{path}: {len(tuples)} tuples")


def _generate(a: argparse.Namespace) -> int:
    if a.output.suffix not in (".csv", ".bin", ".pcap"):
        raise OfflowError(f"{a.output}: name a .csv, .bin or .pcap file")
    if a.port is not None and a.output.suffix != ".pcap":
        raise OfflowError(f"--port {a.port}: goes with a .pcap output (a {a.output.suffix} "
                          "file has no UDP header)")
    _write(a.output, tf.generate(a.seed, a.count, a.values, a.gap_ns, a.disorder, 0, a.high),
           DEFAULT_PORT if a.port is None else a.port)
    return 0


def _convert(a: argparse.Namespace) -> int:
    if a.output.suffix != ".pcap":
        raise OfflowError(f"{a.output}: name a .pcap file")
    _write(a.output, _read(a.input), a.port)
    return 0


def _send(a: argparse.Namespace) -> int:
    tuples = _read(a.input)
    gap = 1.0 / a.rate if a.rate > 0 else 0.0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for t in tuples:
            s.sendto(struct.pack(f"<{len(t.v)}i", *t.v), ("127.0.0.1", a.to))
            if gap:
                time.sleep(gap)
    print(f"sent {len(tuples)} tuples to 127.0.0.1:{a.to}")
    return 0
