"""`offlow explain`: the compiled design in words: segments and cores, each logical
queue with its channels (the fields and bytes per packet each carries) and its
mapping onto rings, and where each table lives."""

from __future__ import annotations

from offlow.codegen.bpf import is_array, map_kind
from offlow.codegen.opencl import roi
from offlow.codegen.vector import VEC_MAX
from offlow.codegen.xsk import Crossing, crossings
from offlow.ctlwire import MAP_KV_MAX, MSG_MAX
from offlow.ir import Graph, SharedTable
from offlow.plan import Plan, QueuePlan, spread_copies
from offlow.races import lost_updates
from offlow.unchosen import unchosen_outputs


def explain(plan: Plan) -> str:
    """A readable description of a plan."""
    g = plan.graph
    full = plan.state_bytes
    lines = [f"program {g.name}: {len(g.nodes)} elements, {len(g.segments)} segments, "
             f"{len(g.queues)} queues; per-packet state {full} B "
             f"({', '.join(f'{f.name}:{f.ctype}' for f in g.state) or 'no fields'})",
             f"mtu {g.mtu} B ({g.mtu_why}): the largest frame, Ethernet header included; "
             "longer ones are dropped and counted at the source", ""]
    lines.append("segments:")
    for s in g.segments:
        members = [n.name for n in g.nodes if n.segment == s.name]
        cpus = ",".join(map(str, plan.cpus(s.name)))
        if s.group:
            par = (f"core group of {len(s.cores)} (master core {s.cores[0]} takes each batch, "
                   "every member processes a slice"
                   + (", the master sends the slices' outputs on in input order" if s.ordered
                      else "") + "), ")
        else:
            how = f"steered by {s.steer} % {len(s.cores)}" if s.steer else "round robin"
            par = (f"data-parallel over {len(s.cores)} cores ({how}), "
                   if len(s.cores) > 1 and not s.spread else "")
        where = (f"device {s.device}, cores {list(s.cores)}" if not s.spread else
                 "spread by key over " + ", ".join(
                     f"{d} (cores {[c for k, c in enumerate(s.cores) if s.spread[k] == d]})"
                     for d in s.devices))
        lines.append(f"  {s.name}: {where} (CPUs {cpus} here), {par}"
                     f"elements: {' '.join(members)}")
    for d in plan.devices:
        for p in d.segments:
            batch = [n for n in p.nodes[::-1] if g.node(n).batch_body]
            if p.batch:
                r = roi(g, p)
                fields = ", ".join(f.name for f in r.touched) or "none"
                back = ", ".join(f.name for f in r.written) or "none"
                lines += [f"  {p.name}: offloaded in batches of up to {p.batch} packets, "
                          f"{p.depth} in flight (copy in, kernel, copy out overlap on "
                          f"separate queues; --set {p.name}.batch=N, {p.name}.depth=N)",
                          f"  {p.name}: to the kernel per packet: {fields}"
                          + (" and the packet bytes" if r.uses_pkt else "")
                          + f"; back: {back}" + (", the bytes" if r.uses_pkt else "")
                          + "; tables in device buffers: " + (", ".join(r.tables) or "none")]
            if p.vector:
                lines.append(f"  {p.name}: vector elements {', '.join(p.vector)} run their batch "
                             f"bodies over each batch (up to {min(g.batch, VEC_MAX)} packets "
                             "wait for them; what leaves keeps its order)")
            elif batch:
                lines.append(f"  {p.name}: {', '.join(batch)} run per packet ({p.per_packet})")
    for t in plan.threads:
        if len(t.loops) > 1:
            loops = ", ".join(f"{seg}" + (f" (its core {k})" if len(g.segment(seg).cores) > 1
                                          else "") for seg, k in t.loops)
            lines.append(f"  {t.device} core {t.core}: {loops} share one thread, a turn each "
                         "per round (no hand-off between threads)")
    lines.append("")
    lines.append("queues:")
    if not g.queues:
        lines.append("  none (one segment)")
    for qp in plan.queues:
        lines += _queue_lines(g, qp, full, _from_xdp(plan, qp))
    lines.append("")
    lines.append("shared tables:")
    if not g.shared:
        lines.append("  none")
    for t in g.shared:
        users = [n.name for n in g.nodes if any(ref == t.name for _, ref in n.tables)]
        users += [f"{c.handler.name} (channel {c.name})" for c in g.channels
                  if any(ref == t.name for _, ref in c.handler.tables)]
        spread = next((x for x in g.segments if x.spread and x.device == t.home), None)
        home = ("the interconnect window (used on several devices)" if t.home == "window"
                else f"{t.home} memory" if spread is None else
                f"the memory of each of {', '.join(spread.devices)}: sharded, each holds the "
                "keys steered to it")
        if t.is_object:
            opts = ", ".join(f"{k}={v}" for k, v in t.options)
            if t.bulk:
                how = (f"{t.source}; the host process reads its input and sends it over "
                       f"the bulk channel table.{t.name} (CRC32C checked), {t.home} builds it")
            else:
                how = (f"{t.source}; " if t.source else "") + (
                    f"built at start-up by the {t.home} process" if spread is None
                    else "built at start-up by each of their processes")
            lines.append(f"  {t.name}: {t.ctype} in {home}; {how}"
                         + (f" ({opts})" if opts else "") + f"; used by {', '.join(users)}"
                         + _bpf_map(plan, t))
        else:
            lines.append(f"  {t.name}: {t.ctype}[{t.length}] in {home}; "
                         f"used by {', '.join(users)}" + _bpf_map(plan, t))
    lines += _caches(g)
    if g.channels:
        lines += ["", "channels (direct messages from host programs: offlow.session):"]
        for c in g.channels:
            where = ("the channel manager thread of the xdp process, on the host CPU, over "
                     "its tables' BPF maps" if plan.device(c.device).target == "xdp"
                     else "the device's channel manager thread")
            lines.append(f"  {c.name}: served on {c.device} by {c.handler.name} "
                         f"({c.handler.cls}) on {where}")
    controlled = [t for t in g.shared if t.ctl]
    copies = {t.name: spread_copies(g, t) for t in g.shared if not t.is_object or t.ctl_fn}
    maps = [(t.name, _no_map_control(plan, t)) for t in g.shared if t.is_map and not t.ctl]
    if controlled or any(copies.values()) or maps:
        lines += ["", "control channels (offlow ctl WINDOW, attach(WINDOW).tables: "
                  "docs/control.md):"]
        lines += [f"  ctl.{t.name}: table {t.name}, served on {t.ctl}{_served_by(plan, t)}"
                  f"{_in_parts(t)}" for t in controlled]
        lines += [f"  {name}: none: a copy on each of {', '.join(devs)} (its segment is "
                  "spread over them); a channel would change one copy only"
                  for name, devs in copies.items() if devs]
        lines += [f"  {name}: none: {why}" for name, why in maps]
    warned = [*lost_updates(plan), *unchosen_outputs(g)]
    if warned:
        lines += ["", "warnings:", *(f"  {w}" for w in warned)]
    return "\n".join(lines)


def _served_by(plan: Plan, t: SharedTable) -> str:
    """Who answers table t's control channel, where that is not the device's manager."""
    if plan.device(t.ctl).target != "xdp":
        return ""
    return (" (its BPF hash map, through the map's fd, by the xdp process's channel "
            "manager thread on the host CPU)")


def _in_parts(t: SharedTable) -> str:
    """For a map whose entries do not fit one control message: that they go in parts."""
    if not t.is_map or t.map_key_size + t.map_value_size <= MAP_KV_MAX:
        return ""
    return (f"; its entries ({t.map_key_size} + {t.map_value_size} bytes) go in parts "
            f"(a request or reply of more than one {MSG_MAX}-byte message is staged, then "
            "applied or read whole)")


def _no_map_control(plan: Plan, t: SharedTable) -> str:
    """Why shared map `t` has no control channel (offlow ctl WINDOW map)."""
    target = next((d.target for d in plan.devices if d.name == t.home), "")
    return f"its device ({t.home}, target {target or '?'}) serves no control channels"


def _bpf_map(plan: Plan, t: SharedTable) -> str:
    """For a shared array or map on an xdp device: the kind of BPF map it is, and why."""
    if not any(d.name == t.home and d.target == "xdp" for d in plan.devices):
        return ""
    if t.is_map:
        return ("; a BPF hash map (its updates refused for want of room counted full), "
                "walked by the xdp process's host side for the table report")
    if not is_array(t):
        return ""
    kind, why = map_kind(plan.graph, t)
    return f"; a BPF {'per-CPU array' if kind == 'percpu' else 'array'} map: {why}"


def _caches(g: Graph) -> list[str]:
    """Each cache and the paths its expansion made (passes/cache.py)."""
    lines: list[str] = []
    for c in g.caches:
        lk, up = g.node(f"{c.name}_lookup"), g.node(f"{c.name}_update")
        hit = next(e for e in g.out_edges(lk.name) if e.src_port == "hit")
        out = next(e for e in g.out_edges(up.name))
        opts = dict(c.options)
        lines += [
            f"  {c.name}: {c.policy} cache around {c.first}"
            + (f"..{c.last}" if c.last != c.first else "")
            + f", {opts.get('entries', '?')} entries in sets of {opts.get('ways', '?')}, "
            f"{opts.get('eviction', '?')} eviction, values up to {opts.get('value_max', '?')} B; "
            f"lives on {g.segment(lk.segment).device}",
            f"    lookup {lk.name} in segment {lk.segment}: hit -> {hit.dst} (answered there), "
            f"miss -> {c.first}",
            f"    update {up.name} in segment {up.segment}: {c.last}'s replies fill the cache "
            f"-> {out.dst}",
        ]
        if c.policy == "write_back":
            lines.append(f"    write-back: written entries stay in the cache; an evicted one is "
                         f"sent down the miss path to {c.first}, steered by {c.ops.steer}")
        else:
            lines.append(f"    write-through: writes go on to {c.first}; the cache keeps the "
                         "value once the reply confirms it")
    return ["", "caches:", *lines] if lines else []


def _from_xdp(plan: Plan, qp: QueuePlan) -> dict[int, Crossing]:
    """The crossings of queue `qp` by channel, when it leaves a segment on xdp."""
    src = plan.graph.segment(qp.queue.src_segment).device
    if plan.device(src).target != "xdp":
        return {}
    return {x.channel: x for x in crossings(plan, src) if x.qp.queue == qp.queue}


def _queue_lines(g: Graph, qp: QueuePlan, full: int, up: dict[int, Crossing]) -> list[str]:
    """A logical queue: its channels, then its mapping onto rings; `up`: its channels'
    crossings from XDP, when it leaves an xdp segment."""
    q = qp.queue
    src, dst = g.segment(q.src_segment), g.segment(q.dst_segment)
    where = "interconnect window" if q.crosses_device else "window (same device)"
    nchan = len(q.channels)
    ends = [f"{x.name} ({','.join(x.devices)})" for x in (src, dst)]
    out = [f"  {q.name}: {ends[0]} -> {ends[1]}, "
           f"{nchan} channel{'s' if nchan > 1 else ''}"]
    for lay in qp.layouts:
        ch = q.channels[lay.channel]
        fields = ", ".join(f"{f.name}:{f.ctype}" for f in ch.fields) or "none"
        data = (f" + packet bytes (up to {g.mtu})" if ch.carries_data
                else " (no packet bytes)")
        extra = " + 2 B length" if lay.len_off else ""
        moved = "cross the interconnect" if q.crosses_device else "are copied through the ring"
        out += [f"    channel {lay.channel}: {ch.edge}",
                f"      carries {fields}: {lay.field_bytes} B of the {full} B state"
                f"{' + timestamp (8 B)' if lay.carries_ts else ''}{data}",
                f"      entry {lay.size} B (8 B header + {lay.data_off - 8} B fields{extra}"
                f"{' + data' if ch.carries_data else ''}); per 64 B packet "
                f"{lay.bytes_for(64)} B {moved}"]
        x = up.get(lay.channel)
        if x:
            out.append(f"      from XDP: the fields in XDP metadata, {x.meta_bytes} B in front "
                       f"of the frame ({lay.field_bytes} B of fields"
                       + (f", {x.pad} B pad" if x.pad else "") + ", 4 B tail), "
                       "through an AF_XDP socket (copy mode) to the host side, which pushes "
                       "it into this ring" + (" with the frame's timestamp (the input's; with "
                                              "--iface, its arrival)" if lay.carries_ts
                                              else ""))
    if q.tagged:
        out.append(f"    ring entries of {qp.entry_size} B (the largest channel's), "
                   "each tagged with its channel; only each entry's used bytes are copied; "
                   "order is kept per instance across channels")
    nprod, ncons = len(src.cores), qp.consumers
    how = (f"steered by {q.steer} % {q.instances}" if q.steer
           else "round robin, per loop turn")
    out.append(f"    {q.instances} instance{'s' if q.instances > 1 else ''} per producer core "
               f"({how}): {nprod * q.instances} ring(s) of {q.ring_size} entries in the "
               f"{where}, doorbell every {q.batch} entries")
    polls = []
    for c in range(ncons):
        mine = qp.polled_by(c)
        core = f"{dst.core_device(c)} core {dst.cores[c]}" if dst.spread else f"core {dst.cores[c]}"
        polls.append(f"{core} polls instance{'s' if len(mine) > 1 else ''} "
                     + ",".join(map(str, mine)) if mine else f"{core} polls none")
    master = " (the core group's master)" if dst.group else ""
    out.append(f"    consumers{master}: {'; '.join(polls)}")
    out.append("    enqueue: " + ("drop (a full ring drops the packet, counted per queue)"
                                  if q.enqueue == "drop"
                                  else "block (a full ring makes the producer wait)"))
    return out
