"""What two builds of a program must share for one to replace the other's code while
it runs (offlow reload, docs/reload.md): its tables, queues, segments and elements as
the generated structures lay them out. `describe` gives that as plain data, `differences`
says in words what differs between two descriptions."""

from __future__ import annotations

from typing import Any

from offlow.codegen import mapdecl
from offlow.ir.layout import EntryLayout
from offlow.plan import Plan


def describe(plan: Plan) -> dict[str, Any]:
    """The layout of `plan`'s running state, as JSON-ready data: the program's name,
    mtu and state record, every table (type, length, where it lives; a map's key and
    value fields), every queue (its segments, rings, ring size, batch, entry bytes,
    each channel's fields and offsets), every segment (device, cores, core group, its
    elements in order with their drop reasons, its vector elements) and the window's
    channels."""
    g = plan.graph
    return {
        "program": g.name,
        "mtu": g.mtu,
        "state": [f"{f.name}:{f.ctype}" for f in g.state],
        # (a map keeps its entries across a reload: its key's and value's fields are
        # its layout, and new code reading a 33-byte record as a 40-byte one would
        # reach past each slot)
        "tables": {t.name: f"{t.ctype}[{t.length}] in {t.home or 'nowhere'}"
                   + (f" ({t.open_fn})" if t.open_fn else "")
                   + (f", map {mapdecl.layout(t)}" if t.is_map else "") for t in g.shared},
        "queues": {q.queue.name: f"{q.queue.src_segment} -> {q.queue.dst_segment}, "
                   f"{len(q.rings)} ring{'s' * (len(q.rings) != 1)} of {q.queue.ring_size} entries "
                   f"of {q.entry_size} B, "
                   f"batch {q.queue.batch}, channels "
                   + "; ".join(_fields(lay) for lay in q.layouts)
                   for q in plan.queues},
        "segments": {p.name: f"{p.device} cores {list(p.cores)}"
                     + (" (core group)" if p.group else "") + ", elements "
                     + ", ".join(_node(plan, n) for n in p.nodes)
                     + (f", vector {', '.join(p.vector)}" if p.vector else "")
                     for d in plan.devices for p in d.segments},
        "channels": list(plan.window_channels),
    }


def _fields(lay: EntryLayout) -> str:
    return ",".join(f"{f.name}@{off}" for f, off in lay.fields) or "-"


def _node(plan: Plan, name: str) -> str:
    n = plan.graph.node(name)
    drops = f" drops {'/'.join(r for r, _ in n.drops)}" if n.drops else ""
    return f"{name}{drops}{' at_end' if n.at_end else ''}"


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two descriptions, one line each: `what: running X, new Y`."""
    out = []
    for key in old.keys() | new.keys():
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(a.keys() | b.keys()):
                if a.get(name) != b.get(name):
                    out.append(f"{key[:-1]} `{name}`: running {a.get(name) or 'none'}, "
                               f"new {b.get(name) or 'none'}")
        else:
            out.append(f"{key}: running {a}, new {b}")
    return sorted(out)
