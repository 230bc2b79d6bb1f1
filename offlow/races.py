"""Lost updates: a shared array that elements update with a plain read-modify-write
(`t[i] += v`, `t[i]++`, `t[i] |= m`, or through a pointer into it: a local, `*p += v`,
`e->hits++`, a local struct's member, `c.p[0]++`, an element of a local array of
pointers, `(*ps[k])++`, or what a helper returns, `*slot(t, h) += 1`:
passes/tableuse.py) from two threads at once.

Each thread loads the element, changes it and stores it back; when two cores do that
to one element at the same time, one of the changes is lost, silently. That happens
when the users of one copy of the array run on two or more threads: a data-parallel
or core-group segment, or segments on different cores (a copy in the window is one
for every device; a segment spread over devices has a copy on each). The built-in
elements use atomic adds (`__atomic_fetch_add(&t[i], v, __ATOMIC_RELAXED)`), which
lose nothing.

An XDP program runs on every CPU that receives: its arrays every use of which adds
become per-CPU maps (codegen/bpf.py: nothing shared, nothing lost); a plain update of
one that stays a shared array map races on every CPU, and so does one of a hash map's
value (a SharedMap: one BPF hash map every CPU updates) through the pointer its lookup
gave. On host and nic a hash map runs on one core.

A pointer into a table given to a function through a function pointer cannot be
followed (tableuse.py follows those given to a helper by name): where its callers run
on two or more threads at once, a warning says the write cannot be seen, and where. So
does one for a pointer into a table kept where tableuse.py cannot follow it (a global,
a static local, a state field, memory reached through a pointer, a pointer to a local
struct or array that holds one): an update made through it later is not seen."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from offlow.codegen.bpf import map_kind
from offlow.ir.graph import SharedTable
from offlow.plan import Plan

# the targets whose segments run on the core threads the plan gives them
THREADED = ("host", "nic", "remote")


def lost_updates(plan: Plan) -> list[str]:
    """A warning for each shared array (or, on xdp, hash map) whose plain
    read-modify-writes run on two or more threads at once, one for each whose elements
    give a pointer into it to a function whose body is not seen on two or more threads
    at once, and one for each whose elements keep a pointer into it where the analysis
    cannot follow it on two or more threads at once (in table order)."""
    g = plan.graph
    out = []
    for t in g.shared:
        if t.is_object and not t.is_map:  # (a map on host or nic runs on one core)
            continue
        writers: dict[str, str] = {}  # element -> its local name of the table
        via: dict[str, list[tuple[str, str]]] = {}  # element -> (pointer, helper or "")
        at: dict[str, list[tuple[str, str]]] = {}  # element -> (where, helper) of its updates
        unseen: dict[str, list[str]] = {}  # element -> its calls not seen into
        stored: dict[str, list[str]] = {}  # element -> its stores not followed
        for n in g.nodes:
            facts = n.facts
            if facts is None or not n.segment:
                continue
            locals_ = {local for local, ref in n.tables if ref == t.name}
            mine = sorted(locals_ & facts.plain_updates)
            if mine:
                writers[n.name] = mine[0]
                via[n.name] = sorted({(p, f) for local, p, f in facts.plain_via
                                      if local in mine}, key=lambda pf: (pf[1], pf[0]))
                at[n.name] = sorted(((w, f) for local, w, f in facts.plain_at
                                     if local in mine and w), key=_by_line)
            calls = sorted((w for local, w in facts.unseen_calls if local in locals_),
                           key=_natural)
            if calls:
                unseen[n.name] = calls
            stores = sorted((w for local, w in facts.unseen_stores if local in locals_),
                            key=_natural)
            if stores:
                stored[n.name] = stores
        threads, where, every_cpu = _threads(plan, t, writers)
        if threads >= 2 or every_cpu:
            out.append(_warning(t.name, t.is_map, writers, via, at, threads, where, every_cpu,
                                bool(t.map_record)))
        for users, does, fix in (
                (unseen, "a pointer into it to a function whose body offlow cannot see",
                 "if that function updates it with a plain read-modify-write (`+=`, `++`, "
                 "...), updates made at the same time are lost; make it add atomically "
                 "(__atomic_fetch_add(p, v, __ATOMIC_RELAXED)), or call it directly, by its "
                 "name"),
                (stored, "a pointer into it where offlow cannot follow it (a global, a state "
                 "field, memory reached through a pointer, a pointer to a local that holds "
                 "one)", "if it is updated through there with a plain read-modify-write "
                 "(`+=`, `++`, ...), updates made at the same time are lost; add through it "
                 "atomically (__atomic_fetch_add(p, v, __ATOMIC_RELAXED)), or keep the "
                 "pointer in a local of the body (a pointer, a struct's member, an array's "
                 "element)")):
            threads, where, every_cpu = _threads(plan, t, users)
            if threads >= 2 or every_cpu:
                verb = "give" if users is unseen else "keep"
                out.append(f"table `{t.name}`: "
                           + ", ".join(f"`{w}` ({', '.join(c)})" for w, c in users.items())
                           + f" {verb}" + ("s" if len(users) == 1 else "") + f" {does}, on "
                           + (f"{threads} threads" if not every_cpu else "several CPUs")
                           + f" at once ({', '.join(where)}): {fix}")
    return out


def _threads(plan: Plan, t: SharedTable, users: Iterable[str]) -> tuple[int, list[str], bool]:
    """How many threads at once run the elements `users` on one copy of table `t`,
    which threads, and whether on xdp (every CPU that receives)."""
    g = plan.graph
    target = {d.name: d.target for d in plan.devices}
    copies: dict[str, set[tuple[str, int]]] = {}  # copy -> threads using it
    every_cpu: set[str] = set()  # xdp devices whose program uses a shared map
    for name in users:
        s = g.segment(g.node(name).segment)
        for k, core in enumerate(s.cores):
            device = s.core_device(k)
            kind = target.get(device, "").split(":")[0]
            if kind == "xdp" and (t.is_map or map_kind(g, t)[0] == "array"):
                every_cpu.add(device)
            elif kind in THREADED:
                copies.setdefault(device if s.spread else "", set()).add((device, core))
    threads = max((len(v) for v in copies.values()), default=0)
    return threads, sorted({f"{d} core {c}" for v in copies.values() for d, c in v}
                           | {f"{d}: every CPU that receives" for d in every_cpu},
                           key=_natural), bool(every_cpu)


def _natural(text: str) -> tuple[tuple[int, str, int], ...]:
    """Sorts `text` with its runs of digits as numbers: `prog.py:99` before
    `prog.py:100`, `body line 9` before `body line 10`, `host core 2` before `host core
    10`."""
    return tuple((1, "", int(run)) if digits else (0, run, 0)
                 for digits, run in ((d, "".join(g)) for d, g in groupby(text, str.isdigit)))


def _by_line(where_helper: tuple[str, str]) -> tuple[tuple[tuple[int, str, int], ...], str]:
    """Sorts an update's (where, helper) by file, then line as a number, then helper."""
    where, helper = where_helper
    return _natural(where), helper


def _warning(table: str, is_map: bool, writers: dict[str, str],
             via: dict[str, list[tuple[str, str]]], at: dict[str, list[tuple[str, str]]],
             threads: int, where: list[str], every_cpu: bool, record: bool = False) -> str:
    """The warning for `table`: who updates it how (where, through which pointers: the
    body's and its helpers'), on which threads, what to write (in each writer's body,
    in the helpers, or both; a map whose value is a record: its members are packed, and
    C takes no atomic add on a packed member)."""
    local = next(iter(writers.values()))
    pointers = "".join(f"; `{w}` through its pointer{'s' if len(ps) > 1 else ''} "
                       + ", ".join(f"`{p}`" + (f" in `{f}`" if f else "") for p, f in ps)
                       for w, ps in via.items() if ps)
    who = ", ".join(f"`{w}` ({', '.join(x + (f' in `{f}`' if f else '') for x, f in at[w])})"
                    if at[w] else f"`{w}`" for w in writers)
    return (f"table `{table}`: {who} "
            f"update{'s' if len(writers) == 1 else ''} it with a plain read-modify-write "
            f"(`+=`, `++`, `|=`, ...{pointers}) on "
            + (f"{threads} threads" if not every_cpu else "several CPUs")
            + f" at once ({', '.join(where)}): updates made at the same time are lost; "
            f"{_RECORD_FIX if record else _fix(is_map, writers, via, at)}, or "
            + _instead(is_map, every_cpu, local))


# (a record's members are packed, `&rec->f` may be unaligned: clang refuses an atomic
# add there, -Waddress-of-packed-member)
_RECORD_FIX = ("its value is a record, whose members are packed and take no atomic add: "
               "keep a count that must lose nothing in a map of its own, of integer values "
               "(__atomic_fetch_add(p, v, __ATOMIC_RELAXED) through its lookup's pointer)")


def _fix(is_map: bool, writers: dict[str, str], via: dict[str, list[tuple[str, str]]],
         at: dict[str, list[tuple[str, str]]]) -> str:
    """What to write, in every place that updates the table plainly: each writer's body
    that does (writers given the same advice named together), then the helper functions
    that do (each named once: the update lines say whose)."""
    bodies: dict[str, list[str]] = {}  # what to write in a body -> the elements
    helpers: list[str] = []
    for name, local in writers.items():
        its_helpers = sorted({f for _, f in at[name] if f})
        helpers += [f for f in its_helpers if f not in helpers]
        if its_helpers and all(f for _, f in at[name]):  # (no update in the body)
            continue
        ptrs = [p for p, f in via[name] if not f]  # (the body's own pointers)
        what = (f"write e.g. __atomic_fetch_add(&{local}[i], v, __ATOMIC_RELAXED)"
                if not is_map and not ptrs else
                "add through `{0}` atomically, e.g. __atomic_fetch_add({0}, v, "
                "__ATOMIC_RELAXED) (`&{0}->f` for its member f)".format((ptrs or ["p"])[0]))
        bodies.setdefault(what, []).append(name)
    parts = [f"in {', '.join(f'`{n}`' for n in names)} {what}" for what, names in bodies.items()]
    if helpers:
        parts.append(f"in {', '.join(f'`{f}`' for f in helpers)} add through the pointer "
                     "given atomically, e.g. __atomic_fetch_add(p, v, __ATOMIC_RELAXED)")
    return ", and ".join(parts)


def _instead(is_map: bool, every_cpu: bool, local: str) -> str:
    """What else loses nothing: one core, where threads are cores; on xdp, where every
    CPU that receives runs the program, a per-CPU array (a map needs its atomic add)."""
    if not every_cpu:
        return "run its users on one core"
    if is_map:
        return ("place its users on host or nic, on one core: on xdp every CPU that "
                "receives runs the program, and none can have the map to itself")
    return (f"make every use of it an add whose value is unused (`{local}[i] += v;`, no "
            "pointer into it): on xdp such an array becomes a per-CPU map, one copy per CPU, "
            "which loses nothing")
