"""A table's declared type is what every target allocates and what bodies use: a shared
array of arrays (which the runtime allocated as that many scalars, overrun by a body
indexing its rows) is one error naming the table and what to write instead, before any
process starts; the flat array it suggests counts as Python does. A body that takes a
map's value as another type (a lookup's pointer, an update's source) is one error
naming the element, the map and both types; its own type in any spelling is fine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from offlow import Element, OfflowError, Port, Program, Shared, SharedMap, Sink, Source
from offlow.build import build, plan_program
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.report import summarize
from offlow.runner import RunOptions, run
from tests.e2e import ROOT, TLS, read_frames
from tests.programs.bucket_rows import BUCKETS, WORDS, flat_program
from tests.test_errors_before_start import offlow_run

ROWS = ROOT / "tests" / "programs" / "bucket_rows.py"


@pytest.mark.parametrize("device", ["host", "nic"])
def test_an_array_of_arrays_is_one_error_before_any_process_starts(
        device: str, tmp_path: Path) -> None:
    """On the old code the run started and its process died of SIGSEGV (the body's rows
    written past the 13 words allocated)."""
    rc, out, err = offlow_run(["run", str(ROWS), "--set", f"edge.device={device}"], tmp_path)
    assert (rc, out) == (2, ""), (out, err)
    assert err == (
        f"offlow: error: {ROWS}:33: shared table `bucket_rows`: element type `uint32_t[3]` "
        "is an array, and a shared table's elements are scalars (bodies get a `uint32_t *`): "
        'declare its 13 rows of 3 as Shared("bucket_rows", "uint32_t", 39) and index row '
        "i's element j as `[3 * i + j]`\n")


def test_the_flat_rows_it_suggests_count_as_python_does(tmp_path: Path) -> None:
    b = build(flat_program())
    res = run(b, RunOptions(input=TLS, output=tmp_path / "out.pcap", timeout=60))
    assert res.ok, res.errors
    want = [0] * (BUCKETS * WORDS)
    frames = read_frames(tmp_path / "out.pcap")
    assert frames == [f for f in read_frames(TLS) if len(f) <= summarize(b.plan, res.stats)["mtu"]]
    for f in frames:
        row = len(f) % BUCKETS * WORDS
        want[row] += 1
        want[row + 1] += len(f)
        want[row + 2] = len(f)
    assert summarize(b.plan, res.stats)["tables"]["bucket_rows"] == want


@pytest.mark.parametrize(("args", "error"), [
    (("t", "uint8_t[16]", 4), r"^shared table `t`: element type `uint8_t\[16\]` is an array, "
                              r".* declare its 4 rows of 16 as Shared\(\"t\", \"uint8_t\", 64\)"),
    (("t", "struct row", 4), r"^shared table `t`: element type 'struct row' is not one of "
                             r"uint8_t, int8_t, bool, char, "),
    (("t", "uint32_t[0]", 4), r"^shared table `t`: element type 'uint32_t\[0\]' is not one of "),
    (("t", "uint32_t", 0), r"^shared table `t`: length=0; a shared table holds 1 or more "),
    (("t", "uint32_t", -3), r"^shared table `t`: length=-3; "),
    (("t", "uint32_t", "8"), r"^shared table `t`: length='8'; "),
    (("t", "uint32_t", True), r"^shared table `t`: length=True; "),
], ids=["array", "struct", "empty-array", "zero", "negative", "string", "bool"])
def test_a_bad_shared_declaration_is_one_error(args: tuple[Any, ...], error: str) -> None:
    with pytest.raises(OfflowError, match=error):
        Shared(*args)


PROTO = ROOT / "tests" / "programs" / "proto_bytes.py"


@pytest.mark.parametrize("device", ["nic", "host"])
def test_a_wider_pointer_to_a_map_value_is_one_error_before_any_process_starts(
        device: str, tmp_path: Path) -> None:
    """On the old code the run went on, each add writing 8 bytes into a 4-byte value."""
    rc, out, err = offlow_run(["run", str(PROTO), "--set", f"edge.device={device}"], tmp_path)
    assert (rc, out) == (2, ""), (out, err)
    assert err == (
        f"offlow: error: {PROTO}:19: element `bytes`: map `proto_ttl` holds `uint32_t` values "
        "(4 bytes), but the body takes ofl_map_lookup(per_proto, ...) as `uint64_t *` (8 "
        "bytes: writing through it reaches past the value); take it as `uint32_t *` (or "
        '`const uint32_t *`, `void *`), or declare the map with value="uint64_t"\n')


HELPERS = r"""
typedef uint32_t hits_t;      /* the user's names for the value type, and a wider one */
typedef uint64_t wide_t;
struct ent { uint16_t lo, hi; };
/* helpers that bump a count through the pointer they are given */
static void bump_wide(wide_t *count) { *count += 1; }
static void bump_ours(hits_t *count) { *count += 1; }
static unsigned peek(const void *v, int n);   // declared only
"""


def _map_user(body: str) -> Program:
    """A program whose element `tally` runs `body` with `hits`, a map of uint32_t values
    keyed by one byte (its key `k` set), and `lens`, a shared array of uint64_t; its
    per-packet state has a `uint16_t` `short_len` and a `uint32_t` `words`."""
    cls = type("Tally", (Element,), {"tables": ("hits", "lens"), "helpers": HELPERS,
                                     "fields": {"short_len": "uint16_t", "words": "uint32_t"},
                                     "body": "struct hits_by_len_key k = { .len = 1 };\n"
                                             + body})
    p = Program("map_user")
    src, t, out = Source("rx"), cls("tally", hits=SharedMap(
        "hits_by_len", (("len", "uint8_t"),), "uint32_t", 64), lens=Shared(
            "lens", "uint64_t", 4)), Sink("tx")
    src >> t >> out
    p.segment("edge", [src, t, out], device="nic", cores=[0])
    return p


@pytest.mark.parametrize(("body", "taken"), [
    ("uint64_t *n = ofl_map_lookup(hits, &k);  // a wider count", "`uint64_t *` (8 bytes: "),
    ("unsigned long *n = ofl_map_lookup(hits, &k);", "`unsigned long *` (8 bytes: "),
    ("wide_t *n = ofl_map_lookup(hits, &k);", "`wide_t *` (8 bytes: "),
    ("int32_t *n = ofl_map_lookup(hits, &k);", "`int32_t *`; "),
    ("uint16_t *n = ofl_map_lookup(hits, &k);", "`uint16_t *`; "),
    ("struct ent *e = ofl_map_lookup(hits, &k);", "`struct ent *`; "),
    ("float *f = ofl_map_lookup(hits, &k);", "`float *`; "),
    ("uint32_t **pp = ofl_map_lookup(hits, &k);", "`uint32_t **`; "),
    ("uint64_t *n;\nif (pkt->len > 60)\n    n = ofl_map_lookup(hits, &k);",
     "`uint64_t *` (8 bytes: "),
    ("uint64_t *n = (void *)ofl_map_lookup(hits, &k);", "`uint64_t *` (8 bytes: "),
    ("uint64_t *n = pkt->len ? ofl_map_lookup(hits, &k) : NULL;", "`uint64_t *` (8 bytes: "),
    ("if (ofl_map_lookup(hits, &k))\n    *(uint64_t *)ofl_map_lookup(hits, &k) += 1;",
     "`uint64_t *` (8 bytes: "),
    # a pointer that holds the value, copied into another type (the old code let these
    # be: followed were the lookup's own result and casts of it)
    ("uint32_t *count = ofl_map_lookup(hits, &k);  /* ours */\nuint64_t *wide = NULL;\n"
     "if (count)\n    wide = (uint64_t *)count;  // a wider view",
     "(held in `count`) as `uint64_t *` (8 bytes: "),
    ("void *raw = ofl_map_lookup(hits, &k);\nstruct ent *e;\n/* later */\ne = raw;",
     "(held in `raw`) as `struct ent *`; "),
    ("uint32_t *c = ofl_map_lookup(hits, &k), *d = c;\nuint16_t *half = (uint16_t *)d;",
     "(held in `d`) as `uint16_t *`; "),
    ("uint32_t *n = ofl_map_lookup(hits, &k);\n{\n    uint8_t n = 3;  /* an inner n */\n"
     "    (void)n;\n}\nwide_t *w = (wide_t *)n;", "(held in `n`) as `wide_t *` (8 bytes: "),
    ("uint32_t *n = ofl_map_lookup(hits, &k);\nuint64_t *w = (uint64_t *)&n[0];",
     "(held in `n`) as `uint64_t *` (8 bytes: "),
    ("uint32_t *n = ofl_map_lookup(hits, &k);\nstruct ent *e = (struct ent *)(n + 0);",
     "(held in `n`) as `struct ent *`; "),
    # given to a helper function whose parameter is another type (the old code let be)
    ("bump_wide(ofl_map_lookup(hits, &k));  /* one more */",
     "(given to `bump_wide`'s `count`) as `wide_t *` (8 bytes: "),
    ("void *raw = ofl_map_lookup(hits, &k);\nif (raw)\n    bump_wide(raw);",
     "(held in `raw`, given to `bump_wide`'s `count`) as `wide_t *` (8 bytes: "),
    # a block's own typedef of a helpers' name ends with the block (the old code kept
    # reading `wide_t` as the block's 4-byte type after it)
    ("if (pkt->len > 1500) {\n    typedef uint32_t wide_t;  /* narrow, in here only */\n"
     "    wide_t jumbo = pkt->len;\n    (void)jumbo;\n}\nwide_t *n = ofl_map_lookup(hits, &k);",
     "`wide_t *` (8 bytes: "),
], ids=["wider", "wider-spelling", "wider-typedef", "signed", "narrower", "struct", "float",
        "pointer", "assigned", "through-void", "either-arm", "cast", "copied-cast",
        "copied-void", "copy-of-copy", "after-inner-block", "element-address",
        "pointer-sum", "helper", "held-helper", "typedef-after-its-block"])
def test_a_map_value_taken_as_another_type_is_one_error(body: str, taken: str) -> None:
    with pytest.raises(OfflowError) as err:
        plan_program(_map_user(body))
    msg = str(err.value)
    line = body.count("\n") + 2  # the body's last line (after the key's)
    want = taken if taken.startswith("(") else f"as {taken}"
    assert msg.startswith(f"element `tally`, body line {line}: map `hits_by_len` holds "
                          "`uint32_t` values (4 bytes), but the body takes "
                          f"ofl_map_lookup(hits, ...) {want}"), msg
    assert "take it as `uint32_t *` (or `const uint32_t *`, `void *`)" in msg


@pytest.mark.parametrize("body", [
    "uint32_t *n = ofl_map_lookup(hits, &k);\nif (n) *n += 1;",
    "const uint32_t *n = ofl_map_lookup(hits, &k);  /* read only */",
    "void *v = ofl_map_lookup(hits, &k);",
    "unsigned int *n = ofl_map_lookup(hits, &k);",
    "hits_t *n = ofl_map_lookup(hits, &k);",
    "const uint8_t *bytes = ofl_map_lookup(hits, &k);  // a byte view",
    "uint32_t *n = (void *)ofl_map_lookup(hits, &k);",
    "__typeof__(k.len) unknown = 0;\n__typeof__(unknown) *n = ofl_map_lookup(hits, &k);",
    "uint64_t *l = &lens[1];  /* a shared array's element, not a map's value */\n*l += 1;",
    "uint32_t *n;\nuint64_t *l;\nn = ofl_map_lookup(hits, &k);\nl = (uint64_t *)lens;",
    "uint32_t *n = ofl_map_lookup(hits, &k);\nconst unsigned int *m = (const unsigned int *)n;",
    "uint32_t spare = 0, *n = ofl_map_lookup(hits, &k);\nn = &spare;  /* no longer the value */\n"
    "uint64_t *w = (uint64_t *)n;",
    "uint32_t *n = ofl_map_lookup(hits, &k);\n{\n    uint64_t *n = (uint64_t *)lens;  // inner\n"
    "    *n += 1;\n}",
    "uint32_t *n = ofl_map_lookup(hits, &k);\nif (n)\n    bump_ours(n);",
    "(void)peek(ofl_map_lookup(hits, &k), 4);",
    "typedef uint32_t cnt_t;  /* the body's own name for it */\n"
    "cnt_t *n = ofl_map_lookup(hits, &k);\nif (n)\n    *n += 1;",
    # (the old code read `hits_t` after the block as the block's 8-byte type: refused)
    "for (int r = 0; r < 3; r++) {\n    typedef uint64_t hits_t;  // a wide sum per round\n"
    "    hits_t sum = (hits_t)r * pkt->len;\n    (void)sum;\n}\n"
    "hits_t *n = ofl_map_lookup(hits, &k);\nif (n)\n    *n += 1;",
], ids=["declared", "const", "void", "spelling", "typedef", "bytes", "through-void",
        "typeof", "array", "other-pointer", "copied-spelling", "given-another", "inner-pointer",
        "helper", "declared-helper", "body-typedef", "typedef-after-its-block"])
def test_a_map_value_taken_as_its_type_is_fine(body: str) -> None:
    plan_program(_map_user(body))


def test_a_key_struct_named_after_the_bodys_local_is_one_error() -> None:
    # `struct NAME_key` is named after the map (`hits_by_len`), not the body's local
    # for it (`hits`): that gave a C compiler's "storage size of 'k2' isn't known"
    with pytest.raises(OfflowError) as err:
        plan_program(_map_user("struct hits_key k2;  /* our second key */\n"
                               "k2.len = 2;\n(void)ofl_map_lookup(hits, &k2);"))
    assert str(err.value) == (
        "element `tally`, body line 2: `struct hits_key`: the key of map `hits_by_len` "
        "(this body's `hits`) is `struct hits_by_len_key`, named after the map")


@pytest.mark.parametrize(("body", "passed"), [
    ("uint32_t key = pkt->len;  /* the length as a word */\n(void)ofl_map_lookup(hits, &key);",
     "ofl_map_lookup(hits, &key, ...) passes a `uint32_t`"),
    ("uint64_t wide = 1;\nuint32_t one = 1;\n(void)ofl_map_update(hits, &wide, &one);",
     "ofl_map_update(hits, &wide, ...) passes a `uint64_t`"),
    ("struct ent e = { 1, 2 };\n(void)ofl_map_delete(hits, &e);",
     "ofl_map_delete(hits, &e, ...) passes a `struct ent`"),
    ("uint16_t *kp = (uint16_t *)pkt->data;\n(void)ofl_map_lookup(hits, kp);",
     "ofl_map_lookup(hits, kp, ...) passes a `uint16_t *`"),
], ids=["word", "update", "delete", "pointer"])
def test_a_key_of_another_type_is_one_error(body: str, passed: str) -> None:
    # the map reads its key's size (struct hits_by_len_key) from the address given: a
    # local of another type is read as the key's bytes (past its end where smaller)
    with pytest.raises(OfflowError) as err:
        plan_program(_map_user(body))
    msg = str(err.value)
    assert f": {passed} as the key of map `hits_by_len`, which reads a `struct " \
        "hits_by_len_key` there; declare the key as `struct hits_by_len_key k;`" in msg, msg


@pytest.mark.parametrize("body", [
    "(void)ofl_map_lookup(hits, &k);",
    "struct hits_by_len_key *kp = &k;\n(void)ofl_map_delete(hits, kp);",
    "const void *raw = &k;\n(void)ofl_map_lookup(hits, raw);",
    "const uint8_t *bytes = (const uint8_t *)&k;\n(void)ofl_map_lookup(hits, bytes);",
    "__typeof__(k) k2 = k;\n(void)ofl_map_lookup(hits, &k2);",
], ids=["struct", "struct-pointer", "void", "bytes", "typeof"])
def test_a_key_of_its_struct_is_fine(body: str) -> None:
    plan_program(_map_user(body))


@pytest.mark.parametrize(("body", "passed"), [
    ("uint64_t first = pkt->len;  /* a wider count */\n"
     "(void)ofl_map_update(hits, &k, &first);", "&first) a `uint64_t` (8 bytes)"),
    ("uint16_t first = 1;\nofl_map_update(hits, &k, &first);", "&first) a `uint16_t` (2 bytes)"),
    ("struct ent e = { 1, 0 };\nofl_map_update(hits, &k, &e);", "&e) a `struct ent`; "),
    ("uint32_t v = 1;\nwide_t *w = (void *)&v;\nofl_map_update(hits, &k, w);",
     "w) a `wide_t *` (8 bytes)"),
    ("uint32_t one = 1;\n{\n    uint64_t one = 2;  // the inner one is passed\n"
     "    ofl_map_update(hits, &k, &one);\n}", "&one) a `uint64_t` (8 bytes)"),
    # a state field or a struct's member (the old code let these be)
    ("ofl_map_update(hits, &k, &state->short_len);  /* the field, as it is */",
     "&state->short_len) a `uint16_t` (2 bytes)"),
    ("struct ent pair = { 1, 2 };\nofl_map_update(hits, &k, &pair.hi);",
     "&pair.hi) a `uint16_t` (2 bytes)"),
    ("struct ent *e = (struct ent *)pkt->data;\nif (pkt->len >= 4)\n"
     "    ofl_map_update(hits, &k, &e->lo);", "&e->lo) a `uint16_t` (2 bytes)"),
    ("typedef struct { uint64_t total; uint32_t n; } tot_t;\ntot_t t = { 0, 0 };\n"
     "ofl_map_update(hits, &k, &t.total);", "&t.total) a `uint64_t` (8 bytes)"),
], ids=["wider", "narrower", "struct", "wider-pointer", "inner-local", "state-field",
        "member", "member-through-pointer", "typedef-member"])
def test_a_map_update_from_another_type_is_one_error(body: str, passed: str) -> None:
    """ofl_map_update copies the value's 4 bytes from what it is given."""
    with pytest.raises(OfflowError) as err:
        plan_program(_map_user(body))
    msg = str(err.value)
    line = next(i for i, x in enumerate(body.splitlines(), 2) if "ofl_map_update" in x)
    assert msg.startswith(f"element `tally`, body line {line}: map "
                          "`hits_by_len` holds `uint32_t` values (4 bytes), but the body passes "
                          f"ofl_map_update(hits, ..., {passed}"), msg
    assert msg.endswith("; pass the address of a `uint32_t`"), msg


@pytest.mark.parametrize("body", [
    "uint32_t first = 1;\nofl_map_update(hits, &k, &first);",
    "hits_t first = 1;\nofl_map_update(hits, &k, &first);",
    "uint32_t *n = ofl_map_lookup(hits, &k);\nif (n) ofl_map_update(hits, &k, n);",
    "const uint8_t *raw = pkt->data;  // four bytes of the packet\n"
    "if (pkt->len >= 4) ofl_map_update(hits, &k, raw);",
    "uint64_t first = 1;\n{\n    uint32_t first = 2;\n    ofl_map_update(hits, &k, &first);\n}",
    "uint32_t first = 1;\n{\n    uint64_t first = 2;\n    (void)first;\n}\n"
    "ofl_map_update(hits, &k, &first);",
    "ofl_map_update(hits, &k, &state->words);",
    "struct tot { uint64_t total; uint32_t n; } t = { 0, 1 };\nofl_map_update(hits, &k, &t.n);",
    "struct ent2 { uint16_t lo; hits_t n; };\nstruct ent2 *e = (struct ent2 *)pkt->data;\n"
    "ofl_map_update(hits, &k, &e->n);",
], ids=["declared", "typedef", "its-lookup", "bytes", "inner-local", "outer-local",
        "state-field", "member", "member-through-pointer"])
def test_a_map_update_from_its_type_is_fine(body: str) -> None:
    plan_program(_map_user(body))


def _batch_map_user(loop: str) -> Program:
    """`_map_user`'s element as a batch body: `loop` runs in its loop over the batch,
    with packet i's key `k` set."""
    cls = type("BatchTally", (Element,), {
        "tables": ("hits",), "fields": {"short_len": "uint16_t", "words": "uint32_t"},
        "body": "EMIT(out);",
        "batch_body": "for (uint32_t i = 0; i < n; i++) {   /* each packet of the batch */\n"
                      "    struct hits_by_len_key k = { .len = (uint8_t)pkts[i].len };\n"
                      + loop + "\n    EMIT_AT(i, out);\n}"})
    p = Program("map_user", batch=5)
    src, t, out = Source("rx"), cls("tally", hits=SharedMap(
        "hits_by_len", (("len", "uint8_t"),), "uint32_t", 64)), Sink("tx")
    src >> t >> out
    p.segment("edge", [src, t, out], device="nic", cores=[0])
    return p


def test_a_map_update_from_a_batch_bodys_state_field_of_another_type_is_one_error() -> None:
    """`&states[i].f` in a batch body is checked as `&state->f` is in a body (the old
    code let it be: ofl_map_update copied 4 bytes from the 2-byte field)."""
    with pytest.raises(OfflowError) as err:
        plan_program(_batch_map_user(
            "    states[i].short_len = (uint16_t)pkts[i].len;  // its length, short\n"
            "    ofl_map_update(hits, &k, &states[i].short_len);"))
    assert str(err.value) == (
        "element `tally`, batch body line 4: map `hits_by_len` holds `uint32_t` values (4 "
        "bytes), but the body passes ofl_map_update(hits, ..., &states[i].short_len) a "
        "`uint16_t` (2 bytes); pass the address of a `uint32_t`")
    plan_program(_batch_map_user("    ofl_map_update(hits, &k, &states[i].words);"))


def _talker_user(body: str) -> Program:
    """A user's element `Talk_2` that keys `talk` (uint64_t bytes per IPv4 source and
    protocol) by the key its `body` makes, then counts the packet's bytes."""
    cls = type("Talk", (Element,), {
        "inputs": (Port("i", "ip.v4"),), "outputs": (Port("o", "ip.v4"),),
        "tables": ("talk",),
        "body": body + "\nuint64_t *n = ofl_map_lookup(talk, &k);\nif (n) *n += pkt->len;"})
    p = Program("talkers")
    rx, eth, v4, other = Source("rx"), ParseEth("eth"), CheckIPv4("v4"), Discard("other")
    t, tx = cls("Talk_2", talk=SharedMap("talk", (("src", "ipv4"), ("proto", "uint8_t")),
                                         "uint64_t", 97)), Sink("tx")
    rx >> eth
    eth["ipv4"] >> v4 >> t >> tx
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("edge", [rx, eth, v4, other, t, tx], device="nic", cores=[0])
    return p


@pytest.mark.parametrize(("body", "given", "line"), [
    ("struct talk_key k = { .src = state->src4, .proto = state->ip_proto };  // by source",
     "state->src4", 1),
    ("struct talk_key k = {\n    state->src4,      /* positional */\n    state->ip_proto,\n};",
     "state->src4", 2),
    ("struct talk_key k = { .proto = 6 };\nk = (struct talk_key){ .proto = 6,\n"
     "                        .src = state->dst4 };", "state->dst4", 3),
], ids=["designated", "positional", "compound-literal"])
def test_an_address_key_field_given_one_number_is_one_error(body: str, given: str,
                                                            line: int) -> None:
    # C sets the byte array's first byte from the number and zeroes the rest: every
    # source whose low byte matched shared one entry, printed as 25.0.0.0 (seen so)
    with pytest.raises(OfflowError) as err:
        plan_program(_talker_user(body))
    assert str(err.value) == (
        f"element `Talk_2`, body line {line}: `{given}` sets field `src` of map `talk`'s "
        "key, an `ipv4` address (its 4 bytes as on the wire, a `uint8_t src[4]`), from one "
        "number: C sets its first byte alone. Copy the address's bytes, `memcpy(k.src, "
        "pkt->data + state->l3_off + 12, 4)`, or declare the field an integer type to key "
        "by a number")


@pytest.mark.parametrize("body", [
    "struct talk_key k = { .proto = state->ip_proto };\n"
    "memcpy(k.src, pkt->data + state->l3_off + 12, 4);  /* the source, as sent */",
    "struct talk_key k = { .src = {10, 0, 0, 1}, .proto = 17 };",
    "struct talk_key k = { {0}, 6 };",
    "struct talk_key k = {0};",
    "struct talk_key k = { .src[3] = 1, .proto = 6 };  // one byte, as written",
    "struct talk_key k = { .proto = (uint8_t)state->src4 };  // a number into a number",
], ids=["memcpy", "bytes", "nested", "zero", "one-byte", "integer-field"])
def test_an_address_key_field_given_bytes_is_fine(body: str) -> None:
    plan_program(_talker_user(body))
