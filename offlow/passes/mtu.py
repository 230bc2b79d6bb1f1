"""An mtu fitted to the run's input (not set by the program) is lowered, when a queue
cannot carry frames that long, to the largest one every queue can (ir.layout's
max_mtu): longer frames are then dropped and counted at the source, as frames longer
than a program's own mtu are. An mtu the program sets is kept (and a queue that cannot
carry it is a compile error saying how far to lower it)."""

from __future__ import annotations

from dataclasses import replace

from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.ir.layout import max_mtu


def fit_mtu(g: Graph) -> Graph:
    """Lower a fitted mtu to what every queue carries; refuse a set one above it."""
    if not g.queues:
        return g
    q = min(g.queues, key=max_mtu)
    most = max_mtu(q)
    if g.mtu <= most:
        return g
    if not g.mtu_fitted:
        raise OfflowError(f"an mtu of {g.mtu} does not fit queue `{q.name}`: with several "
                          "channels it counts a channel's fields and packet bytes in 16 bits; "
                          f"set the mtu to at most {most}")
    return replace(g, mtu=most, mtu_why=f"{g.mtu_why}, lowered to what queue entries with "
                                        "several channels hold")
