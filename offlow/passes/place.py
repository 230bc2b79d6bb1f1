"""Placement: check segments and decide where each shared table lives."""

from __future__ import annotations

from dataclasses import replace

from offlow.errors import OfflowError
from offlow.ir import Channel, Graph


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
    channels = tuple(_place_channel(g, c) for c in g.channels)
    shared = []
    for t in g.shared:
        devices = {g.segment(n.segment).device for n in g.nodes
                   if any(ref == t.name for _, ref in n.tables)}
        devices = sorted(devices | {c.device for c in channels
                                    if any(ref == t.name for _, ref in c.handler.tables)})
        if t.is_object and len(devices) > 1:
            raise OfflowError(
                f"table `{t.name}` ({t.ctype}) is used on {' and '.join(devices)}; a table "
                "object lives in one device's memory: give each device its own Table, or "
                "place its users on one device")
        if t.one_core:
            _check_one_core(g, t.name)
        handler = next((c for c in channels if t.is_map
                        and any(ref == t.name for _, ref in c.handler.tables)), None)
        if handler is not None:
            raise OfflowError(
                f"channel `{handler.name}`: its handler {handler.handler.name} names shared map "
                f"`{t.name}`, which its elements change without locks on their one core, and "
                "a handler runs on the channel manager's thread beside them: answer from a "
                "Shared array the elements keep instead")
        # (whether it travels there over a bulk channel is the plan's decision: it
        # depends on what the device's target can read, offlow.plan)
        shared.append(replace(t, home=devices[0] if len(devices) == 1 else "window"))
    return replace(g, shared=tuple(shared), channels=channels)


def _place_channel(g: Graph, c: Channel) -> Channel:
    """A channel without a device runs where the segments using its tables run."""
    if c.device:
        if c.device not in {s.device for s in g.segments}:
            raise OfflowError(f"channel `{c.name}`: no segment runs on {c.device}, so no "
                              "process there can serve it; place a segment there or serve "
                              "it on another device")
        return c
    refs = {ref for _, ref in c.handler.tables}
    devices = sorted({g.segment(n.segment).device for n in g.nodes
                      if any(ref in refs for _, ref in n.tables)})
    if len(devices) != 1:
        why = (f"its tables are used on {' and '.join(devices)}" if devices
               else "no segment uses its tables")
        raise OfflowError(f"channel `{c.name}`: cannot tell which device serves it ({why}); "
                          "say device=... in program.channel()")
    return replace(c, device=devices[0])


def _check_one_core(g: Graph, table: str) -> None:
    """The elements that use a one-core table (state changed without locks) run on one
    core of one device, all of them."""
    users = [n for n in g.nodes if any(ref == table for _, ref in n.tables)]
    cores = {(g.segment(n.segment).device, c) for n in users
             for c in g.segment(n.segment).cores}
    if len(cores) > 1:
        where = ", ".join(f"`{n.name}` in segment `{n.segment}` (cores "
                          f"{','.join(map(str, g.segment(n.segment).cores))})" for n in users)
        t = next(x for x in g.shared if x.name == table)
        what = ("a hash map changed without locks" if t.is_map
                else "kept in arrival order, without locks")
        hint = ("" if t.is_map
                else ", and give each stream of a data-parallel query an element of its own")
        raise OfflowError(
            f"table `{table}` is one core's state ({what}) but {where} would run on "
            f"{len(cores)} cores; place its segment on one core{hint}")
