"""passes/tableuse.py through analyze_body: which shared arrays a body only adds to
(a statement adding to one element, its value unused), and its add builtins with the
array each adds to."""

from __future__ import annotations

import random

import pytest

from offlow.passes import tableuse
from offlow.passes.cbody import BodyInfo, analyze_body


def _use(body: str) -> BodyInfo:
    return analyze_body(body, element="tally", outputs=["out"], fields={"k": "uint8_t"},
                        tables=["hits", "bytes_"])


def test_statements_that_add_to_an_element_only_add() -> None:
    info = _use(r"""
    /* every form of an add whose value nobody reads */
    hits[state->k & 3u] += 1;
    hits[0]++; ++hits[1]; hits[2]--;
    *bytes_ -= pkt->len;   // the first element
    for (int i = 0; i < 2; i++) hits[i] += 1, bytes_[i]++;
    switch (state->k) { case 1: hits[3]++; break; default: bytes_[1] += 2; }
    if (pkt->len > 60) __sync_fetch_and_add(&bytes_[2], pkt->len);
    else __atomic_add_fetch(&hits[0], 1, __ATOMIC_RELAXED);
    """)
    assert info.adds_only == {"hits", "bytes_"} and info.table_other == frozenset()
    assert info.atomic_adds == {("__sync_fetch_and_add", "bytes_"),
                                ("__atomic_add_fetch", "hits")}


def test_a_read_anywhere_makes_the_array_used_otherwise() -> None:
    for body in ("if (hits[0] > 9) DROP(); bytes_[0] += 1;",   # a read
                 "hits[0] = 1; bytes_[0] += 1;",                 # a store
                 "uint32_t *p = &hits[1]; *p += 1; bytes_[0]++;",  # its address
                 "hits[hits[0] & 1u] += 1; bytes_[0]++;",          # read in its own index
                 "state->k = (uint8_t)hits[0]++; bytes_[0]++;",    # an add's value used
                 "ofl_note(hits); bytes_[0]++;",                   # handed to a function
                 "{ int hits = 0; hits += 1; } bytes_[0]++;"):     # a local hiding it
        info = _use(body)
        assert info.adds_only == {"bytes_"} and info.table_other == {"hits"}, body


def test_an_atomic_adds_value_used_is_a_read_and_its_builtin_stays_atomic() -> None:
    info = _use("uint64_t t = __sync_fetch_and_add(&hits[0], 1); (void)t;"
                "__sync_fetch_and_add(&bytes_[0], 1); __atomic_fetch_sub(&state->k, 1, 0);")
    assert info.adds_only == {"bytes_"} and info.table_other == {"hits"}
    assert info.atomic_adds == {("__sync_fetch_and_add", ""), ("__sync_fetch_and_add", "bytes_"),
                                ("__atomic_fetch_sub", "")}


def test_plain_read_modify_writes_are_listed_wherever_they_stand() -> None:
    """What two cores at once would lose: a compound assignment or ++/-- on an element,
    as a statement or inside an expression; not an add builtin, a plain store or a read."""
    for body in ("hits[state->k & 3u] += 1;", "hits[0]++;", "--hits[1];", "*hits -= 2;",
                 "hits[0] |= 4u;", "hits[1] <<= 1;",
                 "if (++hits[0] > 3000u) DROP();",            # its value used
                 "state->k = (uint8_t)(hits[2] += pkt->len);",
                 "for (int i = 0; i < 2; i++) { hits[i] *= 2u; }"):
        assert _use(body).plain_updates == {"hits"}, body
    for body in ("__atomic_fetch_add(&hits[0], 1, __ATOMIC_RELAXED);",
                 "__sync_fetch_and_add(&hits[1], 2);", "hits[0] = 1;",
                 "if (hits[0] > 3) DROP();", "state->k += (uint8_t)hits[0];",
                 "{ int bytes_ = 0; bytes_++; (void)bytes_; }"):
        assert _use(body).plain_updates == frozenset(), body


def test_updates_through_a_pointer_into_an_array_are_plain_updates_of_it() -> None:
    """A local pointer the body takes to an element (its address, the array plus an
    index, a copy of such a pointer, a cast to the user's own struct), updated through
    `*p`, `p[i]` or `p->f`, in the order the body runs."""
    for body in (
            "uint32_t *slot = &hits[state->k & 3u];  /* mine */\n*slot += pkt->len;",
            "struct pair { uint32_t lo, hi; };\n"
            "struct pair *e = (struct pair *)&hits[2 * (state->k & 1u)];\ne->hi++;",
            "uint32_t *e;\ne = hits + (pkt->len % 3u);  // odd size\ne[0] |= 2u;",
            "uint32_t *a = hits; uint32_t *b = a + 1; (*b)--;",       # a copy of one
            "uint32_t *flow = &hits[3 * (state->k % 5u)];\nflow[2] += 7;",  # 3 words a flow
            "for (uint32_t *q = hits; q < hits + 4; q++) *q *= 2u;",
            "uint32_t none = 0, *p = &none;\nif (pkt->len > 60) p = &hits[1];\n*p += 1;",
            "uint32_t none = 0, *p = &hits[0];\nif (pkt->len > 60) p = &none;\n*p += 1;",
            "uint32_t *p = 0;\nfor (int i = 0; i < 2; i++) { if (p) *p += 1; p = &hits[i]; }",
            "uint8_t k = 3;\nuint64_t *n = ofl_map_lookup(hits, &k);  // a map's value\n"
            "if (n) (*n)++;"):
        assert _use(body).plain_updates == {"hits"}, body
    assert _use("uint32_t *a = hits, *b = &bytes_[1]; *a += 1; b[0]++; hits[2]--;").plain_via \
        == {("hits", "a", ""), ("bytes_", "b", "")}
    for body in (
            "uint32_t *p = &hits[1];\n__atomic_fetch_add(p, 1, __ATOMIC_RELAXED);",
            "struct pair { uint32_t lo, hi; };\nstruct pair *e = (struct pair *)hits;\n"
            "__atomic_fetch_add(&e->hi, pkt->len, __ATOMIC_RELAXED);",
            "uint32_t *p = &hits[1]; p++; (void)p;",                    # moves the pointer
            "uint8_t *k = &state->k; *k += 1;",                         # per-packet state
            "uint32_t mine[2] = {0}; uint32_t *m = &mine[1]; *m += 1; (void)mine;",
            "uint32_t spare = 0; uint32_t *p = &hits[0];\np = &spare;  /* not the table */\n"
            "*p += 1;",
            "uint32_t spare = 0; uint32_t *p = hits;\n"
            "if (pkt->len > 60) p = &spare; else p = &spare;\n*p += 1;",
            "uint32_t *p = &hits[0]; (void)p;\n{ uint32_t q = 0, *p = &q; *p += 1; }",
            "uint32_t v = hits[0]; v++; state->k = (uint8_t)v;"):        # a copy of a value
        assert _use(body).plain_updates == frozenset(), body


def test_a_local_in_an_inner_block_hides_an_outer_pointer_only_there() -> None:
    """A block's (or a for loop's) local named as an outer pointer ends with the block:
    after it the outer pointer points where it did. The old code forgot the outer
    pointer after the block (an update through it was missed) and, where the inner one
    pointed into a table, took the outer one for it (a false warning)."""
    for body in (
            "uint32_t *cnt = &hits[state->k % 3u];  /* this packet's counter */\n"
            "{\n    int cnt = 7;  // a scratch of the same name\n    (void)cnt;\n}\n"
            "*cnt += pkt->len;",
            "uint32_t *cnt = hits + 1;\nfor (int cnt = 0; cnt < 3; cnt++) { /* a count */ }\n"
            "cnt[0]++;",
            "uint32_t *cnt = &hits[2];\nif (pkt->len > 61) {\n    uint8_t cnt = 1;\n"
            "    (void)cnt;\n} else {\n    cnt++;  /* the pointer moves on */\n}\n(*cnt)--;",
            "uint32_t spare = 0, *cnt = &spare;\n{\n    cnt = &hits[1];  // the outer one\n"
            "    int cnt = 0;\n    (void)cnt;\n}\n*cnt |= 1u;"):
        assert _use(body).plain_updates == {"hits"}, body
        assert _use(body).plain_via == {("hits", "cnt", "")}, body
    for body in (
            "uint32_t spare = 0, *cnt = &spare;\n{\n    uint32_t *cnt = &hits[1];  /* inner */\n"
            "    (void)cnt;\n}\n*cnt += 1;",
            "uint32_t spare = 0, *cnt = &spare;\n"
            "for (uint32_t *cnt = hits; cnt < hits + 2; cnt++) (void)cnt;\n*cnt += 1;"):
        assert _use(body).plain_updates == frozenset(), body


# Statements on `hits`: (C, whether it only adds to it).
_FORMS = [("hits[{i}] += {v};", True), ("hits[{i}]++;", True), ("--hits[{i}];", True),
          ("*hits -= {v};", True), ("__sync_fetch_and_add(&hits[{i}], {v});", True),
          ("__atomic_sub_fetch(&hits[{i}], {v}, __ATOMIC_RELAXED);", True),
          ("state->k = (uint8_t)hits[{i}];", False), ("hits[{i}] = {v};", False),
          ("if (hits[{i}] == {v}) DROP();", False),
          ("state->k += (uint8_t)(hits[{i}] += 1);", False),
          ("ofl_note(&hits[{i}]);", False), ("bytes_[hits[0] & 1u] += {v};", False)]
_WRAPS = ["{s}", "if (pkt->len > {v}) {{ {s} }}", "for (int j = 0; j < 2; j++) {s}",
          "switch (state->k) {{ case 1: {s} break; default: break; }}", "{{ /* c */ {s} }}"]


def test_random_bodies_are_classified_as_their_statements_say() -> None:
    """Bodies made of statements known to add or to read, nested at random: `hits` is
    only added to exactly when every statement naming it adds."""
    rnd = random.Random(26)
    for _ in range(60):  # (each body goes through the C preprocessor)
        picks = [rnd.choice(_FORMS) for _ in range(rnd.randint(1, 5))]
        body = "\n".join(rnd.choice(_WRAPS).format(
            s=form.format(i=rnd.choice(["0", "state->k & 3u", "1"]), v=rnd.randint(1, 9)),
            v=rnd.randint(1, 99)) for form, _ in picks)
        info = _use(body)
        assert ("hits" in info.adds_only) == all(adds for _, adds in picks), body
        assert ("hits" in info.table_other) == (not all(adds for _, adds in picks)), body


# Straight-line statements on a pointer `p` (declared first, pointing at `spare`): what
# each does to p (None: leaves it) and whether it updates what p points at plainly.
_POINTS = [("p = &hits[{i}];", True, False), ("p = hits + {i};", True, False),
           ("p = (uint32_t *)&bytes_[{i}];", True, False), ("p = &spare;", False, False),
           ("p = &state->k32;", False, False), ("q = p;", None, False),
           ("p = q;", "q", False), ("*p += {v};", None, True), ("p[{i}]++;", None, True),
           ("--*p;", None, True), ("*(p + {i}) |= {v}u;", None, True),
           ("__atomic_fetch_add(p, {v}, __ATOMIC_RELAXED);", None, False),
           ("p++;", None, False), ("spare += {v};", None, False),
           # an inner block's own `p`: the outer one is as it was after it
           ("{{ uint8_t p = {v}; p++; (void)p; }}", None, False),
           ("{{ uint32_t *p = &hits[{i}]; (void)p; }}", None, False)]


def test_random_straight_line_pointer_code_warns_as_a_simulation_of_it_says() -> None:
    """Bodies of statements that point `p` (and its copy `q`) at a table or elsewhere
    and update through it, in random order, some in blocks: a plain update is listed
    exactly when, run in order, one went through a pointer into a table."""
    rnd = random.Random(9)
    for _ in range(60):
        picks = [rnd.choice(_POINTS) for _ in range(rnd.randint(1, 7))]
        into = {"p": False, "q": False}
        want = False
        lines = ["uint32_t spare = 0, *p = &spare, *q = &spare;  /* a user's pointers */"]
        for form, to, update in picks:
            if form.startswith("q = "):
                into["q"] = into["p"]
            elif to == "q":
                into["p"] = into["q"]
            elif to is not None:
                into["p"] = to
            if update and into["p"]:
                want = True
            stmt = form.format(i=rnd.randint(0, 2), v=rnd.randint(1, 9))
            lines.append(f"{{ {stmt} }}" if rnd.random() < 0.3 else stmt)
        lines.append("(void)p; (void)q; (void)spare;")
        body = "\n".join(lines)
        got = analyze_body(body, element="tally", outputs=["out"],
                           fields={"k32": "uint32_t"}, tables=["hits", "bytes_"]).plain_updates
        assert bool(got) == want, body


def test_loops_nested_deep_are_walked_in_proportion(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each loop is walked twice (a pointer set late in a turn is used early in the
    next); 16 loops nested, the innermost updating through a pointer it sets after, are
    walked a few times each, not 2^16 times, and the update is found."""
    walks = []
    statement = tableuse._Uses.statement

    def counted(self: tableuse._Uses, node: object) -> None:
        walks.append(node)
        statement(self, node)

    monkeypatch.setattr(tableuse._Uses, "statement", counted)
    body = ("uint32_t spare = 0, *p = &spare;\n"
            + "".join(f"for (int i{k} = 0; i{k} < 3; i{k}++) {{ /* level {k} */\n"
                      for k in range(16))
            + "*p += 1; p = &hits[i15 & 3];\n" + "}" * 16)
    assert _use(body).plain_updates == {"hits"}
    assert len(walks) < 16 * 16 * 4, len(walks)


_HELPERS = r"""
static void inc(uint32_t *c) { (*c)++; }                 /* plain */
static void inc_twice(uint32_t *c) { inc(c); inc(c + 1); }  // through another helper
static void walk(uint32_t *c, int n) { if (n > 0) { *c += 1; walk(c + 1, n - 1); } }
static void ping(uint32_t *c, int n);
static void pong(uint32_t *c, int n) { if (n) ping(c, n - 1); }
static void ping(uint32_t *c, int n) { if (n) pong(c, n - 1); }  /* never updates */
static uint32_t get(const uint32_t *c) { return *c; }
static void atomic_inc(uint32_t *c) { __atomic_fetch_add(c, 1, __ATOMIC_RELAXED); }
static void scratch(uint32_t *c) { uint32_t mine = 0; c = &mine; (*c)++; (void)mine; }
"""


def _helped(body: str) -> BodyInfo:
    return analyze_body(body, element="tally", outputs=["out"], fields={"k": "uint8_t"},
                        tables=["hits", "bytes_"], helpers=_HELPERS)


def test_a_pointer_given_to_a_helper_function_is_followed_into_it() -> None:
    """The helper's plain updates through its parameter are the body's (at the
    helper's line, in the helper, through the body's pointer given and the helper's
    own), through a helper it calls too; recursion ends."""
    for body, via in (
            ("uint32_t *slot = &hits[state->k & 3u];  /* mine */\ninc(slot);",
             {("slot", ""), ("c", "inc")}),
            ("inc(&hits[1]);", {("c", "inc")}),
            ("inc_twice(hits + 2);  // two words", {("c", "inc_twice"), ("c", "inc")}),
            ("uint32_t *row = hits;\nwalk(row, 3);", {("row", ""), ("c", "walk")}),
            ("uint32_t spare = 0, *p = &spare;\nif (pkt->len > 99) p = &hits[0];\ninc(p);",
             {("p", ""), ("c", "inc")})):
        info = _helped(body)
        assert info.plain_updates == {"hits"}, body
        assert info.plain_via == {("hits", p, f) for p, f in via}, body
        assert {f for _, _, f in info.plain_at} <= {"inc", "walk"}, body
    assert _helped("inc(&hits[1]);").plain_at == {("hits", "helpers line 2", "inc")}
    for body in ("uint32_t spare = 0;\ninc(&spare);", "ping(hits, 9);",
                 "if (get(&hits[1]) > 3u) DROP();", "atomic_inc(&hits[0]);",
                 "scratch(&hits[2]);", "inc((uint32_t *)&state->k);"):
        assert _helped(body).plain_updates == frozenset(), body


def test_a_pointer_given_through_a_function_pointer_is_said_unseen() -> None:
    """A call through a function pointer (a local one, a table of them) cannot be
    followed: a pointer into a table given to it is listed, with the call, as a write
    that cannot be seen; a call by name of a function with no body here (the runtime's,
    libc's) is not."""
    for body, called in (
            ("void (*op)(uint32_t *) = inc;  /* chosen at run time */\n"
             "uint32_t *slot = &hits[state->k % 3u];\nop(slot);", "`op`"),
            ("static void (*const ops[2])(uint32_t *) = { inc, atomic_inc };\n"
             "ops[pkt->len & 1u](hits + 1);", "`ops[pkt->len & 1u]`")):
        info = _helped(body)
        assert info.unseen_calls == {("hits", f"body line {body.count(chr(10)) + 1} {called}")}
        assert info.plain_updates == frozenset(), body
    for body in ("memset(&hits[0], 0, 4);", "ofl_note(hits);",
                 "void (*op)(uint32_t *) = inc;\nuint32_t mine = 0;\nop(&mine);"):
        assert _helped(body).unseen_calls == frozenset(), body


def test_a_helper_parameter_of_a_typedef_pointer_type_is_followed() -> None:
    """`slot_p s` is a `uint32_t *`: the pointer given to it is followed into the
    helper (the old code followed only parameters declared with a `*`)."""
    info = analyze_body("bump(&hits[2]);  /* the third word */", element="tally",
                        outputs=["out"], fields={}, tables=["hits"], helpers=(
                            "typedef uint32_t *slot_p;   // the user's name for it\n"
                            "static void bump(slot_p s) { (*s)++; }\n"))
    assert info.plain_updates == {"hits"}
    assert info.plain_at == {("hits", "helpers line 2", "bump")}
    assert info.plain_via == {("hits", "s", "bump")}


_RETURNING = r"""
typedef uint32_t *word_p;   /* the user's name for a pointer to one word */
/* the word of hash `h` in a table of 1021 (a prime: odd on purpose) */
static word_p slot(uint32_t *tab, uint32_t h) { return &tab[h % 1021u]; }
static uint32_t *next_slot(uint32_t *tab, uint32_t h) { return slot(tab, h + 1); }  // via slot
static uint32_t *either(uint32_t *tab, uint32_t *spare, int which)
{
    if (which)
        return spare;      /* not the table */
    return tab + 3;
}
static uint32_t *mine_only(uint32_t *tab) { static uint32_t own; (void)tab; return &own; }
static void *value_of(void *m, uint8_t k) { return ofl_map_lookup(m, &k); }  /* a map's */
typedef struct { void *map; } by_value_t;   /* xdp's map, given as a struct */
static uint32_t *count_of(by_value_t m, uint8_t k) { return ofl_map_lookup(m, &k); }
"""


def _returned(body: str) -> BodyInfo:
    return analyze_body(body, element="tally", outputs=["out"], fields={"k": "uint8_t"},
                        tables=["hits", "bytes_"], helpers=_RETURNING)


def test_a_pointer_a_helper_returns_into_the_table_is_followed() -> None:
    """`*slot(t, h) += 1` and `p = slot(t, h); (*p)++`: the helper returns a pointer
    into the table it is given (through another helper too, a map lookup's value too);
    the update is the body's, through the call or the local. The old code followed no
    returned pointer: nothing was listed."""
    for body, via in (
            ("*slot(hits, pkt->len) += 1;  /* this packet's word */", "slot(hits, pkt->len)"),
            ("uint32_t *w = slot(hits, state->k);\n(*w)++;", "w"),
            ("word_p w;\nw = next_slot(hits, pkt->len);  // the one after\nw[0] |= 4u;", "w"),
            ("uint32_t spare = 0;\nuint32_t *w = either(hits, &spare, pkt->len & 1);\n*w -= 1;",
             "w"),
            ("uint32_t *n = value_of(hits, state->k);  /* a map's value */\nif (n) (*n)++;", "n"),
            ("uint32_t *n = count_of(hits, 9);\nif (n != 0)\n    n[0] += pkt->len;", "n")):
        info = _returned(body)
        assert info.plain_updates == {"hits"}, body
        assert info.plain_via == {("hits", via, "")}, body
        assert info.plain_at == {("hits", f"body line {body.count(chr(10)) + 1}", "")}, body
    for body in (
            "__atomic_fetch_add(slot(hits, pkt->len), 1, __ATOMIC_RELAXED);",
            "uint32_t *w = slot(hits, 7);\n__atomic_add_fetch(w, 2, __ATOMIC_RELAXED);",
            "uint32_t spare = 0, *w = slot(hits, 1);\nw = &spare;  /* another value */\n*w += 1;",
            "uint32_t *w = mine_only(hits);\n(*w)++;",                  # its own static
            "uint32_t mine[5] = {0};\n*slot(mine, pkt->len) += 1;\n(void)mine;",  # a local array
            "uint32_t spare = 0;\nuint32_t *w = slot(&spare, 0);\nif (slot(hits, 2)) (*w)++;"):
        assert _returned(body).plain_updates == frozenset(), body


_STRUCTS = r"""
/* where this packet's counters are */
struct cur { uint32_t *p; struct pair { uint32_t pkts, bytes; } *e; };
typedef struct { int n; uint32_t *at; } spot_t;   // positional: `at` is the second
static void bump_at(struct cur *c) { c->p[1]++; }        /* by the struct's address */
static void bump_copy(spot_t s) { *s.at += 2; }          /* by value */
static void keep(struct cur *c, uint32_t *t) { c->p = t; }   // stores into the caller's
static void again(struct cur *c, int n) { if (n) again((struct cur *)&c, n - 1); }
"""


def _structs(body: str) -> BodyInfo:
    return analyze_body(body, element="tally", outputs=["out"], fields={"k": "uint8_t"},
                        tables=["hits", "bytes_"], helpers=_STRUCTS)


def test_a_pointer_kept_in_a_local_structs_member_is_followed() -> None:
    """`struct cur c = { .p = &t[i] }; c.p[0]++;`, `c.e->pkts++`, a member assigned
    later, a struct of a typedef given positionally, a copy of the struct, the struct
    given to a helper by address or by value. The old code followed only pointer
    locals: nothing was listed."""
    for body, via in (
            ("struct cur c = { .p = &hits[state->k % 13u] };  /* thirteen words */\n"
             "c.p[0]++;", {("c.p", "")}),
            ("struct cur c;\nc.e = (struct pair *)&hits[2 * (pkt->len & 3u)];\n"
             "c.e->pkts++;  // one more packet\nc.e->bytes += pkt->len;", {("c.e", "")}),
            ("spot_t s = { 1, hits + 5 };\n*s.at -= 1;", {("s.at", "")}),
            ("struct cur c = { .p = &hits[1] }, d;\nd = c;  /* a copy */\nd.p[0] ^= 1u;",
             {("d.p", "")}),
            ("struct { struct cur in; int n; } w = { { &hits[3], 0 }, 1 };\n(*w.in.p)++;",
             {("w.in.p", "")}),
            ("struct cur c = { .p = hits };\nbump_at(&c);", {("c->p", "bump_at")}),
            ("struct elsewhere w = { .slot = &hits[9] };  // defined in no code seen here\n"
             "w.slot[0] += 1;", {("w.slot", "")}),
            ("spot_t s = { .at = &hits[7] };\nbump_copy(s);", {("s.at", "bump_copy")})):
        info = _structs(body)
        assert info.plain_updates == {"hits"}, body
        assert info.plain_via == {("hits", p, f) for p, f in via}, body
    for body in (
            "uint32_t spare = 0;\nstruct cur c = { .p = &hits[1] };\n"
            "c.p = &spare;  /* another value */\nc.p[0]++;",
            "struct cur c = { .p = &hits[1] };\n__atomic_fetch_add(c.p, 1, __ATOMIC_RELAXED);",
            "struct cur c = { .e = (struct pair *)hits };\n"
            "__atomic_fetch_add(&c.e->bytes, pkt->len, __ATOMIC_RELAXED);",
            "uint32_t mine[3] = {0};\nstruct cur c = { .p = &mine[2] };\nc.p[0]++;\n(void)mine;",
            "struct cur c = { .p = &hits[1] }, d = { 0 };\nd.p[0]++;\n(void)c;"):
        assert _structs(body).plain_updates == frozenset(), body


def test_a_pointer_kept_in_a_local_array_of_pointers_is_followed() -> None:
    """`uint64_t *ps[2] = { &t[a], &t[b] }; (*ps[k])++;` or `ps[0][1] += 2`, an element
    given by a variable index (any of them), the array given to a helper. The old code
    followed only pointer locals: nothing was listed."""
    helpers = "static void all(uint32_t **ws, int n) { while (n--) ws[n][0]++; }  /* each */\n"
    for body, via in (
            ("uint32_t *ps[2] = { &hits[pkt->len & 1u], &hits[5] };  /* two words */\n"
             "(*ps[state->k & 1u])++;", {("ps[state->k & 1u]", "")}),
            ("uint32_t *ps[3] = { [2] = hits + 4 };\nps[2][1] += 2;", {("ps[2]", "")}),
            ("uint32_t spare = 0, *ps[2] = { &spare, &spare };\n"
             "ps[pkt->len & 1u] = &hits[6];  // either\n*ps[0] += 1;", {("ps[0]", "")}),
            ("uint32_t *ps[2] = { &hits[0], &hits[1] };\nall(ps, 2);", {("ws[n]", "all")})):
        info = analyze_body(body, element="tally", outputs=["out"], fields={"k": "uint8_t"},
                            tables=["hits"], helpers=helpers)
        assert info.plain_updates == {"hits"}, body
        assert info.plain_via == {("hits", p, f) for p, f in via}, body
    for body in (
            "uint32_t mine[2] = {0}, *ps[2] = { &mine[0], &mine[1] };\n(*ps[1])++;",
            "uint32_t spare = 0, *ps[2] = { &hits[0], &spare };\n(*ps[1])++;",
            "uint32_t spare = 0, *ps[2];\nps[pkt->len & 1u] = &hits[0];\n"
            "ps[0] = &spare;\nps[1] = &spare;  /* both given another value */\n(*ps[0])++;",
            "uint32_t *ps[2] = { &hits[0], &hits[1] };\n"
            "__atomic_fetch_add(ps[pkt->len & 1u], 1, __ATOMIC_RELAXED);"):
        assert analyze_body(body, element="tally", outputs=["out"], fields={"k": "uint8_t"},
                            tables=["hits"], helpers=helpers).plain_updates == frozenset(), body


def test_a_pointer_kept_where_the_walk_cannot_follow_it_is_listed() -> None:
    """A pointer into the table stored in a global, a state field, memory reached
    through a pointer, a pointer to a local struct or array that holds one, or by a
    helper into its caller's struct: listed as a store not followed, with where and
    what it is stored in; one holding such a struct given to a function pointer is a
    call not seen into. The old code listed none of these."""
    helpers = _STRUCTS + "uint32_t *last_seen;   /* a global */\n"
    for body, stored in (
            ("last_seen = &hits[state->k];", "body line 1 `last_seen`"),
            ("state->at = (uint64_t)(uintptr_t)&hits[3];  /* for the next element */",
             "body line 1 `state->at`"),
            ("struct cur *h = malloc(sizeof *h);\nh->p = hits + 2;  // on the heap\nfree(h);",
             "body line 2 `h->p`"),
            ("struct cur c = { .p = &hits[1] };\nstruct cur *cp = &c;  /* its address */\n"
             "cp->p[0]++;", "body line 2 `cp`"),
            ("uint32_t *ps[2] = { hits, hits + 1 }, **pp = ps;\n(**pp)++;", "body line 1 `pp`"),
            ("static uint32_t *last;  /* the previous packet's */\nif (last) (*last)++;\n"
             "last = &hits[pkt->len % 3u];", "body line 3 `last`"),
            ("struct cur c;\nkeep(&c, &hits[4]);\nc.p[0]++;", "helpers line 7 in `keep` `c->p`")):
        info = analyze_body(body, element="tally", outputs=["out"],
                            fields={"k": "uint8_t", "at": "uint64_t"}, tables=["hits"],
                            helpers=helpers)
        assert info.unseen_stores == {("hits", stored)}, body
    info = analyze_body("void (*op)(struct cur *) = bump_at;  /* chosen at run time */\n"
                        "struct cur c = { .p = &hits[2] };\nop(&c);", element="tally",
                        outputs=["out"], fields={}, tables=["hits"], helpers=helpers)
    assert info.unseen_calls == {("hits", "body line 3 `op`")}
    assert info.unseen_stores == frozenset() and info.plain_updates == frozenset()
    for body in ("uint32_t spare = 0;\nlast_seen = &spare;",
                 "struct cur c = { .p = &hits[0] };\nagain(&c, 3);",  # (its own `&c`: ends)
                 "struct cur c = { .p = &hits[1] };\nmemset(&c, 0, sizeof c);",
                 "struct cur c = { .p = &hits[1] }, d = c;\n(void)d;"):
        info = analyze_body(body, element="tally", outputs=["out"], fields={},
                            tables=["hits"], helpers=helpers)
        assert info.unseen_stores == frozenset(), body


def test_an_address_kept_in_a_struct_array_or_returned_keeps_one_shared_copy() -> None:
    """An array is added to only (per-CPU on xdp) when every use adds: one whose
    element's address is kept in a struct's member, an array of pointers, or given to
    a helper that returns it is used otherwise, even where every update through it is
    an atomic add. (This already held before these pointers were followed.)"""
    helpers = _RETURNING + "struct cur { uint32_t *p; };\n"
    for body in ("hits[0] += 1;\nstruct cur c = { .p = &hits[1] };\n"
                 "__atomic_fetch_add(c.p, 1, __ATOMIC_RELAXED);",
                 "hits[0]++;\nuint32_t *ps[2] = { &hits[1], &hits[2] };\n"
                 "__atomic_fetch_add(ps[pkt->len & 1u], 1, __ATOMIC_RELAXED);",
                 "hits[0]--;\n__atomic_fetch_add(slot(hits, pkt->len), 1, __ATOMIC_RELAXED);",
                 "hits[0] += 2;\nstruct cur c;\nc.p = hits + 3;\n(void)c;"):
        info = analyze_body(body, element="tally", outputs=["out"], fields={},
                            tables=["hits", "bytes_"], helpers=helpers)
        assert info.table_other == {"hits"} and info.adds_only == frozenset(), body


# Straight-line statements on a struct `c` (and its copy `d`) with a pointer member `p`,
# and an array `ps` of two pointers: (C, what it does: a member or element it points
# at the table (True) or elsewhere (False), a copy, or the one it updates through).
_KEPT = [("c.p = &hits[{i}];", ("c.p", True)), ("c.p = hits + {i};", ("c.p", True)),
         ("c.p = &spare;", ("c.p", False)), ("d = c;", ("d", "c")),
         ("ps[{k}] = &hits[{i}];", ("ps[{k}]", True)), ("ps[{k}] = &spare;", ("ps[{k}]", False)),
         ("ps[pkt->len & 1u] = &hits[{i}];  /* either */", ("ps[?]", True)),
         ("ps[{k}] = c.p;", ("ps[{k}]", "c.p")),
         ("c.p[0] += {v};", ("update", "c.p")), ("d.p[0]--;", ("update", "d.p")),
         ("(*ps[{k}])++;", ("update", "ps[{k}]")), ("ps[{k}][0] |= {v}u;", ("update", "ps[{k}]")),
         ("__atomic_fetch_add(c.p, {v}, __ATOMIC_RELAXED);", None),
         ("__atomic_fetch_add(ps[{k}], 1, __ATOMIC_RELAXED);", None),
         ("{{ struct cur c = {{ .p = &hits[{i}] }}; (void)c; }}  // an inner `c`", None)]


def test_random_straight_line_struct_and_array_code_warns_as_a_simulation_says() -> None:
    """Bodies of statements that point a struct's member and an array's elements at
    the table or elsewhere, copy the struct and update through them, in random order:
    a plain update is listed exactly when, run in order, one went through a pointer
    that may point into the table (an element stored at a variable index: either)."""
    rnd = random.Random(17)
    for _ in range(60):
        into = {"c.p": False, "d.p": False, "ps[0]": False, "ps[1]": False}
        want = False
        lines = ["struct cur { uint32_t *p; };  /* a user's cursor */",
                 "uint32_t spare = 0;",
                 "struct cur c = { .p = &spare }, d = c;",
                 "uint32_t *ps[2] = { &spare, &spare };"]
        for form, does in (rnd.choice(_KEPT) for _ in range(rnd.randint(1, 8))):
            k = rnd.randint(0, 1)
            stmt = form.format(i=rnd.randint(0, 2), k=k, v=rnd.randint(1, 9))
            if does is not None:
                what, to = does[0].format(k=k), (does[1].format(k=k)
                                                 if isinstance(does[1], str) else does[1])
                if what == "update":
                    want = want or into[to]
                elif what == "d":
                    into["d.p"] = into["c.p"]
                elif what == "ps[?]":
                    into["ps[0]"] = into["ps[1]"] = True
                else:
                    into[what] = into[to] if isinstance(to, str) else to
            lines.append(stmt)
        lines.append("(void)c; (void)d; (void)ps; (void)spare;")
        body = "\n".join(lines)
        got = analyze_body(body, element="tally", outputs=["out"], fields={},
                           tables=["hits"]).plain_updates
        assert bool(got) == want, body
