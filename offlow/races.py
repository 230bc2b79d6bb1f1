"""Lost updates: a shared array that elements update with a plain read-modify-write
(`t[i] += v`, `t[i]++`, `t[i] |= m`, or through a local pointer into it: `*p += v`,
`e->hits++`: passes/tableuse.py) from two threads at once.

Each thread loads the element, changes it and stores it back; when two cores do that
to one element at the same time, one of the changes is lost, silently. That happens
when the users of one copy of the array run on two or more threads: a data-parallel
or core-group segment, or segments on different cores (a copy in the window is one
for every device; a segment spread over devices has a copy on each). The built-in
elements use atomic adds (`__atomic_fetch_add(&t[i], v, __ATOMIC_RELAXED)`), which
lose nothing.

An XDP program runs on every CPU that receives: its arrays every use of which adds
become per-CPU maps (codegen/bpf.py: nothing shared, nothing lost); a plain update of
one that stays a shared array map races on every CPU."""

from __future__ import annotations

from offlow.codegen.bpf import map_kind
from offlow.plan import Plan

# the targets whose segments run on the core threads the plan gives them
THREADED = ("host", "nic", "remote")


def lost_updates(plan: Plan) -> list[str]:
    """A warning for each shared array whose plain read-modify-writes run on two or
    more threads at once (in table order)."""
    g = plan.graph
    target = {d.name: d.target for d in plan.devices}
    out = []
    for t in g.shared:
        if t.is_object or t.map_key:
            continue
        copies: dict[str, set[tuple[str, int]]] = {}  # copy -> threads updating it
        every_cpu: set[str] = set()  # xdp devices whose program updates a shared map
        writers: dict[str, str] = {}  # element -> its local name of the array
        for n in g.nodes:
            mine = sorted({local for local, ref in n.tables if ref == t.name}
                          & (n.facts.plain_updates if n.facts else frozenset()))
            if not mine or not n.segment:
                continue
            s = g.segment(n.segment)
            for k, core in enumerate(s.cores):
                device = s.core_device(k)
                kind = target.get(device, "").split(":")[0]
                if kind == "xdp" and map_kind(g, t)[0] == "array":
                    every_cpu.add(device)
                elif kind in THREADED:
                    copies.setdefault(device if s.spread else "", set()).add((device, core))
            writers[n.name] = mine[0]
        threads = max((len(v) for v in copies.values()), default=0)
        if threads >= 2 or every_cpu:
            where = sorted({f"{d} core {c}" for v in copies.values() for d, c in v}
                           | {f"{d}: every CPU that receives" for d in every_cpu})
            name, local = next(iter(writers.items()))
            out.append(
                f"table `{t.name}`: {', '.join(f'`{w}`' for w in writers)} "
                f"update{'s' if len(writers) == 1 else ''} it with a plain read-modify-write "
                f"(`+=`, `++`, `|=`, ...) on "
                + (f"{threads} threads" if not every_cpu else "several CPUs")
                + f" at once ({', '.join(where)}): updates made at the same time are lost; "
                f"in `{name}` write e.g. __atomic_fetch_add(&{local}[i], v, "
                "__ATOMIC_RELAXED), or run its users on one core"
                + ("; on xdp an array that every element only adds to becomes one copy per "
                   "CPU, which loses nothing" if every_cpu else ""))
    return out
