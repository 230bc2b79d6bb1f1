"""The cost model: a placement's predicted throughput (its slowest stage) and latency
(the sum along a packet's path), from costs measured on this host and the profiles.

Stages: every core a segment runs on (the segments sharing it add up; a data-parallel
segment's cost is split evenly over its cores), each direction of the interconnect
(the bytes crossing it per packet over its bandwidth), the device's DMA engine (the
bytes of both directions over its rate) and each ring across a link with a latency (at
most its size in entries per latency). A segment's cost on a device is, per kind of
work, its time on this host over the device core's speed for that kind (the profile);
each segment also pays its loop (the rings' bookkeeping), scaled as integer work, and
its copy engine's copies between rings and buffers (`COPY`: the emulated device's DMA
engine, whose rate the link and DMA stages model) at this host's speed. A crossing
whose two ends run on different threads (other devices, or other cores) costs its
producer and its consumer more per entry than the one-thread calibration saw (the
entries' cache lines move between cores: measured by offlow.planner.crossing): the
loop's part scaled as integer work on each end's device, the copies' part not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from offlow.planner.profile import Profile

HOST = "host"
# The work kind of the copy engine's copies (between a ring and a core's buffers): the
# emulated DMA engine's, never scaled by a core's speed (profile-scaled emulation does
# not slow it either: a slow profile's factor once multiplied this host's cross-core
# cost of each copy, 35 to 105 ns an entry from one run to the next, into the NIC's stage)
COPY = "copy"


@dataclass(frozen=True)
class Segment:
    """What the model knows of a segment: its time per packet read on this host, per
    kind of work (overhead included)."""

    name: str
    ns: Mapping[str, float]


@dataclass(frozen=True)
class Crossing:
    """A queue between two segments: what it moves per packet read."""

    src: str
    dst: str
    packets: float
    bytes: float
    push_ns: float = 0.0  # per entry, the producer's extra when the ends are on two threads
    pop_ns: float = 0.0  # the consumer's (both: their loops', scaled as integer work)
    ring_size: int = 0  # entries its ring holds (0: not known): across a link with a
    #                     latency, at most that many per latency
    push_copy_ns: float = 0.0  # per entry, the producer's copies' extra (COPY: not scaled)
    pop_copy_ns: float = 0.0  # the consumer's


@dataclass(frozen=True)
class Placement:
    """Each segment's device and device cores."""

    devices: Mapping[str, str]
    cores: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class Stage:
    name: str  # "nic core 2", "link host->nic", "nic DMA"
    ns: float  # its time per packet read

    @property
    def mpps(self) -> float:
        return 1e3 / self.ns if self.ns > 0 else float("inf")


@dataclass(frozen=True)
class Prediction:
    stages: tuple[Stage, ...]
    latency_us: float

    @property
    def bottleneck(self) -> Stage:
        return max(self.stages, key=lambda s: s.ns)

    @property
    def mpps(self) -> float:
        return self.bottleneck.mpps


def segment_ns(seg: Segment, profile: Profile) -> float:
    """The segment's time per packet read on one core of `profile` (its copies, COPY,
    at this host's speed)."""
    return sum(ns if kind == COPY else ns / profile.speed[kind] for kind, ns in seg.ns.items())


def predict(segments: list[Segment], crossings: list[Crossing], place: Placement,
            profiles: Mapping[str, Profile]) -> Prediction:
    """The stages of `place` and its latency; `profiles`: device name -> profile (the
    device `host` is this side of every crossing)."""
    load: dict[tuple[str, int], float] = {}
    latency = 0.0
    for seg in segments:
        dev = place.devices[seg.name]
        ns = segment_ns(seg, profiles[dev])
        latency += ns
        cores = place.cores[seg.name]
        for c in cores:
            load[(dev, c)] = load.get((dev, c), 0.0) + ns / len(cores)
    for x in crossings:
        ends = [(x.src, x.push_ns, x.push_copy_ns), (x.dst, x.pop_ns, x.pop_copy_ns)]
        if (place.devices[x.src], place.cores[x.src]) == (place.devices[x.dst],
                                                          place.cores[x.dst]):
            continue  # one thread: the calibration's own rings
        for seg, extra, copies in ends:
            dev, cores = place.devices[seg], place.cores[seg]
            ns = x.packets * (extra / profiles[dev].speed["integer"] + copies)
            latency += ns
            for c in cores:
                load[(dev, c)] = load.get((dev, c), 0.0) + ns / len(cores)
    stages = [Stage(f"{dev} core {c}", ns) for (dev, c), ns in sorted(load.items())]
    link_bytes: dict[tuple[str, str], float] = {}
    for x in crossings:
        a, b = place.devices[x.src], place.devices[x.dst]
        if a == b:
            continue
        dev = b if a == HOST else a
        link = profiles[dev].link
        if link is None:
            continue
        link_bytes[(a, b)] = link_bytes.get((a, b), 0.0) + x.bytes
        latency += x.packets * link.latency_us * 1e3 + x.bytes * 8 / link.gbps
    dma: dict[str, float] = {}
    for (a, b), byts in sorted(link_bytes.items()):
        dev = b if a == HOST else a
        link = profiles[dev].link
        assert link is not None
        stages.append(Stage(f"link {a}->{b}", byts * 8 / link.gbps))
        dma[dev] = dma.get(dev, 0.0) + byts
    for x in crossings:
        # A ring's entries stay unreleased for at least the link's latency (each
        # doorbell reaches the consumer that long after it rings), so it moves at most
        # ring_size entries per latency.
        a, b = place.devices[x.src], place.devices[x.dst]
        link = profiles[b if a == HOST else a].link if a != b else None
        if link is not None and link.latency_us > 0 and x.ring_size:
            stages.append(Stage(f"ring {x.src}->{x.dst}",
                                x.packets * link.latency_us * 1e3 / x.ring_size))
    for dev, byts in sorted(dma.items()):
        link = profiles[dev].link
        assert link is not None
        stages.append(Stage(f"{dev} DMA", byts * 8 / link.dma_gbps))
    return Prediction(tuple(stages), latency / 1e3)


def clock_needed_mhz(instructions: float, ipc: float, gbps: float, wire_bytes: float) -> float:
    """The clock (MHz) a core retiring `ipc` instructions a cycle needs to run
    `instructions` per packet at `gbps` of packets taking `wire_bytes` each on the wire."""
    return instructions / ipc * gbps * 1e9 / (8 * wire_bytes) / 1e6
