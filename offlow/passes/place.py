"""Placement: check segments and decide where each shared table lives."""

from __future__ import annotations

from dataclasses import replace

from offlow.errors import OfflowError
from offlow.ir import Graph


def place(g: Graph) -> Graph:
    """A table used on one device lives in that device's memory; a table used on
    several devices lives in the interconnect window, which both can reach."""
    for s in g.segments:
        if not any(n.segment == s.name for n in g.nodes):
            raise OfflowError(f"segment `{s.name}` has no elements; remove it or add elements")
        sources = [n.name for n in g.nodes if n.segment == s.name and n.kind == "source"]
        if s.group and sources:
            raise OfflowError(
                f"segment `{s.name}` is a core group but holds source `{sources[0]}`; a group "
                "takes its batches from a queue: move the source to a segment of its own")
    shared = []
    for t in g.shared:
        devices = sorted({g.segment(n.segment).device for n in g.nodes
                          if any(ref == t.name for _, ref in n.tables)})
        if t.is_object and len(devices) > 1:
            raise OfflowError(
                f"table `{t.name}` ({t.ctype}) is used on {' and '.join(devices)}; a table "
                "object lives in one device's memory: give each device its own Table, or "
                "place its users on one device")
        home = devices[0] if len(devices) == 1 else "window"
        shared.append(replace(t, home=home))
    return replace(g, shared=tuple(shared))
