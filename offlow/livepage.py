"""The live page of the metrics server (`offlow run --metrics`): the design's picture
(offlow/picture.py) with its counters, updated every second.

    /             the page: the picture, and a script that polls live.json
    /design.svg   the picture, each box, element and queue edge with a line to fill
    /live.json    the counters now, keyed as the picture's SVG titles are: elements
                  by name, segment boxes as cluster_SEGMENT, queue edges as SRC->DST
                  (a backslash in them doubled, as in the titles: picture.title)

The page computes the rates itself from two polls (packets per second), and shows the
drops and each queue's ring occupancy (mean/most entries waiting)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable
from typing import Any

from offlow import picture
from offlow.errors import OfflowError
from offlow.metrics import Stats, WSGIApp
from offlow.plan import Plan
from offlow.report import summarize

PATHS = ("/", "/design.svg", "/live.json")


def counters(plan: Plan, stats: Stats, up: bool) -> dict[str, Any]:
    """The live page's numbers: packets and drops per element and segment; per queue
    edge the packets taken from its channel, and its queue's drops and occupancy (now,
    and mean/most over the run)."""
    s = summarize(plan, stats)
    g = plan.graph
    elements = {picture.title(n.name): {"packets": 0, "drops": 0} for n in g.nodes}
    for name, v in s["elements"].items():
        elements[picture.title(name)] = {"packets": v["in"], "drops": v["drop"]}
    segments = {picture.title(f"cluster_{x['segment']}"):
                {"packets": x["packets"], "drops": x["drops"]} for x in s["segments"]}
    by_queue = {q["queue"]: q for q in s["queues"]}
    taken: dict[tuple[str, int], int] = {}  # (queue, channel) -> packets taken from it
    waiting: dict[str, int] = {}  # queue -> entries in its rings now
    for dev in stats.values():
        for c in dev.get("cores", []):
            for ch in c.get("channels", []):
                key = (ch["queue"], ch["channel"])
                taken[key] = taken.get(key, 0) + ch["packets"]
            for r in c.get("queues", []):
                if r["side"] == "in":
                    waiting[r["queue"]] = waiting.get(r["queue"], 0) + r.get("occupancy_now", 0)
    edges = {}
    for qp in plan.queues:
        q = by_queue[qp.queue.name]
        for k, ch in enumerate(qp.queue.channels):
            edges[picture.title(f"{ch.edge.src}->{ch.edge.dst}")] = {
                "queue": q["queue"], "channel": k, "packets": taken.get((q["queue"], k), 0),
                "drops": q["dropped"], "occupancy_now": waiting.get(q["queue"], 0),
                "occupancy_avg": q["occupancy_avg"],
                "occupancy_max": q["occupancy_max"]}
    return {"program": g.name, "up": up, "elements": elements, "segments": segments,
            "edges": edges}


NO_PICTURE = ('<svg xmlns="http://www.w3.org/2000/svg" width="600" height="40">'
              '<text x="10" y="25">no picture: {why} (setup.sh installs graphviz)</text></svg>')

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>offlow: {name}</title>
<style>
body {{ font-family: Helvetica, sans-serif; margin: 1em; }}
#status {{ font-weight: bold; }}
text.moving {{ fill: #1a7f37; font-weight: bold; }}
#design svg {{ max-width: 100%; height: auto; }}
</style></head>
<body>
<h1>{name}</h1>
<p><span id="status">waiting for the first counts</span>: packets per second of each
segment, element and queue (from two polls a second apart), drops, and each ring's
occupancy (mean/most entries waiting). <a href="metrics">metrics</a></p>
<div id="design"></div>
<script>
const MARK = "{mark}";
const prev = {{}};
let prevT = null;
function rateText(r) {{
  if (r >= 1e6) return (r / 1e6).toFixed(2) + " Mpps";
  if (r >= 1e3) return (r / 1e3).toFixed(1) + " kpps";
  return r.toFixed(0) + " pps";
}}
function slot(g) {{
  let t = g.querySelector("text[data-live]");
  if (!t) {{
    t = [...g.querySelectorAll("text")].find(x => x.textContent.trim() === MARK);
    if (t) t.dataset.live = "1";
  }}
  return t;
}}
async function tick() {{
  let d;
  try {{
    d = await (await fetch("live.json", {{cache: "no-store"}})).json();
  }} catch (e) {{
    document.getElementById("status").textContent = "the run has ended";
    return;
  }}
  const t = performance.now() / 1000;
  const dt = prevT === null ? 0 : t - prevT;
  for (const g of document.querySelectorAll("#design g.node, #design g.edge, #design g.cluster")) {{
    const title = g.querySelector("title").textContent;
    const kind = g.classList.contains("node") ? "elements"
      : g.classList.contains("edge") ? "edges" : "segments";
    const c = d[kind][title];
    const text = c && slot(g);
    if (!text) continue;
    const before = prev[title];
    prev[title] = c.packets;
    const rate = dt > 0 && before !== undefined ? Math.max(0, (c.packets - before) / dt) : null;
    let s = rate === null ? MARK : rateText(rate);
    if (c.drops) s += ", " + c.drops + " dropped";
    if (c.occupancy_max !== undefined)
      s += ", ring " + c.occupancy_now + " now (" + c.occupancy_avg.toFixed(1) + "/"
        + c.occupancy_max + ")";
    text.textContent = s;
    text.setAttribute("class", rate > 0 ? "live moving" : "live");
  }}
  prevT = t;
  document.getElementById("status").textContent = d.up ? "running"
    : "not running (the last counts)";
}}
fetch("design.svg").then(r => r.text()).then(svg => {{
  document.getElementById("design").innerHTML = svg;
  tick();
  setInterval(tick, 1000);
}});
</script>
</body></html>
"""


def app(plan: Plan, read: Callable[[], tuple[Stats, bool]]) -> WSGIApp:
    """The page's WSGI app (for PATHS; 404 for anything else)."""
    try:
        drawing = picture.svg(plan, live=True).encode()
    except OfflowError as e:  # no Graphviz here: the metrics are served all the same
        drawing = NO_PICTURE.format(why=html.escape(str(e))).encode()
    page = PAGE.format(name=plan.graph.name, mark=picture.LIVE_MARK).encode()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/":
            body, kind = page, "text/html; charset=utf-8"
        elif path == "/design.svg":
            body, kind = drawing, "image/svg+xml"
        elif path == "/live.json":
            stats, up = read()
            body, kind = json.dumps(counters(plan, stats, up)).encode(), "application/json"
        else:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        start_response("200 OK", [("Content-Type", kind), ("Cache-Control", "no-store")])
        return [body]

    return serve
