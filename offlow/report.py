"""Turn the processes' raw stats into per-segment and per-queue summaries and tables."""

from __future__ import annotations

from itertools import compress, count, islice
from typing import Any

from offlow import mapreport
from offlow.codegen.xsk import DROPS as XDP_QUEUE_DROPS
from offlow.ir import Graph
from offlow.plan import Plan


def summarize(plan: Plan, stats: dict[str, Any]) -> dict[str, Any]:
    """Per segment: packets, Mpps, Gb/s, drops; per queue: traffic, waits, occupancy."""
    g = plan.graph
    cores = [c for dev in stats.values() for c in dev.get("cores", [])]
    # the consumer ends of every ring, with what a process that failed at its start
    # left in rings already closed to it (its STATS.untaken)
    ins = [x for c in cores for x in c.get("queues", []) if x["side"] == "in"]
    ins += [x for dev in stats.values() for x in dev.get("untaken", [])]
    segments = []
    for s in g.segments:
        mine = [c for c in cores if c["segment"] == s.name]
        pkts = sum(c["pkts_in"] for c in mine)
        byts = sum(c["bytes_in"] for c in mine)
        secs = max((c["elapsed_ns"] for c in mine), default=0) / 1e9
        drops = {}
        for c in mine:
            for el, v in c.get("elements", {}).items():
                if v["drop"]:
                    drops[el] = drops.get(el, 0) + v["drop"]
        segments.append({
            "segment": s.name, "device": ",".join(s.devices), "cores": list(s.cores),
            "packets": pkts,
            "bytes": byts, "seconds": secs, "mpps": pkts / secs / 1e6 if secs else 0.0,
            "gbps": byts * 8 / secs / 1e9 if secs else 0.0, "drops": sum(drops.values()),
            "drops_by_element": drops,
        })
    queues = []
    for qp in plan.queues:
        q, lays = qp.queue, qp.layouts
        prod = [x for c in cores for x in c.get("queues", [])
                if x["queue"] == q.name and x["side"] == "out"]
        inst = [x for c in cores for x in c.get("instances", []) if x["queue"] == q.name]
        by_inst = [0] * q.instances
        for x in inst:
            by_inst[x["instance"]] += x["pushed"]
        cons = [x for x in ins if x["queue"] == q.name]
        samples = sum(x["occupancy_samples"] for x in cons)
        queues.append({
            "queue": q.name, "from": q.src_segment, "to": q.dst_segment,
            "fields": [f.name for f in q.fields], "entry_bytes": qp.entry_size,
            "state_bytes": max(lay.field_bytes for lay in lays), "carries_data": q.carries_data,
            "channels": [{"edge": str(c.edge), "fields": [f.name for f in c.fields],
                          "carries_data": c.carries_data, "entry_bytes": lay.size}
                         for c, lay in zip(q.channels, lays, strict=True)],
            "instances": q.instances, "steer": q.steer, "enqueue": q.enqueue,
            "packets_by_instance": by_inst,
            "dropped": sum(x["dropped"] for x in inst) + sum(x.get("lost", 0) for x in cons),
            "dropped_why": _sum_why(inst, cons),
            "packets": sum(x["pushed"] for x in prod), "delivered": sum(x["popped"] for x in cons),
            "bytes": sum(x.get("bytes", 0) for x in prod),
            "doorbells": sum(x["doorbells"] for x in prod),
            "full_waits": sum(x["full_waits"] for x in prod),
            "occupancy_avg": sum(x["occupancy_sum"] for x in cons) / samples if samples else 0.0,
            "occupancy_max": max((x["occupancy_max"] for x in cons), default=0),
            "rings": len(prod),
        })
    elements: dict[str, dict[str, Any]] = {}
    for c in cores:
        for el, v in c.get("elements", {}).items():
            acc = elements.setdefault(el, {"in": 0, "drop": 0, "consumed": 0, "copies": 0,
                                           "made": 0, "why": {}})
            for k in ("in", "drop", "consumed", "copies", "made"):
                acc[k] += v.get(k, 0)
            for why, n in v.get("why", {}).items():
                acc["why"][why] = acc["why"].get(why, 0) + n
    tables: dict[str, Any] = {}
    for dev in stats.values():
        for k, v in dev.get("tables", {}).items():
            tables[k] = _sum_counts(tables[k], v) if k in tables else v
    for t in g.shared:
        if t.is_map and t.name in tables:
            tables[t.name] = mapreport.decode(t, tables[t.name])
    sinks = {k: v for dev in stats.values() for k, v in dev.get("sinks", {}).items()}
    sources = {}
    for c in cores:
        for name, v in c.get("sources", {}).items():
            acc = sources.setdefault(name, {})
            for k2, n in v.items():
                acc[k2] = n if isinstance(n, str) else acc.get(k2, 0) + n  # "error": text
    links = {dev: v["link"] for dev, v in stats.items() if "link" in v}
    # answers a device's channel handlers posted that the host never took, withdrawn at
    # the device's stop (a remote device's are in its link's chan_from_device)
    channels = {dev: {"withdrawn": int(v["chan_withdrawn"])} for dev, v in stats.items()
                if v.get("chan_withdrawn") and "link" not in v}
    out = {"program": g.name, "mtu": g.mtu, "mtu_why": g.mtu_why, "segments": segments,
           "queues": queues, "elements": elements, "sources": sources, "sinks": sinks,
           "tables": tables,
           "accounting": account(g, sources, elements, queues, sinks, links)}
    if links:
        out["links"] = links
    if channels:
        out["channels"] = channels
    # requests staged on a table's control channel whose client went away unrun
    ctl_dropped: dict[str, int] = {}
    for v in stats.values():
        for name, n in v.get("ctl_dropped", {}).items():
            ctl_dropped[name] = ctl_dropped.get(name, 0) + int(n)
    if ctl_dropped:
        out["ctl_dropped"] = ctl_dropped
    return out


def _sum_why(instances: list[dict[str, Any]], cons: list[dict[str, Any]]) -> dict[str, int]:
    """The drops of a queue's instances by reason (those that say why: from xdp, or a
    broken ring), with what its consumers never took from rings their producers broke."""
    out: dict[str, int] = {}
    for x in instances:
        for why, n in x.get("why", {}).items():
            out[why] = out.get(why, 0) + n
    lost = sum(x.get("lost", 0) for x in cons)
    if lost:  # (an instance that does not say why dropped on a full ring)
        out["ring_full"] = out.get("ring_full", 0) + sum(x["dropped"] for x in instances
                                                         if "why" not in x)
        out["ring_broken"] = out.get("ring_broken", 0) + lost
    return out


def _sum_counts(a: Any, b: Any) -> Any:
    """Two shards' counters of one table (a segment spread over devices) as one: numbers
    added, dictionaries merged key by key, anything else the first's."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _sum_counts(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k))
                for k in {**a, **b}}
    numbers = isinstance(a, int | float) and isinstance(b, int | float)
    return a + b if numbers and not isinstance(a, bool) else a


# a remote device's link (its stand-in's counts, docs/remote.md): packets bound across
# it that the far side was never seen to take, in a run that was aborted or whose link
# failed; of them, those that reached the far side for a ring broken there (its
# consumer failed) are said apart: (count, the part of it said apart, reason, what)
LINK_DROPS = (("entries_to_device", "dropped_in_device", "link_aborted_to_device",
               "for the device, not seen taken there: the run was aborted or its link "
               "failed"),
              ("dropped_in_device", "", "ring_broken_on_device",
               "for the device, came to it for a ring broken there (its consumer failed): "
               "not taken"),
              ("entries_from_device", "dropped_in_host", "link_aborted_from_device",
               "from the device, never sent to the host: the run was aborted"),
              ("dropped_in_host", "", "ring_broken_on_host",
               "from the device, came to the host for a ring broken there (its consumer "
               "failed, or the run did): not taken"),
              ("in_device_uncounted", "", "in_device_when_link_ended",
               "for the device, taken there before its link ended; its own counts never "
               "came back, so where they ended is not known"))


# A capture's record that holds fewer bytes than its frame had (pcap_port.c): counted
# at the source, never run, since a program would forward it cut short.
CUT_SHORT_WHAT = ("a frame the capture holds only part of (cut by its snap length); "
                  "capture with a larger snap length, e.g. tcpdump -s 0")


def account(g: Graph, sources: dict[str, Any], elements: dict[str, Any],
            queues: list[dict[str, Any]], sinks: dict[str, Any],
            links: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """Every packet in one place: the frames the sources read (and the copies SEND made
    and the packets elements made) = forwarded (written by sinks) + dropped (where and
    why) + consumed (an element's work done: CONSUME, or an element without outputs);
    `unaccounted` is what the equation misses (0 in a run that ended cleanly). A remote
    device whose own counts never came back (its link ended first) stands in the
    equation as its link saw it: the packets it took as dropped there, those that came
    from it as `from_devices` (beside read: its sources and elements are not counted)."""
    meaning = {(n.name, r): d for n in g.nodes for r, d in n.drops}
    # a device's own reason at a source: a frame it cannot carry (the xdp target's veth)
    meaning.update({(n.name, "runt"): "a frame shorter than an Ethernet header, which the "
                    "kernel does not send" for n in g.nodes if n.kind == "source"})
    meaning.update({(n.name, "veth_dropped"): "sent back (XDP_TX) with a VLAN TPID and fewer "
                    "than 20 bytes, which the kernel drops on the veth (a NIC sends it)"
                    for n in g.nodes if n.kind == "sink"})
    dropped: list[dict[str, Any]] = []
    for name, v in sources.items():
        if v.get("dropped"):
            dropped.append({"at": name, "reason": "longer_than_mtu", "packets": v["dropped"],
                            "what": f"a frame longer than the mtu ({g.mtu} B)"})
        if v.get("cut_short"):
            dropped.append({"at": name, "reason": "cut_short", "packets": v["cut_short"],
                            "what": CUT_SHORT_WHAT})
        if v.get("missed"):
            dropped.append({"at": name, "reason": "port_missed", "packets": v["missed"],
                            "what": "dropped by its port before it was read (the port's "
                                    "ring was full)"})
    for name, v in elements.items():
        for why, n in v["why"].items():
            if n:
                dropped.append({"at": name, "reason": why, "packets": n,
                                "what": meaning.get((name, why), "")})
        if v["drop"] > sum(v["why"].values()):
            dropped.append({"at": name, "reason": "dropped",
                            "packets": v["drop"] - sum(v["why"].values()),
                            "what": "DROP() in its body"})
    queue_drops = {"ring_full": "a full ring under enqueue=drop",
                   "ring_broken": "in a ring broken by a failure at either end (a corrupt "
                                  "entry, a failed core, a process that failed at its "
                                  "start), never delivered",
                   **XDP_QUEUE_DROPS}
    for q in queues:
        # (a queue from xdp says why; the others drop only on a full ring)
        for why, n in (q.get("dropped_why") or {"ring_full": q["dropped"]}).items():
            if n:
                dropped.append({"at": q["queue"], "reason": why, "packets": n,
                                "what": queue_drops.get(why, "")})
    for dev, link in (links or {}).items():
        for key, apart, reason, what in LINK_DROPS:
            n = link.get(key, 0) - link.get(apart, 0)
            if n:
                dropped.append({"at": dev, "reason": reason, "packets": n, "what": what})
    # a UDP sink takes every packet but sends only the IPv4/UDP ones not addressed to itself
    sink_drops = (("dropped", "not_sent",
                   "not an IPv4/UDP frame, or more datagrams than a batch holds"),
                  ("to_self", "to_self", "addressed to the server's own socket (a loop)"),
                  ("send_errors", "send_error", "the socket refused the datagram"),
                  ("refused", "port_refused", "its port did not take it (TX ring full, or "
                                              "longer than the port's buffers)"))
    for name, v in sinks.items():
        for key, reason, what in sink_drops:
            if v.get(key):
                dropped.append({"at": name, "reason": reason, "packets": v[key], "what": what})
    consumed = {name: v["consumed"] for name, v in elements.items() if v["consumed"]}
    read = sum(v.get("packets", 0) + v.get("dropped", 0) + v.get("cut_short", 0)
               + v.get("missed", 0) for v in sources.values())
    copies = sum(v["copies"] for v in elements.values())
    made = sum(v["made"] for v in elements.values())
    forwarded = sum(v.get("packets", 0) - sum(v.get(k, 0) for k, _, _ in sink_drops)
                    for v in sinks.values())
    lost = sum(d["packets"] for d in dropped) + sum(consumed.values())
    came = sum(link.get("from_device_uncounted", 0) for link in (links or {}).values())
    out = {"read": read, "copies": copies, "made": made, "forwarded": forwarded,
           "dropped": dropped, "consumed": consumed,
           "unaccounted": read + copies + made + came - forwarded - lost}
    if came:
        out["from_devices"] = came
    return out


def _table(rows: list[list[str]], align: str = "") -> str:
    """Rows as columns; `align` says l or r per column (default: the first left, the
    others right)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    align = align or "l" + "r" * (len(widths) - 1)
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                             for c, w, a in zip(r, widths, align, strict=True)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


TABLE_SHOWN = 16  # nonzero entries of a shared table the text report prints


def format_table(name: str, values: list[int]) -> str:
    """A shared table's nonzero entries, the first TABLE_SHOWN of them (--json has all).
    Only those are made into text; the entries are counted and found in C (count,
    compress), not in a Python loop over a 4M-entry histogram (0.1 s, not 0.3-2 s)."""
    nonzero = len(values) - values.count(0)
    if not nonzero:
        return f"table {name}: all zero ({len(values)} entries)"
    shown = islice(compress(count(), values), TABLE_SHOWN)
    more = (f" ... and {nonzero - TABLE_SHOWN} more nonzero of {len(values)} entries "
            "(--json has them all)" if nonzero > TABLE_SHOWN else "")
    return f"table {name}: " + " ".join(f"[{i}]={values[i]}" for i in shown) + more


def format_accounting(a: dict[str, Any]) -> str:
    """The packets of a run in one equation, then where each one that went no further
    ended and why."""
    extra = "".join(f" + {a[k]} {w}" for k, w in (("copies", "copies (SEND)"),
                                                    ("made", "made by elements"),
                                                    ("from_devices", "from remote devices "
                                                     "whose counts never came"))
                    if a.get(k))
    dropped = sum(d["packets"] for d in a["dropped"])
    line = (f"packets: {a['read']} read{extra} = {a['forwarded']} forwarded + {dropped} "
            f"dropped + {sum(a['consumed'].values())} consumed")
    if a["unaccounted"]:
        line += f"; {a['unaccounted']} unaccounted (still in flight when the run ended?)"
    rows = [["ended at", "how", "packets", "why"]]
    rows += [[d["at"], f"dropped: {d['reason']}", str(d["packets"]), d["what"]]
             for d in a["dropped"]]
    rows += [[name, "consumed", str(n), ""] for name, n in a["consumed"].items()]
    return line if len(rows) == 1 else line + "\n" + _table(rows, "llrl")


def _counters(values: dict[str, Any]) -> str:
    """`key value` pairs, nested objects (a store's TCP server) in parentheses."""
    return ", ".join(f"{k} ({_counters(v)})" if isinstance(v, dict) else f"{k} {v}"
                     for k, v in values.items() if k != "kind")


def packets_flowed(s: dict[str, Any]) -> bool:
    """Whether any packet moved in the run summary `s` describes (read by a source, made
    by an element, come from a remote device, written by a sink): a run that failed
    before any did has counts that say nothing (all zero), only its error."""
    a = s["accounting"]
    return bool(a["read"] or a["made"] or a.get("from_devices") or a["forwarded"])


def format_prefix_file(name: str, v: dict[str, Any]) -> str:
    """An LPM table's prefix file with lines that are not prefixes (skipped): how many,
    and the first one's number, which is where to look (lpm_tables.h's stats)."""
    return (f"table {name}: {v['not_prefixes']} of {v['lines']} lines in {v['path']} "
            f"{'is not a prefix' if v['not_prefixes'] == 1 else 'are not prefixes'}, skipped "
            f"(first: line {v['first_not_prefix']})")


def format_summary(s: dict[str, Any]) -> str:
    """The tables `offlow run` prints."""
    seg_rows = [["segment", "device", "cores", "packets", "Mpps", "Gb/s", "drops"]]
    for x in s["segments"]:
        seg_rows.append([x["segment"], x["device"], ",".join(map(str, x["cores"])),
                         str(x["packets"]), f"{x['mpps']:.3f}", f"{x['gbps']:.3f}",
                         str(x["drops"])])
    parts = [_table(seg_rows)]
    if s["queues"]:
        q_rows = [["queue", "ch", "inst", "B/entry", "B/pkt", "packets", "dropped", "doorbells",
                   "full waits", "occupancy avg/max"]]
        for q in s["queues"]:
            per_pkt = f"{q['bytes'] / q['packets']:.0f}" if q["packets"] else "-"
            q_rows.append([q["queue"], str(len(q["channels"])), str(q["instances"]),
                           str(q["entry_bytes"]), per_pkt, str(q["packets"]), str(q["dropped"]),
                           str(q["doorbells"]), str(q["full_waits"]),
                           f"{q['occupancy_avg']:.1f}/{q['occupancy_max']}"])
        parts.append(_table(q_rows))
    parts.append(format_accounting(s["accounting"]))
    for name, values in s["tables"].items():
        if isinstance(values, dict) and values.get("kind") == "map":
            parts.append(mapreport.format_map(name, values))
            continue
        if isinstance(values, dict) and values.get("kind") == "lpm":
            parts.append(format_prefix_file(name, values))
            continue
        if isinstance(values, dict):  # a table object's counters (its stats_fn)
            parts.append(f"table {name}: " + _counters(values))
            continue
        parts.append(format_table(name, values))
    for name, v in s["sources"].items():
        dropped = (f", {v['dropped']} dropped (longer than the mtu, {s['mtu']} B: "
                   f"{s['mtu_why']})" if v.get("dropped") else "")
        if v.get("cut_short"):
            dropped += (f", {v['cut_short']} cut short in the capture (records holding only "
                        "part of their frame, never run: capture with a larger snap length, "
                        "e.g. tcpdump -s 0)")
        if v.get("missed"):
            dropped += f", {v['missed']} missed (dropped by its port before it was read)"
        parts.append(f"source {name}: {v['packets']} packets{dropped}")
    for name, v in s["sinks"].items():
        where = f" -> {v['path']}" if v.get("path") else f" -> {v['port']}" if "port" in v else ""
        udp = (f", {v['sent']} sent, {v['dropped']} dropped (not IPv4/UDP), "
               f"{v['send_errors']} send errors") if "sent" in v else ""
        if v.get("to_self"):
            udp += f", {v['to_self']} refused (addressed to the server's own socket: a loop)"
        if v.get("refused"):
            udp += f", {v['refused']} refused by its port"
        parts.append(f"sink {name}: {v['packets']} packets{where}{udp}")
    for dev, v in s.get("links", {}).items():
        if any(v.values()):  # (a clean run's link delivered everything: no line)
            parts.append(f"link {dev}: not delivered: " + _counters(v))
    for dev, v in s.get("channels", {}).items():
        parts.append(f"channels {dev}: {v['withdrawn']} answer(s) never taken by the host "
                     "(withdrawn at the device's stop)")
    for name, n in s.get("ctl_dropped", {}).items():
        parts.append(f"control {name}: {n} request(s) staged in parts and dropped unrun "
                     "(their client went away before running them)")
    return "\n\n".join(parts)
