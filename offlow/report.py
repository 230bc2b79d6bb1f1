"""Turn the processes' raw stats into per-segment and per-queue summaries and tables."""

from __future__ import annotations

from typing import Any

from offlow.codegen.layout import channel_layouts, entry_size
from offlow.ir import Graph


def summarize(g: Graph, stats: dict[str, Any]) -> dict[str, Any]:
    """Per segment: packets, Mpps, Gb/s, drops; per queue: traffic, waits, occupancy."""
    cores = [c for dev in stats.values() for c in dev.get("cores", [])]
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
            "segment": s.name, "device": s.device, "cores": list(s.cores), "packets": pkts,
            "bytes": byts, "seconds": secs, "mpps": pkts / secs / 1e6 if secs else 0.0,
            "gbps": byts * 8 / secs / 1e9 if secs else 0.0, "drops": sum(drops.values()),
            "drops_by_element": drops,
        })
    queues = []
    for q in g.queues:
        lays = channel_layouts(q, g.mtu)
        prod = [x for c in cores for x in c.get("queues", [])
                if x["queue"] == q.name and x["side"] == "out"]
        inst = [x for c in cores for x in c.get("instances", []) if x["queue"] == q.name]
        by_inst = [0] * q.instances
        for x in inst:
            by_inst[x["instance"]] += x["pushed"]
        cons = [x for c in cores for x in c.get("queues", [])
                if x["queue"] == q.name and x["side"] == "in"]
        samples = sum(x["occupancy_samples"] for x in cons)
        queues.append({
            "queue": q.name, "from": q.src_segment, "to": q.dst_segment,
            "fields": [f.name for f in q.fields], "entry_bytes": entry_size(q, g.mtu),
            "state_bytes": max(lay.field_bytes for lay in lays), "carries_data": q.carries_data,
            "channels": [{"edge": str(c.edge), "fields": [f.name for f in c.fields],
                          "carries_data": c.carries_data, "entry_bytes": lay.size}
                         for c, lay in zip(q.channels, lays, strict=True)],
            "instances": q.instances, "steer": q.steer, "enqueue": q.enqueue,
            "packets_by_instance": by_inst,
            "dropped": sum(x["dropped"] for x in inst),
            "packets": sum(x["pushed"] for x in prod), "delivered": sum(x["popped"] for x in cons),
            "bytes": sum(x.get("bytes", 0) for x in prod),
            "doorbells": sum(x["doorbells"] for x in prod),
            "full_waits": sum(x["full_waits"] for x in prod),
            "occupancy_avg": sum(x["occupancy_sum"] for x in cons) / samples if samples else 0.0,
            "occupancy_max": max((x["occupancy_max"] for x in cons), default=0),
            "rings": len(prod),
        })
    elements: dict[str, dict[str, int]] = {}
    for c in cores:
        for el, v in c.get("elements", {}).items():
            acc = elements.setdefault(el, {"in": 0, "drop": 0, "consumed": 0})
            for k in acc:
                acc[k] += v.get(k, 0)
    tables = {k: v for dev in stats.values() for k, v in dev.get("tables", {}).items()}
    sinks = {k: v for dev in stats.values() for k, v in dev.get("sinks", {}).items()}
    sources = {}
    for c in cores:
        for name, v in c.get("sources", {}).items():
            acc = sources.setdefault(name, {})
            for k2, n in v.items():
                acc[k2] = acc.get(k2, 0) + n
    return {"program": g.name, "segments": segments, "queues": queues, "elements": elements,
            "sources": sources, "sinks": sinks, "tables": tables}


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(c.rjust(w) if i else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _counters(values: dict[str, Any]) -> str:
    """`key value` pairs, nested objects (a store's TCP server) in parentheses."""
    return ", ".join(f"{k} ({_counters(v)})" if isinstance(v, dict) else f"{k} {v}"
                     for k, v in values.items())


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
    ended = [(el, v) for el, v in s["elements"].items() if v["drop"] or v.get("consumed")]
    if ended:  # packets that went no further: dropped, or consumed on purpose (CONSUME)
        parts.append(_table([["element", "dropped", "consumed", "of"]]
                            + [[el, str(v["drop"]), str(v.get("consumed", 0)), str(v["in"])]
                               for el, v in ended]))
    for name, values in s["tables"].items():
        if isinstance(values, dict):  # a table object's counters (its stats_fn)
            parts.append(f"table {name}: " + _counters(values))
            continue
        nz = [f"[{i}]={v}" for i, v in enumerate(values) if v]
        parts.append(f"table {name}: " + (" ".join(nz) if nz else "all zero"))
    for name, v in s["sources"].items():
        dropped = f", {v['dropped']} dropped (longer than the mtu)" if v.get("dropped") else ""
        parts.append(f"source {name}: {v['packets']} packets{dropped}")
    for name, v in s["sinks"].items():
        where = f" -> {v['path']}" if v.get("path") else ""
        udp = (f", {v['sent']} sent, {v['dropped']} dropped (not IPv4/UDP), "
               f"{v['send_errors']} send errors") if "sent" in v else ""
        parts.append(f"sink {name}: {v['packets']} packets{where}{udp}")
    return "\n\n".join(parts)
