"""The search: every placement of a program's segments on the host and the device, with
every split of each device's cores among its segments (or the alternatives given),
predicted by the model and ranked."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from offlow import targets
from offlow.ir import Graph
from offlow.planner.calibrate import Calibration
from offlow.planner.model import HOST, Crossing, Placement, Prediction, Segment, predict
from offlow.planner.profile import Profile

DEVICE = "nic"  # the device a profile stands for (the emulated NIC's name)
MAX_PLACEMENTS = 20_000  # more core splits than this: only powers of two are tried


@dataclass(frozen=True)
class Ranked:
    placement: Placement
    prediction: Prediction
    settings: tuple[str, ...]  # the --set lines that give it, from the program as written
    alike: int = 0  # other placements predicted the same (more cores, or other core numbers)


def model_inputs(cal: Calibration) -> tuple[list[Segment], list[Crossing]]:
    """The model's segments and crossings from a calibration: each segment's element
    time per kind, its own loop (as integer work) and its copies (COPY); each crossing
    priced per entry by the crossing calibration of its geometry."""
    names = dict.fromkeys([*(s for s, _ in cal.loops), *(e.segment for e in cal.elements),
                           *(q.src for q in cal.queues), *(q.dst for q in cal.queues)])
    segs = [Segment(name, cal.segment_ns(name)) for name in names]
    crossings = []
    for q in cal.queues:
        x = cal.crossing(q)
        entry = q.bytes / q.packets if q.packets else 0.0
        crossings.append(Crossing(
            q.src, q.dst, q.packets, q.bytes, x.push.ns(entry) if x else 0.0,
            x.pop.ns(entry) if x else 0.0, q.ring_size,
            x.push_copy.ns(entry) if x else 0.0, x.pop_copy.ns(entry) if x else 0.0))
    return segs, crossings


def settings_for(g: Graph, place: Placement) -> tuple[str, ...]:
    """The --set lines that turn the program as written (`g`) into `place`."""
    out = []
    for s in g.segments:
        dev, cores = place.devices[s.name], place.cores[s.name]
        if dev != s.device:
            out.append(f"{s.name}.device={dev}")
        if tuple(cores) != tuple(s.cores):
            out.append(f"{s.name}.cores={','.join(map(str, cores))}")
    return tuple(out)


def as_written(g: Graph) -> Placement:
    """The program's own placement."""
    return Placement(devices={s.name: s.device for s in g.segments},
                     cores={s.name: tuple(s.cores) for s in g.segments})


def placements(g: Graph, counts: Mapping[str, int]) -> Iterator[Placement]:
    """Every device choice per segment (host or the device, where its target takes the
    segment's elements) and, per device, every split of its `counts[device]` cores:
    all its segments on core 0, or each on cores of its own (1, 2, 3... in segment
    order; powers of two only when that makes too many)."""
    names = [s.name for s in g.segments]
    nic = targets.get(DEVICE)
    allowed = {s.name: [HOST] + ([DEVICE] if not any(
        nic.refuse_node(g, n) for n in g.nodes if n.segment == s.name) else [])
        for s in g.segments}
    for devs in itertools.product(*(allowed[n] for n in names)):
        devices = dict(zip(names, devs, strict=True))
        per_dev = {d: [n for n in names if devices[n] == d] for d in set(devs)}
        options = [list(_splits(segs, counts[d])) for d, segs in sorted(per_dev.items())]
        for combo in itertools.product(*options):
            cores: dict[str, tuple[int, ...]] = {}
            for part in combo:
                cores.update(part)
            yield Placement(devices=devices, cores=cores)


def _splits(segs: Sequence[str], ncores: int) -> Iterator[dict[str, tuple[int, ...]]]:
    """Core assignments of `segs` on a device of `ncores` cores."""
    yield {s: (0,) for s in segs}
    if len(segs) == 1 and ncores == 1:
        return
    sizes = list(range(1, ncores + 1))
    if len(sizes) ** len(segs) > MAX_PLACEMENTS:
        sizes = [k for k in sizes if k & (k - 1) == 0]
    for counts in itertools.product(sizes, repeat=len(segs)):
        if sum(counts) > ncores or (len(segs) == 1 and counts[0] == 1):
            continue
        out, at = {}, 0
        for s, k in zip(segs, counts, strict=True):
            out[s] = tuple(range(at, at + k))
            at += k
        yield out


def rank(g: Graph, cal: Calibration, profiles: Mapping[str, Profile],
         alternatives: Sequence[Placement] | None = None) -> list[Ranked]:
    """Every placement (or the `alternatives`) predicted, best first: the highest
    throughput, then the lowest latency, then the fewest cores."""
    segs, crossings = model_inputs(cal)
    counts = {d: p.cores for d, p in profiles.items()}
    cands = list(alternatives) if alternatives is not None else list(placements(g, counts))
    out = [Ranked(p, predict(segs, crossings, p, profiles), settings_for(g, p)) for p in cands]
    out.sort(key=lambda r: (-round(r.prediction.mpps, 6), round(r.prediction.latency_us, 6),
                            sum(len(c) for c in r.placement.cores.values())))
    if alternatives is not None:
        return out
    # Placements that differ only in cores that change nothing (a segment's cores
    # renumbered, an idle core added) are shown once: the first, with the fewest cores.
    kept: dict[tuple[object, ...], int] = {}
    folded: list[Ranked] = []
    for r in out:
        key = (round(r.prediction.mpps, 6), round(r.prediction.latency_us, 6),
               r.prediction.bottleneck.name.split(" core ")[0], tuple(r.placement.devices.items()))
        if key in kept:
            k = kept[key]
            folded[k] = replace(folded[k], alike=folded[k].alike + 1)
            continue
        kept[key] = len(folded)
        folded.append(r)
    return folded
