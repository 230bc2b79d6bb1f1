"""Lower a segment placed on two devices (``device=["nic", "host"]``) into two segments
and a balancer.

A data-parallel segment S on devices A and B becomes S on A and a copy of it, S_B, on B
(its elements copied as NAME_B); the one edge that feeds S from the segment P before it
goes through a balancer made in P, which hands each packet to S or to S_B in the share
it moves towards balance while running (runtime/core/include/offlow/balance.h). Each
copy starts with a meter, S_meter and S_meter_B, that publishes its core's packets and
busy time in the window table S_rates (on host and nic, whose cores count them); where
the busy time is counted (profile-scaled runs) the balancer sets the share from the two
sides' rates, else it climbs the hill of the packets it hands out per epoch. Both copies
send on to the same elements after S:

    P -> S -> T      becomes      P -> S_balance -d0-> S_meter   -> S   -> T
                                               \\-d1-> S_meter_B -> S_B -/
"""

from __future__ import annotations

import math
from dataclasses import replace

from offlow.errors import OfflowError
from offlow.ir import Edge, Graph, Node, PortSpec, Segment, SharedTable

# The devices whose copies get a meter: their cores count packets and busy time.
METERED = {"host", "nic"}


def split_balanced(g: Graph) -> Graph:
    """Lower every segment placed on two devices (see the module's text)."""
    for s in g.segments:
        if s.also:
            g = _split(g, s)
    return g


def _split(g: Graph, s: Segment) -> Graph:
    where = f"segment `{s.name}` on {s.device} and {s.also}"
    members = [n for n in g.nodes if n.segment == s.name]
    ends = [n.name for n in members if n.kind != "element"]
    if ends:
        raise OfflowError(f"{where}: holds `{ends[0]}`, a {g.node(ends[0]).kind}; a segment "
                          "on two devices takes its packets from a queue and sends them on "
                          "to one: move sources and sinks to segments of their own")
    if s.group:
        raise OfflowError(f"{where}: a core group cannot be split between two devices; "
                          "place it on one, or make it data-parallel (group=off)")
    inside = {n.name for n in members}
    caches = [c.name for c in g.caches if {c.first, c.last} & inside]
    if caches:
        raise OfflowError(f"{where}: cache `{caches[0]}` is around its elements; a cache "
                          "lives on one device: place the segment on one")
    feeds = [e for e in g.edges if e.dst in inside and e.src not in inside]
    if len(feeds) != 1:
        raise OfflowError(f"{where}: the balancer splits the packets of one edge into the "
                          f"segment, but {len(feeds)} enter it "
                          f"({', '.join(map(str, feeds)) or 'none'})")
    feed = feeds[0]
    before = g.segment(g.node(feed.src).segment)
    if len(before.cores) != 1 or before.group:
        raise OfflowError(f"{where}: segment `{before.name}` feeds it through the balancer, "
                          "which keeps its state on one core: place it on one core")
    meter, rates = f"{s.name}_meter", f"{s.name}_rates"
    copy = {n: f"{n}_{s.also}" for n in (*inside, meter)}
    bal, seg_b = f"{s.name}_balance", f"{s.name}_{s.also}"
    taken = set(g.by_name) | {t.name for t in g.shared} | {x.name for x in g.segments}
    for name in (*copy.values(), bal, seg_b, meter, rates):
        if name in taken:
            raise OfflowError(f"{where}: its copy on {s.also} needs the name `{name}`, which "
                              "is taken; rename that element or segment")
    port_t = g.node(feed.dst).input(feed.dst_port).type
    # meters where the copies run as threads of a process (a gpu kernel has no core
    # counters); without them the balancer climbs
    metered = {s.device, s.also} <= METERED
    balancer = Node(
        name=bal, kind="element", cls="Balance", inputs=(PortSpec("inp", port_t),),
        outputs=(PortSpec("d0", port_t), PortSpec("d1", port_t)),
        body=f"    if (ofl_balance_next(bal, {'rates' if metered else 'NULL'}))\n"
             "        EMIT(d1);\n    EMIT(d0);",
        tables=(("bal", bal), *((("rates", rates),) if metered else ())),
        segment=before.name,
        origin=f"balance of segment {s.name} between {s.device} and {s.also}")
    meters = [Node(name=name, kind="element", cls="BalanceMeter",
                   inputs=(PortSpec("inp", port_t),), outputs=(PortSpec("out", port_t),),
                   body=f"    ofl_balance_meter(&rates[{side}], ctx->core.pkts_in, "
                        "ctx->core.busy_cpu_ns, ctx->core.busy_wall_ns);\n"
                        "    EMIT(out);",
                   tables=(("rates", rates),), segment=seg,
                   origin=f"the rate of segment {s.name} on {dev}, for its balancer")
              for side, (name, seg, dev) in enumerate(((meter, s.name, s.device),
                                                       (copy[meter], seg_b, s.also)))
              if metered]
    copies = [replace(n, name=copy[n.name], segment=seg_b, fields=()) for n in members]
    edges = [e for e in g.edges if e != feed]
    edges += [Edge(copy.get(e.src, e.src), e.src_port, copy.get(e.dst, e.dst), e.dst_port)
              for e in g.edges if e.src in inside]
    edges.append(Edge(feed.src, feed.src_port, bal, "inp"))
    if metered:
        edges += [Edge(bal, "d0", meter, "inp"), Edge(meter, "out", feed.dst, feed.dst_port),
                  Edge(bal, "d1", copy[meter], "inp"),
                  Edge(copy[meter], "out", copy[feed.dst], feed.dst_port)]
    else:
        edges += [Edge(bal, "d0", feed.dst, feed.dst_port),
                  Edge(bal, "d1", copy[feed.dst], feed.dst_port)]
    table = SharedTable(bal, "struct ofl_balance_run", 1, open_fn="ofl_balance_open",
                        close_fn="ofl_balance_close", stats_fn="ofl_balance_stats",
                        source=f"run-time balance of {s.name} between {s.device} (d0) and "
                               f"{s.also} (d1)", one_core=True,
                        check="offlow.passes.balance:check_options",
                        keys=tuple(sorted([*CHOICES, *OPTIONS])))
    side_rates = SharedTable(rates, "struct ofl_balance_side", 2,
                             source=f"packets and busy time of {s.name} on {s.device} and "
                                    f"{s.also}, written by their meters")
    segments = []
    for x in g.segments:
        if x.name == s.name:
            segments += [replace(x, also=""), replace(x, name=seg_b, device=s.also, also="")]
        else:
            segments.append(x)
    return replace(g, nodes=(*g.nodes, balancer, *meters, *copies), edges=tuple(edges),
                   segments=tuple(segments),
                   shared=(*g.shared, table, *((side_rates,) if metered else ())))


# The balancer's options (runtime/core/include/offlow/balance.h): name -> (low, high,
# default), and those that take a word: name -> the words.
CHOICES = {"adapt": ("on", "off"), "time": ("cpu", "wall")}
OPTIONS = {"share": (0.0, 1.0, 0.5), "epoch_us": (1.0, 1e7, 1e4),
           "min_step": (1 / 65536, 0.5, 1 / 256), "max_step": (1 / 65536, 0.5, 1 / 8)}


def check_options(name: str, options: dict[str, str]) -> None:
    """Refuse a balancer's bad option values before any process starts (the runner
    calls it: SharedTable.check). Its keys are the table's declared ones, a user's
    other key refused before this (offlow.optkeys)."""
    values = {}
    for key, value in options.items():
        if key in CHOICES:
            if value not in CHOICES[key]:
                raise OfflowError(f"balancer `{name}`: {key}={value}: expected "
                                  f"{' or '.join(CHOICES[key])}")
            continue
        if key not in OPTIONS:
            continue
        low, high, _ = OPTIONS[key]
        try:
            x = float(value)
        except ValueError:
            x = math.nan
        if not low <= x <= high:
            raise OfflowError(f"balancer `{name}`: {key}={value} is not a number within "
                              f"{low:g}..{high:g}")
        values[key] = x
    lo = values.get("min_step", OPTIONS["min_step"][2])
    if lo > values.get("max_step", OPTIONS["max_step"][2]):
        raise OfflowError(f"balancer `{name}`: min_step must not pass max_step")
