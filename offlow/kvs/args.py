"""The load generator's option values and `offlow kvs quick`'s options, apart from the
tools that run them (offlow.kvs.tools, offlow.kvs.quick): parsing arguments, and so
`offlow --help` and `offlow bench --help`, imports these only."""

from __future__ import annotations

import argparse

from offlow.argtypes import Names, Number, Whole

# kvs_loadgen.c's bounds of --duration and --depth (the CLIs' value types)
LOAD_SECONDS = Number(0.01, 86400, unit="seconds")
LOAD_DEPTH = Whole(1, 4096, "requests in flight")


def add_quick_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `offlow kvs quick` (and `python -m offlow.kvs.quick`)."""
    ap.add_argument("--reps", type=Whole(1), default=3, help="pairs of runs per protocol")
    ap.add_argument("--duration", type=LOAD_SECONDS, default=4.0,
                    help="seconds of load per run")
    ap.add_argument("--protos", type=Names(("udp", "tcp")), default="udp,tcp",
                    help="protocols, comma-separated")
    ap.add_argument("--depth", type=LOAD_DEPTH, default=16,
                    help="requests in flight per connection")
