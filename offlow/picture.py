"""`offlow explain --svg`: the compiled design drawn by Graphviz.

Elements are grouped in a box per segment, coloured by the segment's device; each edge
between segments (a channel of a logical queue) is labelled with the per-packet fields
that cross it and the bytes a 64 B packet moves; each table sits in the box of a
segment that uses it on its device (beside them all when it lives in the window), tied
to the elements that use it by dashed lines.  The graph is written as DOT by the
`graphviz` package and laid out by Graphviz's `dot` (Debian's graphviz)."""

from __future__ import annotations

import shutil
from pathlib import Path

import graphviz

from offlow.argtypes import unwritable
from offlow.errors import OfflowError
from offlow.ir import Edge, Graph, SharedTable
from offlow.plan import Plan, QueuePlan

# fill colours per device; another device gets one of SPARE
COLOURS = {"host": "#d6e6ff", "nic": "#ffe2b8", "xdp": "#d5f2d0", "window": "#eeeeee"}
SPARE = ("#f2d5f0", "#fff6b8", "#d0f0f0", "#f0d8d0")
PACKET = 64  # the packet size whose bytes the queue labels give
LIVE_MARK = "\u2026"  # the label line a live picture fills in (an ellipsis until then)


def colour(device: str, devices: list[str]) -> str:
    """The fill colour of `device` (one of the program's `devices`)."""
    if device in COLOURS:
        return COLOURS[device]
    others = sorted(d for d in devices if d not in COLOURS)
    return SPARE[others.index(device) % len(SPARE)] if device in others else "#ffffff"


def title(name: str) -> str:
    """A node's or cluster's DOT name for `name`, which is also its SVG <title>: a backslash
    doubled, as DOT reads one (an element named `a\\` would end its quoted name)."""
    return graphviz.escape(name)


def text(label: str) -> str:
    """A label line as written: a backslash doubled, else Graphviz reads `\\v` (dropped),
    `\\N` (the node's name) or a closing one (a syntax error)."""
    return graphviz.escape(label)


def _crossing(plan: Plan) -> dict[Edge, tuple[QueuePlan, int]]:
    """Each edge between segments: its queue and channel number."""
    out = {}
    for qp in plan.queues:
        for lay in qp.layouts:
            out[qp.queue.channels[lay.channel].edge] = (qp, lay.channel)
    return out


def queue_label(qp: QueuePlan, channel: int) -> str:
    """What crosses a queue channel: the queue, the fields and their bytes, whether the
    packet's bytes go too, and the bytes a PACKET-byte packet moves."""
    q = qp.queue
    lay = next(x for x in qp.layouts if x.channel == channel)
    ch = q.channels[channel]
    fields = ", ".join(f.name for f in ch.fields) or "no fields"
    data = (" + timestamp" if lay.carries_ts else "") + (" + packet" if ch.carries_data else "")
    chan = f" ch{channel}" if q.tagged else ""
    return text(f"{q.name}{chan}\n{fields} ({lay.field_bytes} B){data}\n"
                f"{lay.bytes_for(PACKET)} B per {PACKET} B packet")


def _table_home(g: Graph, t: SharedTable) -> str | None:
    """The segment whose box holds table `t`: the first one using it on its device;
    None for the window's tables and tables no element uses."""
    if t.home == "window":
        return None
    for n in g.nodes:
        if n.segment and any(ref == t.name for _, ref in n.tables) \
                and g.segment(n.segment).device == t.home:
            return n.segment
    return None


def design(plan: Plan, live: bool = False) -> graphviz.Digraph:
    """The picture of a plan, as a Graphviz graph. `live`: every segment box, element
    and queue edge gets one more label line (LIVE_MARK), which the live page of the
    metrics server (offlow/livepage.py) fills with its counters."""
    more = f"\n{LIVE_MARK}" if live else ""
    g = plan.graph
    devices = sorted({s.device for s in g.segments})
    dot = graphviz.Digraph(g.name, graph_attr={"rankdir": "LR", "fontname": "Helvetica",
                                               "label": text(f"{g.name} (offlow explain)")},
                           node_attr={"fontname": "Helvetica", "style": "filled",
                                      "fillcolor": "white"},
                           edge_attr={"fontname": "Helvetica", "fontsize": "10"})
    homes = {t.name: _table_home(g, t) for t in g.shared}
    for s in g.segments:
        with dot.subgraph(name=title(f"cluster_{s.name}")) as c:
            c.attr(label=text(f"{s.name}: {s.device}, cores {','.join(map(str, s.cores))}")
                   + more,
                   style="filled,rounded", fillcolor=colour(s.device, devices),
                   **{"class": f"segment device-{s.device}"})
            for n in g.nodes:
                if n.segment == s.name:
                    shape = {"source": "invhouse", "sink": "house"}.get(n.kind, "box")
                    c.node(title(n.name), text(n.name) + more, shape=shape,
                           tooltip=text(n.cls or n.kind))
            for t in g.shared:
                if homes[t.name] == s.name:
                    c.node(title(f"table {t.name}"), _table_text(t), shape="cylinder",
                           fillcolor="#fafafa")
    for t in g.shared:
        if homes[t.name] is None:
            dot.node(title(f"table {t.name}"), _table_text(t) + text(f"\n(in {t.home})"),
                     shape="cylinder", fillcolor=colour(t.home, devices))
        for n in g.nodes:
            if any(ref == t.name for _, ref in n.tables):
                dot.edge(title(n.name), title(f"table {t.name}"), style="dashed", dir="none",
                         color="#888888")
    crossing = _crossing(plan)
    for e in g.edges:
        several = len(g.node(e.src).outputs) > 1
        if e in crossing:
            qp, ch = crossing[e]
            dot.edge(title(e.src), title(e.dst), label=queue_label(qp, ch) + more,
                     penwidth="2",
                     color="#c0392b" if qp.queue.crosses_device else "#555555",
                     taillabel=text(e.src_port) if several else "")
        else:
            dot.edge(title(e.src), title(e.dst), label=text(e.src_port) if several else "")
    for ch in g.channels:
        h = ch.handler
        dot.node(title(h.name), text(f"{h.name}\nchannel {ch.name}"), shape="component",
                 fillcolor=colour(ch.device, devices))
        for _, ref in h.tables:
            dot.edge(title(h.name), title(f"table {ref}"), style="dashed", dir="none",
                     color="#888888")
    return dot


def _table_text(t: SharedTable) -> str:
    return text(f"{t.name}\n{t.ctype}" + ("" if t.is_object else f"[{t.length}]"))


def check_target(path: Path) -> None:
    """Before compiling: the SVG's folder exists and takes files, and Graphviz's dot is
    installed."""
    why = unwritable(path)
    if why:
        raise OfflowError(f"--svg {path}: {why}")
    if shutil.which("dot") is None:
        raise OfflowError("--svg needs Graphviz's `dot` (Debian: apt-get install graphviz; "
                          "setup.sh installs it)")


def svg(plan: Plan, live: bool = False) -> str:
    """The picture of a plan as SVG text."""
    try:
        return str(design(plan, live).pipe(format="svg", encoding="utf-8"))
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError) as e:
        raise OfflowError(f"Graphviz failed: {e}") from e


def write_svg(plan: Plan, path: Path) -> None:
    """Draw the plan into the SVG file `path`."""
    try:
        text = svg(plan)
    except OfflowError as e:
        raise OfflowError(f"--svg {path}: {e}") from e
    try:
        path.write_text(text)
    except OSError as e:
        raise OfflowError(f"--svg {path}: cannot write it: {e.strerror}") from e
