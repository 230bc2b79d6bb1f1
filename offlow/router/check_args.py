"""The options of `offlow router check`, apart from the check itself (numpy, the C
driver's build), so that the command line says them without importing it."""

from __future__ import annotations

import argparse

from offlow.argtypes import SEED, File, NewFile, Whole
from offlow.paths import DATA
from offlow.router import DEFAULT_PORTS, MAX_HOP

DEFAULT_PREFIXES = DATA / "bgp-full-table.txt.gz"
DEFAULT_RANDOM = 1_000_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `offlow router check`."""
    p.add_argument("--prefixes", type=File(), default=DEFAULT_PREFIXES,
                   help="prefix file, plain or gzip (default: the shared BGP table)")
    p.add_argument("--random", type=Whole(0), default=DEFAULT_RANDOM,
                   help="random addresses per family besides the prefix boundaries "
                        f"(default {DEFAULT_RANDOM:,})")
    p.add_argument("--seed", type=SEED, default=1, help="seed of the random addresses")
    p.add_argument("--nports", type=Whole(1, MAX_HOP), default=DEFAULT_PORTS,
                   help=f"ports of the next-hop rule (default {DEFAULT_PORTS})")
    p.add_argument("--json-out", type=NewFile(), help="also write the summary as JSON here")
