"""tests/programs/xdp_ttl.py, the same elements and wiring, with its path split: the
parsing, checks and TTL in segment `edge` (on xdp: `--set edge.device=xdp`), the
marking and the sink in segment `app` on the host, so packets cross from XDP to the
host (AF_XDP, the live fields in XDP metadata). `offlow bench xdp --e2e` runs it."""

import runpy
from pathlib import Path

from offlow import Program


def program() -> Program:
    made = runpy.run_path(str(Path(__file__).with_name("xdp_ttl.py")))["program"](split=True)
    assert isinstance(made, Program)
    return made
