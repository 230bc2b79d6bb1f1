"""The lowering plan: every decision about how a compiled program runs, made once.

`make_plan` takes the compiled graph (offlow.passes: what crosses each queue, where
each table lives) and the targets its devices name, and decides the rest: each
segment's fused loop and the CPUs of its cores, the threads of every device process,
each logical queue's entry layouts and rings (which producer core writes which
instance, which consumer core polls it), which tables travel to their device over a
bulk channel and who sends them, the channels of the window. Code generation, the
targets, `explain`, the run report and the runner only read the Plan; none of them
runs a pass."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from offlow.errors import OfflowError
from offlow.ir import Channel, Graph, Node, Queue, Segment, SharedTable
from offlow.ir.graph import (
    CHANNEL_NAME_MAX,
    CTL_CHANNEL_PREFIX,
    RELOAD_CHANNEL_PREFIX,
    channel_names,
)
from offlow.ir.layout import EntryLayout, channel_layouts, entry_size, state_bytes
from offlow.passes.fuse import CoreThread, SegmentPlan, fuse, threads
from offlow.passes.queues import consumer_cores


class Placement(Protocol):
    """What the plan needs to know of a device's target (offlow.targets.Target)."""

    @property
    def name(self) -> str: ...

    @property
    def reads_table_files(self) -> bool:
        """Its process reads the files tables are built from (else a table built there
        from a file is read by one that can and sent to it over a bulk channel)."""
        ...

    @property
    def sends_tables(self) -> bool:
        """Where it reads table files: its process also sends a table that travels to
        the devices that do not."""
        ...

    @property
    def serves_control(self) -> bool:
        """Its process serves the control channel of each table it holds."""
        ...

    @property
    def serves_map_control(self) -> bool:
        """Its process serves the control channel of each shared hash map it holds,
        though it serves no other table's (serves_control False: xdp)."""
        ...

    @property
    def no_reload(self) -> str:
        """Why its process takes no reloads though it serves control ("": it does)."""
        ...

    def cpu_base(self, ncpus: int) -> int:
        """The CPU its core 0 runs on, on a machine of `ncpus` CPUs."""
        ...

    def refuse_node(self, g: Graph, node: Node) -> str | None:
        """Why it cannot run `node` (an element, source, sink or channel handler);
        None when it can."""
        ...

    def refuse_segment(self, g: Graph, segment: Segment) -> str | None:
        """Why it cannot run `segment` as placed (a core group, say); None when it can."""
        ...

    @property
    def offload(self) -> tuple[int, int] | None:
        """Its default offload batch and depth when it runs segments in batches (gpu);
        None when it takes no offload settings."""
        ...


@dataclass(frozen=True)
class RingSlot:
    """One physical ring: instance `inst` of queue `queue` from producer core `prod`;
    consumer core `cons` (inst % consumer cores) takes it; `index`: its place in the
    window."""

    index: int
    queue: Queue
    prod: int
    inst: int
    cons: int


@dataclass(frozen=True)
class QueuePlan:
    """A logical queue as it runs: its channels' entry layouts and its rings."""

    queue: Queue
    layouts: tuple[EntryLayout, ...]  # per channel, in channel order
    entry_size: int  # bytes per ring entry: the largest channel's
    consumers: int  # cores taking its batches: every core of the consumer segment, or
    #                 a core group's master alone
    rings: tuple[RingSlot, ...]

    def polled_by(self, cons: int) -> list[int]:
        """The instances consumer core `cons` (an index into its segment's cores) takes."""
        return [i for i in range(self.queue.instances) if i % self.consumers == cons]


@dataclass(frozen=True)
class DevicePlan:
    """What one device runs: its target, the CPU of its core 0, its segments' loops,
    its threads and the channels it serves."""

    name: str
    target: str
    cpu_base: int
    segments: tuple[SegmentPlan, ...]
    threads: tuple[CoreThread, ...]
    channels: tuple[Channel, ...]


@dataclass(frozen=True)
class Plan:
    """Every decision about how `graph` runs (see the module's doc)."""

    graph: Graph
    devices: tuple[DevicePlan, ...]
    queues: tuple[QueuePlan, ...]
    rings: tuple[RingSlot, ...]
    window_channels: tuple[str, ...]  # the window's channels: the program's, tables',
    #                                   then each process's reload channel
    table_sender: str  # the device that reads and sends the tables that travel ("": none)
    ncpus: int  # CPUs of the machine the plan was made for

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def program_channels(self) -> tuple[str, ...]:
        """The window's channels but the processes' reload channels: the program's own
        and its tables' (what a host program or `offlow ctl` talks to)."""
        return tuple(c for c in self.window_channels if not c.startswith(RELOAD_CHANNEL_PREFIX))

    @property
    def state_bytes(self) -> int:
        """sizeof(struct ofl_state)."""
        return state_bytes(self.graph.state)

    @property
    def threads(self) -> tuple[CoreThread, ...]:
        """Every thread of every device process, in segment order."""
        return tuple(t for d in self.devices for t in d.threads)

    def device(self, name: str) -> DevicePlan:
        return next(d for d in self.devices if d.name == name)

    def segment(self, name: str) -> SegmentPlan:
        return next(s for d in self.devices for s in d.segments if s.name == name)

    def queue(self, name: str) -> QueuePlan:
        return next(q for q in self.queues if q.queue.name == name)

    def cpu(self, device: str, core: int) -> int:
        """The CPU a device's core runs on (wrapping around when there are fewer)."""
        return (self.device(device).cpu_base + core) % self.ncpus

    def cpus(self, segment: str) -> list[int]:
        """The CPUs of a segment's cores, in core order."""
        s = self.graph.segment(segment)
        return [self.cpu(s.core_device(k), c) for k, c in enumerate(s.cores)]

    def local_cores(self, segment: str, device: str) -> list[int]:
        """The cores (indexes into its cores) of `segment` that `device` runs."""
        s = self.graph.segment(segment)
        return [k for k in range(len(s.cores)) if s.core_device(k) == device]

    def ring_ends(self, r: RingSlot) -> tuple[str, str]:
        """The devices of ring `r`'s producer and consumer cores."""
        g = self.graph
        return (g.segment(r.queue.src_segment).core_device(r.prod),
                g.segment(r.queue.dst_segment).core_device(r.cons))


def make_plan(g: Graph, targets: Mapping[str, Placement], ncpus: int | None = None) -> Plan:
    """Decide how the compiled graph `g` runs on `targets` (device name -> target);
    `ncpus`: the CPUs of the machine (this one's by default). A placement a target
    cannot run is an error naming the element (or segment), the target and why."""
    ncpus = ncpus or os.cpu_count() or 1
    _check_targets(g, targets)
    g, sender = _tables(g, targets)
    queues = _queues(g)
    segments = tuple(_offload(s, targets[s.device]) for s in fuse(g))
    ths = threads(g)
    devices = tuple(
        DevicePlan(name=dev, target=targets[dev].name, cpu_base=targets[dev].cpu_base(ncpus),
                   segments=tuple(s for s in segments if dev in g.segment(s.name).devices),
                   threads=tuple(t for t in ths if t.device == dev),
                   channels=tuple(c for c in g.channels if c.device == dev))
        for dev in g.devices())
    return Plan(graph=g, devices=devices, queues=queues,
                rings=tuple(r for q in queues for r in q.rings),
                window_channels=(*channel_names(g), *(RELOAD_CHANNEL_PREFIX + d for d in g.devices()
                                                      if targets[d].serves_control
                                                      and not targets[d].no_reload)),
                table_sender=sender, ncpus=ncpus)


def _check_targets(g: Graph, targets: Mapping[str, Placement]) -> None:
    """Every element, handler and segment is one its device's target runs."""
    for s in g.segments:
        t = targets[s.device]
        if (s.batch or s.depth) and t.offload is None:
            raise OfflowError(f"segment `{s.name}`: batch and depth are offload settings of a "
                              f"target that runs batches (gpu); target `{t.name}` takes none: "
                              "remove them or place the segment on gpu")
        why = t.refuse_segment(g, s)
        if why:
            raise OfflowError(f"segment `{s.name}` cannot run on target `{t.name}`: {why}")
        for n in g.nodes:
            why = t.refuse_node(g, n) if n.segment == s.name else None
            if why:
                raise OfflowError(f"element `{n.name}` ({n.cls}) cannot run on target "
                                  f"`{t.name}`: {why}; place segment `{s.name}` on another "
                                  "device")
    for c in g.channels:
        t = targets[c.device]
        why = t.refuse_node(g, c.handler)
        if why:
            raise OfflowError(f"channel `{c.name}`: handler `{c.handler.name}` "
                              f"({c.handler.cls}) cannot run on target `{t.name}`: {why}")


def _offload(s: SegmentPlan, t: Placement) -> SegmentPlan:
    """Segment `s` with its offload batch and depth (its own, or its target's
    defaults); its elements run in the target's kernel, not as vector elements."""
    if t.offload is None:
        return s
    batch, depth = t.offload
    return replace(s, vector=(), per_packet=f"on {t.name}: one work-item per packet",
                   batch=s.batch or batch, depth=s.depth or depth)


def _tables(g: Graph, targets: Mapping[str, Placement]) -> tuple[Graph, str]:
    """A table object that lives on a device whose process cannot read its input file,
    and that can travel (pack_fn), is read by a device that can and sent over a bulk
    channel (`bulk`); the first device that reads files and sends tables sends them all."""
    readers = [d for d in g.devices()
               if targets[d].reads_table_files and targets[d].sends_tables]
    sender = readers[0] if readers else ""
    shared = tuple(replace(t, bulk=_travels(t, targets, sender), ctl=_controller(g, t, targets))
                   for t in g.shared)
    return replace(g, shared=shared), sender if any(t.bulk for t in shared) else ""


def _controller(g: Graph, t: SharedTable, targets: Mapping[str, Placement]) -> str:
    """The device that serves table t's control channel: the one that holds it (for a
    table in the window, the first device that serves control), "" for none. An
    object without a control function (ctl_fn) has none, nor a table whose name is too
    long for a channel's."""
    if (t.is_object and not t.ctl_fn) or len(CTL_CHANNEL_PREFIX + t.name) > CHANNEL_NAME_MAX:
        return ""
    if spread_copies(g, t):  # one channel would change one copy only
        return ""
    homes = [t.home] if t.home in targets else list(g.devices())
    return next((d for d in homes if targets[d].serves_control
                 or (t.is_map and targets[d].serves_map_control)), "")


def spread_copies(g: Graph, t: SharedTable) -> tuple[str, ...]:
    """The devices that each hold a copy of table t, when a segment that uses it is
    spread over several (offlow.passes.spread); () otherwise."""
    for n in g.nodes:
        if n.segment and any(ref == t.name for _, ref in n.tables):
            s = g.segment(n.segment)
            if len(set(s.spread)) > 1:
                return s.devices
    return ()


def _travels(t: SharedTable, targets: Mapping[str, Placement], sender: str) -> bool:
    return (t.is_object and bool(t.pack_fn) and t.home in targets and bool(sender)
            and not targets[t.home].reads_table_files)


def _queues(g: Graph) -> tuple[QueuePlan, ...]:
    """Every queue in window order, each with its rings after the previous one's."""
    out: list[QueuePlan] = []
    for q in g.queues:
        out.append(queue_plan(q, g.mtu, len(g.segment(q.src_segment).cores),
                              consumer_cores(g, q.dst_segment),
                              sum(len(x.rings) for x in out)))
    return tuple(out)


def queue_plan(q: Queue, mtu: int, producers: int = 1, consumers: int = 1,
               first_ring: int = 0) -> QueuePlan:
    """Queue `q` for frames up to `mtu`: `instances` SPSC rings per producer core (the
    window's rings from `first_ring` on); instance i is polled by consumer core
    i % consumers."""
    rings = [RingSlot(first_ring + p * q.instances + i, q, p, i, i % consumers)
             for p in range(producers) for i in range(q.instances)]
    return QueuePlan(queue=q, layouts=tuple(channel_layouts(q, mtu)),
                     entry_size=entry_size(q, mtu), consumers=consumers, rings=tuple(rings))
