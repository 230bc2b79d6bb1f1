"""Compiler passes, each a function Graph -> Graph with its own tests.

`compile_graph` runs them in order; the fused segment plans come from `fuse`."""

from __future__ import annotations

from collections.abc import Callable

from offlow.ir import Graph
from offlow.passes.analyze import analyze_bodies
from offlow.passes.balance import split_balanced
from offlow.passes.cache import expand_caches
from offlow.passes.check import check_ports
from offlow.passes.liveness import liveness
from offlow.passes.loops import check_loops
from offlow.passes.mtu import fit_mtu
from offlow.passes.place import place
from offlow.passes.queues import insert_queues
from offlow.passes.spread import spread_segments
from offlow.passes.state_check import check_state

PIPELINE: tuple[Callable[[Graph], Graph], ...] = (
    split_balanced, expand_caches, check_ports, analyze_bodies, spread_segments, place,
    check_loops, check_state, insert_queues, liveness, fit_mtu,
)


def compile_graph(g: Graph) -> Graph:
    """Run every pass in order and return the compiled graph."""
    for p in PIPELINE:
        g = p(g)
    return g
