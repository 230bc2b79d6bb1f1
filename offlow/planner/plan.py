"""`offlow plan`: calibrate a program on this host, then rank its placements under a
device profile, each with its predicted throughput, latency, bottleneck and the --set
line that gives it."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from offlow.build import compile_program
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.planner import crossing, profile, workload
from offlow.planner.calibrate import Calibration, calibrate
from offlow.planner.model import HOST
from offlow.planner.profile import WORK_KINDS, Profile
from offlow.planner.request import PlanRequest
from offlow.planner.search import DEVICE, Ranked, as_written, rank
from offlow.planner.validate import Check, measure, pooled


def parse_work(items: Sequence[str]) -> dict[str, str]:
    """`--work NAME=KIND` lines as a mapping, each kind checked."""
    out = {}
    for it in items:
        name, eq, kind = it.partition("=")
        if not eq or not name or kind not in WORK_KINDS:
            raise OfflowError(f"--work {it}: give ELEMENT=KIND, KIND one of "
                              f"{', '.join(WORK_KINDS)}")
        out[name] = kind
    return out


def plan(req: PlanRequest) -> str:
    """The report `offlow plan` prints. Options are checked before the calibration."""
    if req.packets < 1_000 or req.top < 1 or req.repeats < 1:
        raise OfflowError(f"--packets {req.packets} --top {req.top} --repeats {req.repeats}: "
                          "the calibration needs 1000 packets or more, at least one "
                          "placement is shown and measured once")
    profiles = {HOST: profile.load(req.host), DEVICE: profile.load(req.device)}
    work = parse_work(req.work)
    g = compile_program(load_program(req.program, req.settings))
    unknown = sorted(set(work) - {n.name for n in g.nodes})
    if unknown:
        raise OfflowError(f"--work: program `{g.name}` has no element `{unknown[0]}`")
    alts = None
    if req.alternatives:
        alts = [as_written(compile_program(load_program(
            req.program, [*req.settings, *a.split()]))) for a in req.alternatives]
        for a, alt in zip(req.alternatives, alts, strict=True):
            other = sorted(set(alt.devices.values()) - set(profiles))
            if other:  # (the model has no profile for it: it would fail after calibrating)
                raise OfflowError(f"--alt '{a}': places a segment on `{other[0]}`; the "
                                  f"planner models `{HOST}` and `{DEVICE}` (--device) only")
            for seg, dev in alt.devices.items():
                past = [c for c in alt.cores[seg] if c >= profiles[dev].cores]
                if past:  # (it was ranked as if the device had them)
                    raise OfflowError(
                        f"--alt '{a}': segment `{seg}` on {dev} core {past[0]}; "
                        f"{profiles[dev].name} has {profiles[dev].cores} cores "
                        f"(0..{profiles[dev].cores - 1})")
    profile.dilation(profiles[DEVICE]) if req.validate else None  # (refused early)
    with tempfile.TemporaryDirectory(prefix="offlow-plan-") as d:
        capture = workload.resolve(req.workload, Path(d))
        _say(req, f"calibrating `{g.name}` on this host ({req.packets:,} packets, every "
                  "segment on host core 0, then its queues' crossings)")
        cal = calibrate(req.program, list(req.settings), capture, req.packets, work)
        ranked = rank(g, cal, profiles, alts if alts is not None or not req.validate
                      else [as_written(g)])
        text = format_plan(req, cal, profiles, ranked)
        if not req.validate:
            return text
        shown = ranked[:req.top]
        checks = [_check(req, g, cal, profiles, capture, work, r, f"placement {k} of "
                         f"{len(shown)} ({' '.join(r.settings) or 'as written'})")
                  for k, r in enumerate(shown, 1)]
    return text + "\n\n" + format_checks(req, checks)


def _say(req: PlanRequest, what: str) -> None:
    """Tell the request's progress callback (the CLI prints it to stderr) `what`."""
    if req.progress is not None:
        req.progress(what)


def _check(req: PlanRequest, g: Graph, cal: Calibration, profiles: dict[str, Profile],
           capture: Path | None, work: dict[str, str], r: Ranked, which: str) -> Check:
    """Placement `r` predicted and measured in `req.repeats` rounds, each a fresh
    calibration run (not slowed), where the placement has a queue between two threads
    its crossings probed with the NIC's end under the profile (one probe round at the
    calibration's mean frame: crossing.measure), the profile-scaled run, then a
    calibration run under the profile's slow-down where the placement puts segments on
    the device: the run between its calibrations, so that each round's prediction and
    measurement see the machine alike (its speed moves by a quarter from one second to
    the next here, and its cross-core cost between two modes: docs/planner.md); the
    rounds pooled (validate.pooled)."""
    on_device = {s for s, d in r.placement.devices.items() if d == DEVICE}
    frame = (max(64, round(cal.frame_bytes)),)
    crosses = _crosses(cal, r)
    rounds = []
    for k in range(req.repeats):
        _say(req, f"validating {which}: round {k + 1} of {req.repeats}")
        again = calibrate(req.program, list(req.settings), capture, req.packets, work,
                          crossing_repeats=0, runs=1)
        xs = tuple(crossing.measure(x.batch, x.ring_size, packets=req.packets, repeats=1,
                                    sizes=frame, profile=req.device)
                   for x in cal.crossings) if crosses else cal.crossings
        again = replace(again, crossings=xs)
        measured = measure(req.program, [*req.settings, *r.settings], capture, req.packets,
                           req.device)
        warm = sum(sum(again.segment_ns(s).values()) for s in on_device)
        if on_device:
            # the device's segments as the emulation runs them: under its slow-down
            slowed = calibrate(req.program, list(req.settings), capture, req.packets, work,
                               crossing_repeats=0, runs=1, slowed_as=req.device,
                               slowed_segments=tuple(sorted(on_device)))
            again = again.with_segments(slowed, on_device)
        pred = rank(g, again, profiles, [r.placement])[0]
        slow = sum(sum(again.segment_ns(s).values()) for s in on_device)
        rounds.append(Check(pred, *measured, device_ns=(warm, slow),
                            crossings=tuple(p for x in xs for p in x.points)
                            if crosses else ()))
    return pooled(rounds)


def _crosses(cal: Calibration, r: Ranked) -> bool:
    """Whether placement `r` has a queue whose two ends run on different threads."""
    p = r.placement
    return any((p.devices[q.src], p.cores[q.src]) != (p.devices[q.dst], p.cores[q.dst])
               for q in cal.queues)


def format_checks(req: PlanRequest, checks: list[Check]) -> str:
    """Predicted beside measured (profile-scaled emulation), with the error of each."""
    lines = [f"validation: each placement run with --profile {req.device} (docs/planner.md: "
             "the emulated NIC's elements and loop slowed, not its copies (the emulated DMA), "
             "its link throttled); "
             f"{req.repeats} rounds (a calibration, the crossings probed, the run, a "
             "calibration slowed) pooled: predicted and measured from their mean time per "
             "packet"]
    lines.append(f"  {'#':>3} {'predicted':>10} {'measured':>9} {'error':>7} "
                 f"{'rounds':>11}  --set")
    for k, c in enumerate(checks, 1):
        sets = " ".join(f"--set {s}" for s in c.ranked.settings) or "(as written)"
        spread = f"{min(c.rounds):+.0%}..{max(c.rounds):+.0%}" if c.rounds else "-"
        lines.append(f"  {k:>3} {c.predicted_mpps:>10.3f} {c.measured_mpps:>9.3f} "
                     f"{c.error:>+7.0%} {spread:>11}  {sets}")
    worst = max(abs(c.error) for c in checks)
    lines.append(f"  worst error {worst:.0%} (target: within 20% on every row): "
                 + ("meets" if worst <= 0.2 else "misses"))
    for k, c in enumerate(checks, 1):
        if c.crossings:
            lines.append(f"  row {k}: its crossings probed in each round with the NIC's end "
                         f"under {req.device} (push/pop ns per entry, loop+copies): "
                         + ", ".join(_point(pt, signed=True) for pt in c.crossings))
    for k, c in enumerate(checks, 1):
        if c.device_ns[1]:
            lines.append(f"  row {k}: its {DEVICE} segments take {c.device_ns[1]:.1f} ns a "
                         "packet read here under the profile's slow-down (the prediction's "
                         f"calibration), {c.device_ns[0]:.1f} not slowed: the spins' lost "
                         "caches (docs/planner.md)")
    for k, c in enumerate(checks, 1):
        if abs(c.error) <= 0.2:
            continue
        lines.append(f"  row {k}, per stage (ns per packet read): predicted, measured "
                     "(the thread's busy time)")
        for what, pred, meas in c.stages():
            shown = f"{meas:>9.1f}" if meas is not None else f"{'-':>9}"
            lines.append(f"    {what:<34} {pred:>9.1f} {shown}")
    return "\n".join(lines)


def format_plan(req: PlanRequest, cal: Calibration, profiles: dict[str, Profile],
                ranked: list[Ranked]) -> str:
    dev, host = profiles[DEVICE], profiles[HOST]
    lines = [f"offlow plan {req.program}: `{cal.program}` on {DEVICE} = {dev.name} "
             f"({dev.description})",
             f"  host = {host.name} ({host.description})", "",
             f"calibrated on this host ({cal.packets:,} packets of the {req.workload} workload, "
             f"mean frame {cal.frame_bytes:.0f} B, every segment on host core 0, elements "
             "timed); per packet read:",
             f"  {'element':<18} {'segment':<12} {'work':<8} {'visits':>7} {'ns/visit':>9}"]
    for e in cal.elements:
        lines.append(f"  {e.name:<18} {e.segment:<12} {e.kind:<8} {e.visits:>7.3f} {e.ns:>9.1f}")
    lines.append(f"  reading packets (the wire's work, not modelled): {cal.source_ns:.1f} ns")
    lines.append(f"  loops and rings: {cal.overhead_ns:.1f} ns ("
                 + ", ".join(f"{s} {ns:.1f}" for s, ns in cal.loops) + "; of which copies: "
                 + ", ".join(f"{s} {ns:.1f}" for s, ns in cal.copies) + ")")
    for q in cal.queues:
        x = cal.crossing(q)
        entry = q.bytes / q.packets if q.packets else 0.0
        between = (f"; between two threads +{x.push.ns(entry):.1f} ns per entry to push "
                   f"(+{x.push_copy.ns(entry):.1f} copying), +{x.pop.ns(entry):.1f} to pop "
                   f"(+{x.pop_copy.ns(entry):.1f} copying)") if x else ""
        lines.append(f"  queue {q.name}: {q.packets:.3f} packets, {q.bytes:.0f} B{between}")
    for x in cal.crossings:
        lines += _crossing_lines(x)
    shown = ranked[:req.top]
    what = "alternatives given" if req.alternatives else "placements"
    alike = sum(r.alike for r in ranked)
    folded = f", and {alike} alike folded into them" if alike else ""
    lines += ["", f"ranked {what} ({len(ranked)}{folded}; the best {len(shown)} shown):",
              f"  {'#':>3} {'Mpps':>7} {'Gb/s':>7} {'lat us':>7}  {'bottleneck':<20} "
              f"{'placement':<34} --set"]
    for k, r in enumerate(shown, 1):
        p = r.prediction
        where = " ".join(f"{s}:{r.placement.devices[s]}{_cores(r.placement.cores[s])}"
                         for s in r.placement.devices)
        sets = (" ".join(f"--set {s}" for s in r.settings) or "(as written)") + (
            f"  (+{r.alike} alike)" if r.alike else "")
        lines.append(f"  {k:>3} {p.mpps:>7.2f} {p.mpps * cal.frame_bytes * 8e-3:>7.2f} "
                     f"{p.latency_us:>7.2f}  {p.bottleneck.name:<20} {where:<34} {sets}")
    lines += ["", "Mpps: the slowest stage (a core, a link direction, the DMA engine); "
              "latency: a packet's mean time through the elements and crossings, queueing "
              "not included (docs/planner.md)"]
    return "\n".join(lines)


def _crossing_lines(x: crossing.CrossingCost) -> list[str]:
    """The report's lines of one crossing calibration: its points as measured (what the
    lines are fitted to), and, where one is below 0, what that is. Not clamped: a point
    shown 0 that the fit took as -12 would not give the line it prices the queues by."""
    pts = ", ".join(_point(pt) for pt in x.points)
    lines = [f"  crossing calibration (batch {x.batch}, ring {x.ring_size}; push/pop ns "
             f"per entry, loop + copies, medians): {pts}"]
    if any(v < 0 for pt in x.points for v in pt[1:]):
        lines.append("    (below 0: the split run measured faster than one thread there, "
                     "this machine's noise (a loaded machine's); the lines fitted through "
                     "these points, which price the queues above, are never below 0)")
    return lines


def _point(pt: tuple[float, ...], signed: bool = False) -> str:
    """A crossing probe's point: its bytes, then push/pop ns per entry, each the loop's
    and the copies' (`signed`: a round's, which may be below the one thread's)."""
    b, p, q, pc, qc = pt
    f = "+.0f" if signed else ".0f"
    return f"{b:.0f} B {p:{f}}{pc:+.0f}/{q:{f}}{qc:+.0f}"


def _cores(cores: tuple[int, ...]) -> str:
    if len(cores) == 1:
        return f"[{cores[0]}]"
    return f"[{cores[0]}-{cores[-1]}]"
