"""Scale-out: a queue whose instances are spread over several remote devices
(``p.queue("parse", "store", instances=4, steer="kv_hash", devices=["remote:a",
"remote:b"])``) runs its destination segment on each of them.

The segment keeps its name, elements and tables; its cores become one set per device:
with D devices and the segment's C cores, core index k (0..D*C-1) runs on device
k % D as that device's core `cores[k // D]`. A queue's instance i is taken by core
i % (D*C) (offlow.plan), so it runs on device i % D: steering by a key's hash puts
every packet of a key on one device, and each device's copy of the segment's tables
holds the keys steered there (a table sharded by key). Runs before placement, which
then sees the segment on its first device."""

from __future__ import annotations

from dataclasses import replace

from offlow.errors import OfflowError
from offlow.ir import Graph, QueueSpec, Segment


def spread_segments(g: Graph) -> Graph:
    """Spread the destination segment of every queue that names devices."""
    spread: dict[str, str] = {}
    for spec in g.queue_specs:
        if not spec.devices or spec.dst_segment not in {s.name for s in g.segments}:
            continue  # (an unknown segment is insert_queues' error)
        name = f"{spec.src_segment}->{spec.dst_segment}"
        if spec.dst_segment in spread:
            raise OfflowError(f"queue `{name}`: segment `{spec.dst_segment}` is already spread "
                              f"by queue `{spread[spec.dst_segment]}`; name devices on one "
                              "queue into it")
        spread[spec.dst_segment] = name
        seg = _spread(g, spec, name)
        g = replace(g, segments=tuple(seg if s.name == seg.name else s for s in g.segments))
    return g


def _spread(g: Graph, spec: QueueSpec, name: str) -> Segment:
    devices, seg = spec.devices, g.segment(spec.dst_segment)
    where = f"queue `{name}` spread over {', '.join(devices)}"
    bad = [d for d in devices if not d.startswith("remote:")]
    if bad:
        raise OfflowError(f"{where}: `{bad[0]}` is not a remote device; the instances of a "
                          "queue spread over remote devices (remote:NAME) only")
    if len(set(devices)) != len(devices):
        raise OfflowError(f"{where}: a device is named twice")
    steer = seg.steer if spec.steer is None else spec.steer
    if not steer:
        raise OfflowError(f"{where}: the queue is not steered by key, so a key's packets "
                          "would reach every device; steer it by the key's hash "
                          f"(steer=\"FIELD\", or --set '{name}.steer=FIELD')")
    if spec.instances and spec.instances < len(devices):
        raise OfflowError(f"{where}: {spec.instances} instance"
                          f"{'s' * (spec.instances != 1)} for {len(devices)} devices; give at "
                          f"least one instance per device (instances={len(devices)} or more)")
    ends = [n.name for n in g.nodes if n.segment == seg.name and n.kind in ("source", "sink")]
    if ends:
        raise OfflowError(f"{where}: segment `{seg.name}` holds `{ends[0]}`, a "
                          f"{g.node(ends[0]).kind}, which every device would run; move it to a "
                          "segment of its own (on host)")
    if seg.group or seg.also:
        raise OfflowError(f"{where}: segment `{seg.name}` is a core group or split by a "
                          "balancer; a spread segment is data-parallel on each device")
    others = [s.name for s in g.segments if s.name != seg.name and s.device in devices]
    if others:
        raise OfflowError(f"{where}: segment `{others[0]}` is placed on one of them too; a "
                          "device a queue is spread over runs that queue's segment alone")
    d, c = len(devices), len(seg.cores)
    return replace(seg, device=devices[0],
                   cores=tuple(seg.cores[k // d] for k in range(d * c)),
                   spread=tuple(devices[k % d] for k in range(d * c)))
