"""offlow/races.py: a shared array updated with a plain read-modify-write from two or
more threads at once is said (explain's warnings, `offlow run`'s stderr and result),
naming the table, the elements, the threads and the atomic add to write instead; one
thread, or atomic adds, say nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from offlow import Element, Program, Shared, SharedMap, Sink, Source
from offlow.build import plan_program
from offlow.codegen.bpf import map_kind
from offlow.dsl.loader import load_program
from offlow.explain import explain
from offlow.races import lost_updates


def _at(text: str, nth: int = 0) -> str:
    """`tests/test_races.py:N` (as the warning writes it): N the line of this file that
    holds `text` (its `nth` such line)."""
    lines = Path(__file__).read_text().splitlines()
    return f"{__file__}:{[i for i, x in enumerate(lines, 1) if text in x][nth]}"


class Tally(Element):
    """A user's byte count per bucket (its own local name for the table)."""

    tables = ("per_bucket",)
    body = r"""
    uint32_t b = pkt->len & 7u;
    per_bucket[b] += pkt->len;   /* plain: load, add, store */
    """


class AtomicTally(Element):
    tables = ("per_bucket",)
    body = r"""
    __atomic_fetch_add(&per_bucket[pkt->len & 7u], pkt->len, __ATOMIC_RELAXED);
    """


def _one(cls: type[Element], cores: list[int], device: str = "host") -> Program:
    p = Program("tally")
    src, t, out = Source("rx"), cls("tally", per_bucket=Shared("bytes", "uint64_t", 8)), Sink("tx")
    src >> t >> out
    p.segment("edge", [src, t, out], device=device, cores=cores)
    return p


def test_plain_updates_on_two_cores_are_said_with_what_to_write() -> None:
    plan = plan_program(_one(Tally, [0, 1]))
    assert lost_updates(plan) == [
        f"table `bytes`: `tally` ({_at('per_bucket[b] += pkt->len;')}) updates it with a "
        "plain read-modify-write (`+=`, `++`, `|=`, ...) on 2 threads at once (host core 0, "
        "host core 1): updates made at the same time are lost; in `tally` write e.g. "
        "__atomic_fetch_add(&per_bucket[i], v, "
        "__ATOMIC_RELAXED), or run its users on one core"]
    assert "warnings:\n  table `bytes`: `tally` (" in explain(plan)


def test_one_thread_or_atomic_adds_say_nothing() -> None:
    for plan in (plan_program(_one(Tally, [0])), plan_program(_one(Tally, [0], "nic")),
                 plan_program(_one(AtomicTally, [0, 1])), plan_program(_one(AtomicTally, [0, 1],
                                                                            "nic"))):
        assert lost_updates(plan) == []
        assert "warnings:" not in explain(plan)


def _two_tallies() -> Program:
    """Two Tallys adding to one array: `first` on the NIC's core, `second` on the
    host's."""
    p = Program("two")
    counts = Shared("bytes", "uint64_t", 8)
    src, a, b, out = Source("rx"), Tally("first", per_bucket=counts), \
        Tally("second", per_bucket=counts), Sink("tx")
    src >> a >> b >> out
    p.segment("rx", [src, a], device="nic", cores=[0])
    p.segment("app", [b, out], device="host", cores=[0])
    return p


def test_two_segments_on_two_threads_updating_one_array_are_said() -> None:
    """The NIC's segment and the host's each add to the array in the window."""
    [w] = lost_updates(plan_program(_two_tallies()))
    line = _at("per_bucket[b] += pkt->len;")
    assert w.startswith(f"table `bytes`: `first` ({line}), `second` ({line}) update it with "
                        "a plain read-modify-write (`+=`, `++`, `|=`, ...) on 2 threads at once "
                        "(host core 0, nic core 0)")


class SlotTally(Element):
    """A user's counter updated through a pointer it takes to the element."""

    tables = ("per_bucket",)
    body = r"""
    uint64_t *slot = &per_bucket[pkt->len % 7u];   /* this packet's bucket */
    *slot += pkt->len;
    """


class PairTally(Element):
    """Its own struct over two counters a bucket, reached by table + index."""

    tables = ("per_bucket",)
    body = r"""
    struct pair { uint64_t pkts, bytes; } *e;
    e = (struct pair *)(per_bucket + 2 * (pkt->len & 3u));
    e->pkts++;                      // two plain updates
    e->bytes += pkt->len;
    """


class AtomicPairTally(Element):
    tables = ("per_bucket",)
    body = r"""
    struct pair { uint64_t pkts, bytes; } *e = (struct pair *)&per_bucket[2 * (pkt->len & 3u)];
    __atomic_fetch_add(&e->pkts, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&e->bytes, pkt->len, __ATOMIC_RELAXED);
    """


class LocalTally(Element):
    """A pointer to its own local, then one reassigned away from the table."""

    tables = ("per_bucket",)
    fields = {"seen": "uint32_t"}
    body = r"""
    uint64_t mine = per_bucket[0], *p = &mine;
    *p += pkt->len;
    uint32_t *s = &state->seen;  /* per-packet */
    (*s)++;
    p = &per_bucket[1];
    p = &mine;                  /* no longer the table's */
    p[0] |= 1u;
    """


def test_plain_updates_through_a_pointer_into_the_array_are_said() -> None:
    """`*slot += v` and `e->pkts++` on an element reached by `&t[i]` or `t + i`: the
    warning names the pointer and what to write through it."""
    assert lost_updates(plan_program(_one(SlotTally, [0, 1]))) == [
        f"table `bytes`: `tally` ({_at('*slot += pkt->len;')}) updates it with a plain "
        "read-modify-write (`+=`, `++`, `|=`, ...; `tally` through its pointer `slot`) on 2 "
        "threads at once (host core 0, host "
        "core 1): updates made at the same time are lost; in `tally` add through `slot` "
        "atomically, e.g. __atomic_fetch_add(slot, v, __ATOMIC_RELAXED) (`&slot->f` for its "
        "member f), or run its users on one core"]
    [w] = lost_updates(plan_program(_one(PairTally, [0, 1])))
    assert f"`tally` ({_at('e->pkts++;')}, {_at('e->bytes += pkt->len;')}) updates" in w, w
    assert ("...; `tally` through its pointer `e`) on 2 threads at once (host core 0, host "
            "core 1)" in w), w
    for cls in (AtomicPairTally, LocalTally):
        assert lost_updates(plan_program(_one(cls, [0, 1]))) == [], cls


def test_a_record_of_several_words_updated_through_a_pointer_is_said() -> None:
    """13 flows of 3 words in Shared(..., "uint32_t", 39): `row = &flows[3 * f];
    row[2]++` on a nic segment of 3 cores."""

    class Flows(Element):
        tables = ("flows",)
        body = r"""
        uint32_t *row = &flows[3 * (pkt->len % 13u)];  // a flow is 3 words
        row[2]++;   /* last seen */
        """

    p = Program("rows")
    src, f, out = Source("rx"), Flows("flows", flows=Shared("fl", "uint32_t", 39)), Sink("tx")
    src >> f >> out
    p.segment("edge", [src, f, out], device="nic", cores=[0, 1, 2])
    [w] = lost_updates(plan_program(p))
    assert w.startswith(f"table `fl`: `flows` ({_at('row[2]++;')}) updates it with a "
                        "plain read-modify-write (`+=`, `++`, `|=`, ...; `flows` through its "
                        "pointer `row`) on 3 "
                        "threads at once (nic core 0, nic core 1, nic core 2)"), w


class Budget(Element):
    """Adds, then reads what it added: the array stays one map every CPU shares."""

    tables = ("per_bucket",)
    body = r"""
    uint32_t b = pkt->len & 7u;
    per_bucket[b] += pkt->len;
    if (per_bucket[b] > 3000u) DROP();
    """


def test_on_xdp_a_shared_map_updated_plainly_is_said_a_per_cpu_one_is_not() -> None:
    """An XDP program runs on every CPU that receives: a plain update of an array that
    stays one shared map loses updates; an add-only array is per-CPU and loses none."""
    [w] = lost_updates(plan_program(_one(Budget, [0], "xdp")))
    # (every CPU that receives runs an XDP program: no `run its users on one core`)
    assert w.endswith(
        "on several CPUs at once (xdp: every CPU that receives): updates made at the "
        "same time are lost; in `tally` write e.g. __atomic_fetch_add(&per_bucket[i], v, "
        "__ATOMIC_RELAXED), or make every use of it an add whose value is unused "
        "(`per_bucket[i] += v;`, no pointer into it): on xdp such an array becomes a "
        "per-CPU map, one copy per CPU, which loses nothing"), w
    assert lost_updates(plan_program(_one(Tally, [0], "xdp"))) == []


def test_on_xdp_a_shared_map_updated_through_a_pointer_is_said() -> None:
    """A pointer taken to an element keeps the array one shared map (not add-only): the
    update through it races on every CPU."""
    [w] = lost_updates(plan_program(_one(SlotTally, [0], "xdp")))
    assert ("on several CPUs at once (xdp: every CPU that receives): updates made at the "
            "same time are lost" in w), w
    assert lost_updates(plan_program(_one(AtomicPairTally, [0], "xdp"))) == []


class Talk(Element):
    """A user's count per source address in a hash map, its value bumped in place."""

    tables = ("talk",)
    body = r"""
    struct talk_key k = {0};
    k.len = pkt->len;
    uint64_t *seen = ofl_map_lookup(talk, &k);   /* the value, in the map */
    if (seen) {
        *seen += 1;                               // plain: load, add, store
    } else {
        uint64_t one = 1;
        (void)ofl_map_update(talk, &k, &one);
    }
    """


def test_on_xdp_a_hash_maps_value_updated_plainly_through_its_lookup_is_said() -> None:
    """On xdp a SharedMap is one BPF hash map every CPU updates; on the NIC it runs on
    one core (and `__sync_fetch_and_add(seen, 1)` is what tests/programs/flow_counts.py
    writes)."""

    def prog(device: str, body: str = Talk.body) -> Program:
        p = Program("talk")
        src, t, out = Source("rx"), Talk("talker", talk=SharedMap(
            "talk", (("len", "uint16_t"),), "uint64_t", 61)), Sink("tx")
        t.body = body  # (a body set at run time: its lines are the body's own)
        src >> t >> out
        p.segment("edge", [src, t, out], device=device, cores=[0])
        return p

    assert lost_updates(plan_program(prog("xdp"))) == [
        "table `talk`: `talker` (body line 6) updates it with a plain read-modify-write "
        "(`+=`, `++`, `|=`, ...; `talker` through its pointer `seen`) on several CPUs at once "
        "(xdp: every CPU "
        "that receives): updates made at the same time are lost; in `talker` add through "
        "`seen` atomically, e.g. __atomic_fetch_add(seen, v, __ATOMIC_RELAXED) (`&seen->f` "
        "for its member f), or place its users on host or nic, on one core: on xdp every "
        "CPU that receives runs the program, and none can have the map to itself"]
    assert lost_updates(plan_program(prog("nic"))) == []
    atomic = Talk.body.replace("*seen += 1;", "__sync_fetch_and_add(seen, 1);")
    assert lost_updates(plan_program(prog("xdp", atomic))) == []


def test_offlow_run_prints_the_warning_and_runs(tmp_path: Path) -> None:
    prog = tmp_path / "mine.py"
    prog.write_text(
        "from offlow import Element, Program, Shared, Sink, Source\n\n\n"
        "class Tally(Element):\n"
        "    tables = ('seen',)\n"
        "    body = 'seen[pkt->len & 3u]++;  // one more'\n\n\n"
        "def program() -> Program:\n"
        "    p = Program('mine')\n"
        "    s, t, o = Source('rx'), Tally('t', seen=Shared('seen', 'uint64_t', 4)), "
        "Sink('tx')\n"
        "    s >> t >> o\n"
        "    p.segment('edge', [s, t, o], device='nic', cores=[0, 1])\n"
        "    return p\n")
    res = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(prog), "--count", "2000",
                          "--json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (f"offlow: warning: table `seen`: `t` ({prog}:6) updates it with a plain "
            "read-modify-write" in res.stderr)
    assert "__atomic_fetch_add(&seen[i], v, __ATOMIC_RELAXED)" in res.stdout  # (its warnings)


class HelperTally(Element):
    """A user's counters bumped by helper functions of its own: through a pointer to
    the element, the array itself with an index, and a pointer its body took."""

    tables = ("per_bucket",)
    helpers = r"""
    /* the bucket's packets and bytes, in two words */
    static inline void bump_pair(uint64_t *pair, uint32_t len)
    {
        pair[0]++;            // packets
        pair[1] += len;       /* bytes */
    }
    static void note_len(uint64_t *all, unsigned idx) { all[idx] |= 1u; }
    static uint64_t peek(const uint64_t *at) { return *at; }   /* a read only */
    static void add_safely(uint64_t *at, uint64_t v)
    {
        __atomic_fetch_add(at, v, __ATOMIC_RELAXED);
    }
    """
    body = r"""
    uint64_t *mine = &per_bucket[2 * (pkt->len % 3u)];   /* this packet's pair */
    bump_pair(mine, pkt->len);
    note_len(per_bucket, 7);
    if (peek(&per_bucket[6]) > 1000u)
        add_safely(&per_bucket[6], 1);
    """


class SafeHelperTally(Element):
    """The same helpers that read or add atomically: nothing is lost."""

    tables = ("per_bucket",)
    helpers = HelperTally.helpers
    body = r"""
    if (peek(&per_bucket[pkt->len & 7u]) < 1000u)
        add_safely(per_bucket + (pkt->len & 7u), pkt->len);
    """


def test_plain_updates_in_a_helper_function_given_a_pointer_are_said() -> None:
    """A pointer into the array (or the array) given to a function the element's
    helpers define is followed into it: its plain updates are said at the helper's
    lines, naming the helper, the body's pointer and the helpers' parameters. The old
    code saw no update."""
    [w] = lost_updates(plan_program(_one(HelperTally, [0, 1])))
    pair, bytes_, note = (_at("pair[0]++;"), _at("pair[1] += len;"), _at("all[idx] |= 1u;"))
    assert w == (
        f"table `bytes`: `tally` ({pair} in `bump_pair`, {bytes_} in `bump_pair`, {note} in "
        "`note_len`) updates it with a plain read-modify-write (`+=`, `++`, `|=`, ...; "
        "`tally` through its pointers `mine`, `pair` in `bump_pair`, `all` in `note_len`) on "
        "2 threads at once (host core 0, host core 1): updates made at the same time are "
        "lost; in `bump_pair`, `note_len` add through the pointer given atomically, e.g. "
        "__atomic_fetch_add(p, v, __ATOMIC_RELAXED), or run its users on one core")
    assert lost_updates(plan_program(_one(SafeHelperTally, [0, 1]))) == []


class PickedTally(Element):
    """A user's counter bumped by a helper chosen at run time, through a pointer."""

    tables = ("per_bucket",)
    helpers = r"""
    static void by_one(uint64_t *c) { *c += 1; }
    static void by_two(uint64_t *c) { __atomic_fetch_add(c, 2, __ATOMIC_RELAXED); }
    """
    body = r"""
    void (*bump)(uint64_t *) = (pkt->len & 1u) ? by_one : by_two;   /* picked per packet */
    bump(&per_bucket[pkt->len % 5u]);
    """


def test_a_pointer_given_through_a_function_pointer_is_said_as_unseen() -> None:
    """The call cannot be followed: the warning says the write cannot be seen, where,
    and what to do; on one core nothing is said."""
    assert lost_updates(plan_program(_one(PickedTally, [0, 1]))) == [
        f"table `bytes`: `tally` ({_at('bump(&per_bucket[pkt->len % 5u]);')} `bump`) gives a "
        "pointer into it to a function whose body offlow cannot see, on 2 threads at once "
        "(host core 0, host core 1): if that function updates it with a plain "
        "read-modify-write (`+=`, `++`, ...), updates made at the same time are lost; make it "
        "add atomically (__atomic_fetch_add(p, v, __ATOMIC_RELAXED)), or call it directly, by "
        "its name"]
    assert lost_updates(plan_program(_one(PickedTally, [0]))) == []


def test_on_xdp_a_hash_maps_value_bumped_by_a_helper_is_said() -> None:
    """The lookup's pointer given to a helper that bumps it plainly: said at the
    helper's line on xdp (every CPU that receives), as when the body bumps it."""
    class Helped(Element):
        tables = ("talk",)
        helpers = r"""
        static void one_more(uint64_t *count) { (*count)++; }   /* plain */
        """
        body = r"""
        struct talk_key k = {0};
        k.len = pkt->len;
        uint64_t *seen = ofl_map_lookup(talk, &k);
        if (seen)
            one_more(seen);
        """

    p = Program("talk")
    src, t, out = Source("rx"), Helped("talker", talk=SharedMap(
        "talk", (("len", "uint16_t"),), "uint64_t", 61)), Sink("tx")
    src >> t >> out
    p.segment("edge", [src, t, out], device="xdp", cores=[0])
    [w] = lost_updates(plan_program(p))
    assert w.startswith(f"table `talk`: `talker` ({_at('(*count)++;')} in `one_more`) updates "
                        "it with a plain read-modify-write (`+=`, `++`, `|=`, ...; `talker` "
                        "through its pointers `seen`, `count` in `one_more`) on several CPUs "
                        "at once (xdp: every CPU that receives)"), w


class CallbackTally(Element):
    """A user's helper that applies the callback it is given to the counter it is
    given: the call inside the helper goes through its own function-pointer parameter."""

    tables = ("per_bucket",)
    helpers = r"""
    typedef void (*bump_fn)(uint64_t *);   /* how a counter is bumped */
    static void by_three(uint64_t *c) { *c += 3; }
    /* apply `how` to the counter at `slot` (its parameter, called: a function pointer) */
    static void apply(uint64_t *slot, bump_fn how)
    {
        how(slot);   // which function runs is the caller's choice
    }
    """
    body = r"""
    apply(&per_bucket[pkt->len % 11u], by_three);   /* eleven buckets */
    """


def test_a_pointer_a_helper_gives_to_its_function_pointer_parameter_is_said_as_unseen() -> None:
    """The helper's call through its parameter cannot be followed, as one through a
    function pointer in the body cannot: said with the helper's line and the helper.
    The old code took the parameter for a function with no body here (a libc call)
    and said nothing."""
    assert lost_updates(plan_program(_one(CallbackTally, [0, 1]))) == [
        f"table `bytes`: `tally` ({_at('how(slot);')} in `apply` `how`) gives a pointer "
        "into it to a function whose body offlow cannot see, on 2 threads at once (host core "
        "0, host core 1): if that function updates it with a plain read-modify-write (`+=`, "
        "`++`, ...), updates made at the same time are lost; make it add atomically "
        "(__atomic_fetch_add(p, v, __ATOMIC_RELAXED)), or call it directly, by its name"]
    assert lost_updates(plan_program(_one(CallbackTally, [0]))) == []


class MixedTally(Element):
    """A user's counters bumped both in its body, through its own pointer, and in a
    helper, through the helper's parameter: two places to make atomic."""

    tables = ("per_bucket",)
    helpers = r"""
    /* the last bucket counts the bytes of long packets */
    static void add_long(uint64_t *bytes_at, uint32_t len) { *bytes_at += len; }
    """
    body = r"""
    uint64_t *hit = &per_bucket[pkt->len % 9u];   /* nine short buckets */
    (*hit)++;
    if (pkt->len > 1000u)
        add_long(&per_bucket[9], pkt->len);
    """


def test_updates_in_the_body_and_in_a_helper_name_both_pointers_and_both_fixes() -> None:
    """The body's pointer and the helper's are each named, and the fix says to add
    atomically in both places. The old code named only the body's `hit` and told to
    fix the body alone: the helper's update stayed lost."""
    assert lost_updates(plan_program(_one(MixedTally, [0, 1], "nic"))) == [
        f"table `bytes`: `tally` ({_at('*bytes_at += len;')} in `add_long`, "
        f"{_at('(*hit)++;')}) updates it with a plain read-modify-write (`+=`, `++`, `|=`, ...; "
        "`tally` through its pointers `hit`, `bytes_at` in `add_long`) on 2 threads at once "
        "(nic core 0, nic core 1): updates made at the same time are lost; in `tally` add "
        "through `hit` atomically, e.g. __atomic_fetch_add(hit, v, __ATOMIC_RELAXED) "
        "(`&hit->f` for its member f), and in `add_long` add through the pointer given "
        "atomically, e.g. __atomic_fetch_add(p, v, __ATOMIC_RELAXED), or run its users on "
        "one core"]


class NamedTypesTally(Element):
    """A user who names its pointer types: a counter pointer, and a bump function
    chosen at run time."""

    tables = ("per_bucket",)
    helpers = r"""
    typedef uint64_t *counter_p;          /* a pointer to one counter */
    typedef void (*bumper)(counter_p);    // how a counter is bumped
    static void by_two(counter_p c) { __atomic_fetch_add(c, 2, __ATOMIC_RELAXED); }
    """
    body = r"""
    counter_p c = &per_bucket[pkt->len % 13u];   /* thirteen buckets */
    (*c)++;
    bumper again = by_two;
    again(&per_bucket[12]);
    """


def test_pointer_locals_of_a_typedef_type_are_followed_and_said() -> None:
    """A local whose type is a typedef of a pointer is a pointer: the update through
    it is said, and a call through one of a function pointer type is unseen. The old
    code followed only locals declared with a `*` and said nothing."""
    assert lost_updates(plan_program(_one(NamedTypesTally, [0, 1]))) == [
        f"table `bytes`: `tally` ({_at('(*c)++;')}) updates it with a plain "
        "read-modify-write (`+=`, `++`, `|=`, ...; `tally` through its pointer `c`) on 2 "
        "threads at once (host core 0, host core 1): updates made at the same time are "
        "lost; in `tally` add through `c` atomically, e.g. __atomic_fetch_add(c, v, "
        "__ATOMIC_RELAXED) (`&c->f` for its member f), or run its users on one core",
        f"table `bytes`: `tally` ({_at('again(&per_bucket[12]);')} `again`) gives a pointer "
        "into it to a function whose body offlow cannot see, on 2 threads at once (host "
        "core 0, host core 1): if that function updates it with a plain read-modify-write "
        "(`+=`, `++`, ...), updates made at the same time are lost; make it add atomically "
        "(__atomic_fetch_add(p, v, __ATOMIC_RELAXED)), or call it directly, by its name"]


BUCKETS = r"""
    uint32_t b = 2 * (pkt->len & 3u);
    per[b]++;               /* packets */
    per[b + 1] += pkt->len; /* bytes */
"""

PICKED = r"""
    void (*bump)(uint64_t *) = (pkt->len & 1u) ? by_one : by_two;   /* picked per packet */
    bump(&per[pkt->len & 3u]);
    bump(&per[4 + (pkt->len & 3u)]);
"""


def _user_program(tmp_path: Path, body: str, notes: int = 84, cores: str = "0, 1") -> Path:
    """A user's program file: a long comment of `notes` lines above an element whose
    C body is `body` (helpers: a plain and an atomic bump), on a NIC segment of
    `cores`."""
    prog = tmp_path / "buckets.py"
    prog.write_text(
        '"""Buckets of packets by length."""\n\n'
        "from offlow import Element, Program, Shared, Sink, Source\n\n"
        + "".join(f"# note {i}: what the buckets are for, in many words\n" for i in range(notes))
        + "\n\nclass Buckets(Element):\n"
        "    tables = ('per',)\n"
        "    helpers = r'''\n"
        "    static void by_one(uint64_t *c) { *c += 1; }\n"
        "    static void by_two(uint64_t *c) { __atomic_fetch_add(c, 2, __ATOMIC_RELAXED); }\n"
        "    '''\n"
        f"    body = r'''{body}    '''\n\n\n"
        "def program() -> Program:\n"
        "    p = Program('buckets')\n"
        "    s, t, o = Source('rx'), Buckets('t', per=Shared('per', 'uint64_t', 8)), Sink('tx')\n"
        "    s >> t >> o\n"
        f"    p.segment('edge', [s, t, o], device='nic', cores=[{cores}])\n"
        "    return p\n")
    return prog


def _lines(prog: Path, text: str) -> list[int]:
    return [i for i, x in enumerate(prog.read_text().splitlines(), 1) if text in x]


def test_update_lines_are_in_line_order_past_line_99(tmp_path: Path) -> None:
    """The updates on lines 99 and 100 of a user's file are said in that order. The old
    code sorted them as text: `buckets.py:100` before `buckets.py:99`."""
    prog = _user_program(tmp_path, BUCKETS)
    assert _lines(prog, "per[b") == [99, 100]
    [w] = lost_updates(plan_program(load_program(prog)))
    assert w.startswith(f"table `per`: `t` ({prog}:99, {prog}:100) updates it with a plain "
                        "read-modify-write"), w


def test_unseen_calls_are_in_line_order_past_line_99(tmp_path: Path) -> None:
    """Two calls through a function pointer, on lines 99 and 100: said in that order.
    The old code sorted them as text, line 100 first."""
    prog = _user_program(tmp_path, PICKED)
    assert _lines(prog, "bump(&per[") == [99, 100]
    [w] = lost_updates(plan_program(load_program(prog)))
    assert w.startswith(f"table `per`: `t` ({prog}:99 `bump`, {prog}:100 `bump`) gives a "
                        "pointer into it"), w


def test_threads_are_in_core_order_past_core_9(tmp_path: Path) -> None:
    """A segment on cores 2 and 10: `nic core 2, nic core 10`. The old code sorted the
    threads as text, core 10 first."""
    [w] = lost_updates(plan_program(load_program(_user_program(tmp_path, BUCKETS,
                                                               cores="2, 10"))))
    assert "on 2 threads at once (nic core 2, nic core 10): updates" in w, w


class Longs(Element):
    """Another user's element on the same table: the bytes of long packets, added by a
    helper of its own through the pointer it is given."""

    tables = ("all",)
    helpers = r"""
    static void add_to(uint64_t *at, uint32_t len) { *at += len; }   /* plain */
    """
    body = r"""
    if (pkt->len > 1000u)
        add_to(&all[7], pkt->len);
    """


def test_each_element_that_updates_the_table_is_told_what_to_write() -> None:
    """Three elements update one table on two cores: `first` (a Tally: its body, with
    an index), `second` (a SlotTally: its body, through its pointer `slot`) and `third`
    (a Longs: its helper `add_to`). The fix names each place to change, what to write
    there. The old code told only the first writer, `first`, what to write."""
    p = Program("three")
    counts = Shared("bytes", "uint64_t", 8)
    src, a, b, c, out = (Source("rx"), Tally("first", per_bucket=counts),
                         SlotTally("second", per_bucket=counts), Longs("third", all=counts),
                         Sink("tx"))
    src >> a >> b >> c >> out
    p.segment("rx", [src, a], device="nic", cores=[0])
    p.segment("app", [b, c, out], device="host", cores=[0])
    [w] = lost_updates(plan_program(p))
    assert w.endswith(
        "updates made at the same time are lost; in `first` write e.g. "
        "__atomic_fetch_add(&per_bucket[i], v, __ATOMIC_RELAXED), and in `second` add "
        "through `slot` atomically, e.g. __atomic_fetch_add(slot, v, __ATOMIC_RELAXED) "
        "(`&slot->f` for its member f), and in `add_to` add through the pointer given "
        "atomically, e.g. __atomic_fetch_add(p, v, __ATOMIC_RELAXED), or run its users on "
        "one core"), w
    assert f"`third` ({_at('*at += len;')} in `add_to`)" in w, w


def test_elements_given_the_same_fix_are_named_together() -> None:
    """Two Tallys on two cores: one piece of advice, naming both."""
    [w] = lost_updates(plan_program(_two_tallies()))
    assert w.endswith("lost; in `first`, `second` write e.g. __atomic_fetch_add("
                      "&per_bucket[i], v, __ATOMIC_RELAXED), or run its users on one core"), w


class SlotOfTally(Element):
    """A user's helper that returns the bucket's counter, updated where it is called
    (its pointer type a typedef, the helper after it)."""

    tables = ("per_bucket",)
    helpers = r"""
    typedef uint64_t *counter_p;   /* one bucket's counter */
    /* the counter of a packet of length `len`: 7 buckets, an odd number */
    static counter_p slot_of(uint64_t *all, uint32_t len) { return &all[len % 7u]; }
    """
    body = r"""
    *slot_of(per_bucket, pkt->len) += pkt->len;   // plain: load, add, store
    counter_p last = slot_of(per_bucket, 6);
    (*last)++;
    """


def test_an_update_through_a_pointer_a_helper_returns_is_said() -> None:
    """`*slot_of(t, len) += v` and `p = slot_of(t, 6); (*p)++`: said at both lines,
    through the call and the local, with what to write there. The old code followed
    no returned pointer and said nothing."""
    assert lost_updates(plan_program(_one(SlotOfTally, [0, 1]))) == [
        f"table `bytes`: `tally` ({_at('*slot_of(per_bucket, pkt->len) += pkt->len;')}, "
        f"{_at('(*last)++;')}) updates it with a plain read-modify-write (`+=`, `++`, `|=`, "
        "...; `tally` through its pointers `last`, `slot_of(per_bucket, pkt->len)`) on 2 "
        "threads at once (host core 0, host core 1): updates made at the same time are "
        "lost; in `tally` add through `last` atomically, e.g. __atomic_fetch_add(last, v, "
        "__ATOMIC_RELAXED) (`&last->f` for its member f), or run its users on one core"]
    atomic = SlotOfTally.body.replace(
        "*slot_of(per_bucket, pkt->len) += pkt->len;",
        "__atomic_fetch_add(slot_of(per_bucket, pkt->len), pkt->len, __ATOMIC_RELAXED);"
    ).replace("(*last)++;", "__atomic_fetch_add(last, 1, __ATOMIC_RELAXED);")

    class Atomic(SlotOfTally):
        body = atomic

    assert lost_updates(plan_program(_one(Atomic, [0, 1]))) == []
    assert lost_updates(plan_program(_one(SlotOfTally, [0]))) == []


class CursorTally(Element):
    """A user's cursor struct that keeps where this packet's counters are: a pair of
    words reached through one member, a spare word through another."""

    tables = ("per_bucket",)
    body = r"""
    struct pair { uint64_t pkts, bytes; };
    struct cursor { struct pair *at; uint64_t *spare; } cur = {
        .at = (struct pair *)&per_bucket[2 * (pkt->len % 3u)],   /* 3 pairs */
    };
    uint64_t mine = 0;
    cur.spare = &mine;            // a local's: not the table
    cur.at->pkts++;
    cur.at->bytes += pkt->len;
    (*cur.spare)++;
    """


def test_an_update_through_a_pointer_kept_in_a_local_struct_is_said() -> None:
    """`cur.at->pkts++` with `cur = { .at = &t[i] }`, on three NIC cores: said at both
    lines, through `cur.at`; the member pointing at a local is not. The old code
    followed only pointer locals and said nothing."""
    p = Program("cursor")
    src, t, out = (Source("rx"), CursorTally("tally", per_bucket=Shared("bytes", "uint64_t", 7)),
                   Sink("tx"))
    src >> t >> out
    p.segment("edge", [src, t, out], device="nic", cores=[0, 1, 2])
    assert lost_updates(plan_program(p)) == [
        f"table `bytes`: `tally` ({_at('cur.at->pkts++;')}, {_at('cur.at->bytes += pkt->len;')}"
        ") updates it with a plain read-modify-write (`+=`, `++`, `|=`, ...; `tally` through "
        "its pointer `cur.at`) on 3 threads at once (nic core 0, nic core 1, nic core 2): "
        "updates made at the same time are lost; in `tally` add through `cur.at` "
        "atomically, e.g. __atomic_fetch_add(cur.at, v, __ATOMIC_RELAXED) (`&cur.at->f` for "
        "its member f), or run its users on one core"]


class EndsTally(Element):
    """A user's two ends of a ring of counters, kept in an array of pointers."""

    tables = ("per_bucket",)
    body = r"""
    uint64_t *ends[2] = { &per_bucket[0], &per_bucket[10] };   /* first, last of 11 */
    (*ends[pkt->len & 1u])++;
    ends[0][1] += 2;    // the one after the first
    """


def test_an_update_through_an_array_of_pointers_is_said_on_xdp_too() -> None:
    """`(*ends[k])++` and `ends[0][1] += 2`: said on two host cores; on xdp the table
    stays one shared map (its address is kept: not only added to) and the updates race
    on every CPU. The old code said nothing."""
    [w] = lost_updates(plan_program(_one(EndsTally, [0, 1])))
    assert w.startswith(
        f"table `bytes`: `tally` ({_at('(*ends[pkt->len & 1u])++;')}, "
        f"{_at('ends[0][1] += 2;')}) updates it with a plain read-modify-write (`+=`, `++`, "
        "`|=`, ...; `tally` through its pointers `ends[0]`, `ends[pkt->len & 1u]`) on 2 "
        "threads at once (host core 0, host core 1)"), w
    plan = plan_program(_one(EndsTally, [0], "xdp"))
    assert map_kind(plan.graph, plan.graph.shared[0])[0] == "array"
    [w] = lost_updates(plan)
    assert "on several CPUs at once (xdp: every CPU that receives)" in w, w


def test_on_xdp_a_hash_maps_value_passed_back_through_a_helper_is_said() -> None:
    """The lookup's pointer given to a helper that returns it (or a spare): bumped
    plainly where the helper's result is used; said on xdp. The old code did not
    follow the returned pointer."""
    class Back(Element):
        tables = ("talk",)
        helpers = r"""
        /* the value, or the spare when the map has none */
        static uint64_t *or_spare(uint64_t *v, uint64_t *spare) { return v ? v : spare; }
        """
        body = r"""
        struct talk_key k = {0};
        k.len = pkt->len;
        uint64_t spare = 0;
        *or_spare(ofl_map_lookup(talk, &k), &spare) += 1;   /* plain */
        """

    p = Program("talk")
    src, t, out = Source("rx"), Back("talker", talk=SharedMap(
        "talk", (("len", "uint16_t"),), "uint64_t", 61)), Sink("tx")
    src >> t >> out
    p.segment("edge", [src, t, out], device="xdp", cores=[0])
    [w] = lost_updates(plan_program(p))
    assert w.startswith(
        f"table `talk`: `talker` ({_at('*or_spare(ofl_map_lookup(talk, &k), &spare) += 1;')}) "
        "updates it with a plain read-modify-write (`+=`, `++`, `|=`, ...; `talker` through "
        "its pointer `or_spare(ofl_map_lookup(talk, &k), &spare)`) on several CPUs at once "
        "(xdp: every CPU that receives)"), w


class HandOffTally(Element):
    """A user's element that keeps the bucket's counter for a later element in a
    per-packet field (as an integer), where no walk of its body can follow it."""

    tables = ("per_bucket",)
    fields = {"counter_at": "uint64_t"}
    body = r"""
    state->counter_at = (uint64_t)(uintptr_t)&per_bucket[pkt->len % 5u];  /* for later */
    """


def test_a_pointer_kept_where_it_cannot_be_followed_is_said_as_unseen() -> None:
    """The pointer stored in a state field cannot be followed: on two threads the
    warning says so, where, and what to do; on one core nothing is said. The old code
    said nothing."""
    assert lost_updates(plan_program(_one(HandOffTally, [0, 1]))) == [
        f"table `bytes`: `tally` ({_at('state->counter_at = ')} `state->counter_at`) keeps "
        "a pointer into it where offlow cannot follow it (a global, a state field, memory "
        "reached through a pointer, a pointer to a local that holds one), on 2 threads at "
        "once (host core 0, host core 1): if it is updated through there with a plain "
        "read-modify-write (`+=`, `++`, ...), updates made at the same time are lost; add "
        "through it atomically (__atomic_fetch_add(p, v, __ATOMIC_RELAXED)), or keep the "
        "pointer in a local of the body (a pointer, a struct's member, an array's element)"]
    assert lost_updates(plan_program(_one(HandOffTally, [0]))) == []
    assert "keeps a pointer into it where offlow cannot follow it" in explain(
        plan_program(_one(HandOffTally, [0, 1])))
