"""Stream operators over tuple streams (Aurora's, as the active-NIC seed ran them):
Filter, Map, Aggregate, BSort, Join and Resample. A tuple is a packet: an
Ethernet/IPv4/UDP frame whose payload is v1..vn, 32-bit little-endian integers, and whose
ts is the packet's timestamp (runtime/lib/streams/include/offlow/tuple.h;
docs/streams.md). An attribute is 0 for ts and k for v_k. TupleIn lets tuples in; the
operators take its output (type `tuple`). Filter and Map keep no state and assume no
order; the order-sensitive four keep theirs in a table object of their own
(offlow/streams.h), so each must run on one core, and state what order they assume.
Outputs of operators that make tuples carry the headers of the tuple that made them;
at a finite stream's end (their at_end) BSort, Aggregate and Resample let out what they
still hold."""

from __future__ import annotations

from offlow.dsl import Element, Port, Table
from offlow.errors import OfflowError
from offlow.streams.opts import AGG_FNS, SIZE_MAX

TUPLE_MAX = 128  # tuple.h's OFL_TUPLE_MAX
INCLUDES = ("offlow/streams.h",)

_PARSE = r"""
struct ofl_tuple_view t;
if (ofl_tuple_parse(pkt->data, pkt->len, &t) < 0)
    DROP_WHY(not_tuple);
"""
_DROPS = {"not_tuple": "not a tuple frame (tuple.h; TupleIn drops these first)",
          "short_tuple": "the tuple has fewer values than an attribute the operator reads"}
_LATE = {"late": "its order attribute is below an earlier tuple's of its stream (the "
                 "operator assumes order: put a BSort before it)"}


def _whole(value: object) -> bool:
    """A whole number as a parameter takes one: an int, not a bool (True is no size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _attr(name: str, key: str, value: int, low: int = 0) -> int:
    if not _whole(value) or not low <= value <= TUPLE_MAX:
        raise OfflowError(f"element `{name}`: {key}={value!r}: an attribute is 0 (ts) or "
                          f"1..{TUPLE_MAX} (v1..v{TUPLE_MAX})"
                          + (" and here not ts" if low else ""))
    return value


_CHECKS = {"ofl_bsort": "check_bsort", "ofl_agg": "check_agg", "ofl_join": "check_window",
           "ofl_resample": "check_window"}


def _table(name: str, ctype: str, fn: str, options: dict[str, object]) -> Table:
    # (each operator's open function reads exactly the options it is given here:
    # streams_opts.c; tests/test_opt_keys.py holds them to it)
    return Table(name, f"struct {ctype}", f"{fn}_open_opts", f"{fn}_close",
                 options=tuple((k, str(v)) for k, v in options.items()),
                 keys=tuple(sorted(options)),
                 source=f"the operator's state ({ctype}, offlow/streams.h), empty at start",
                 includes=INCLUDES, one_core=True,
                 check=f"offlow.streams.opts:{_CHECKS[fn]}")


class TupleIn(Element):
    """Lets in the frames that hold a tuple (Ethernet/IPv4/UDP, no fragment, a payload of
    1..128 32-bit values); drops the others, counted per reason."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "tuple"),)
    includes = INCLUDES
    drops = {"not_udp": "not Ethernet/IPv4/UDP, a fragment, or a header cut short",
             "bad_size": "a UDP payload empty, not a multiple of 4 bytes, over 128 values or "
                         "past the frame"}
    body = r"""
    struct ofl_tuple_view t;
    int rc = ofl_tuple_parse(pkt->data, pkt->len, &t);
    if (rc == OFL_TUPLE_ENOTUDP)
        DROP_WHY(not_udp);
    if (rc < 0)
        DROP_WHY(bad_size);
    """


class TupleReply(Element):
    """Turns each tuple into a reply to where it came from: swaps the Ethernet, IPv4 and
    UDP source and destination (checksums stay valid), so that a UDP run's sink sends a
    query's results back to the sender of the tuple that made each."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    includes = INCLUDES
    drops = _DROPS
    body = _PARSE + r"""
    uint8_t *p = pkt->data, sw[6];
    memcpy(sw, p, 6); memcpy(p, p + 6, 6); memcpy(p + 6, sw, 6);
    memcpy(sw, p + t.l3_off + 12, 4); memcpy(p + t.l3_off + 12, p + t.l3_off + 16, 4);
    memcpy(p + t.l3_off + 16, sw, 4);
    memcpy(sw, p + t.l4_off, 2); memcpy(p + t.l4_off, p + t.l4_off + 2, 2);
    memcpy(p + t.l4_off + 2, sw, 2);
    """


_OPS = ("<", "<=", "==", "!=", ">=", ">")


class Filter(Element):
    """Lets through the tuples whose attribute `attr` compares with `value` by `op` (one
    of < <= == != >= >); the others end here (consumed, not dropped). Assumes no order
    and keeps it; runs on any number of cores."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    params = {"attr": "uint32_t", "value": "int64_t"}
    includes = INCLUDES
    drops = _DROPS

    def __init__(self, name: str | None = None, *, attr: int, op: str, value: int) -> None:
        name = name or "filter"
        if op not in _OPS:
            raise OfflowError(f"element `{name}`: op={op!r}: expected one of {' '.join(_OPS)}")
        self.body = _PARSE + f"""
if (attr > t.n)
    DROP_WHY(short_tuple);
if (!(ofl_tuple_attr(pkt->data, &t, pkt->ts_ns, (uint32_t)attr) {op} value))
    CONSUME();
"""
        super().__init__(name, attr=_attr(name, "attr", attr), value=value)


class Map(Element):
    """Projects each tuple on the values `attrs` (v indices, in the order given; Aurora's
    Map as the seed ran it: three integer fields of the tuple), in place. Assumes no
    order and keeps it; runs on any number of cores."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    includes = INCLUDES
    drops = {**_DROPS, "too_long": "the projected tuple does not fit the packet's buffer "
                                   "(the program's mtu)"}

    def __init__(self, name: str | None = None, *, attrs: tuple[int, ...]) -> None:
        name = name or "map"
        ks = [_attr(name, "attrs", a, low=1) for a in attrs]
        if not 0 < len(ks) <= TUPLE_MAX:
            raise OfflowError(f"element `{name}`: attrs: name 1..{TUPLE_MAX} values, not "
                              f"{len(ks)}")
        self.body = _PARSE + f"""
static const uint32_t ks[{len(ks)}] = {{ {", ".join(f"{k}u" for k in ks)} }};
int32_t v[{len(ks)}];
for (uint32_t i = 0; i < {len(ks)}u; i++) {{
    if (ks[i] > t.n)
        DROP_WHY(short_tuple);
    v[i] = ofl_tuple_v(pkt->data, &t, ks[i]);
}}
uint32_t len = ofl_tuple_write(pkt->data, pkt->cap, pkt->data, &t, v, {len(ks)}u);
if (!len)
    DROP_WHY(too_long);
pkt->len = len;
"""
        super().__init__(name)




class Aggregate(Element):
    """Aggregates attribute `attr` (`fn`: count, sum, avg, min or max) in sliding windows
    over the order attribute `order` (default ts): window w holds the tuples with
    w*advance <= t < w*advance + size, grouped by attribute `group` (-1: one group,
    0). Assumes t never decreases: a tuple below an earlier one is dropped as late (put a
    BSort before it). A window is done when a tuple at or past its end arrives: then
    comes out one tuple per group seen in it, in the order the groups first came, made
    with the arriving tuple's headers and ts: v1 the group, v2 the count, v3..v4 the
    result and v5..v6 the window's start, each a 64-bit little-endian integer (avg
    rounds toward 0, a sum beyond 64 bits is the nearest 64-bit value); a window no
    tuple fell in gives none, and one ending past the largest 64-bit t comes out only
    at the end. The arriving tuple ends here
    (consumed). At most `groups` groups per window (a tuple of another is dropped,
    `groups_full`) and 1024 windows open (size / advance < 1024). At the end of a finite
    stream each window still open that some tuple fell in comes out the same way, oldest
    first, made with the headers and ts of the last tuple it took in."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    params = {"attr": "uint32_t", "order": "uint32_t", "group": "int32_t"}
    tables = ("windows",)
    includes = INCLUDES
    drops = {**_DROPS, **_LATE, "groups_full": "a window already holds `groups` other groups"}
    body = _PARSE + r"""
    if (attr > t.n || order > t.n || (group >= 0 && (uint32_t)group > t.n))
        DROP_WHY(short_tuple);
    int64_t at = ofl_tuple_attr(pkt->data, &t, pkt->ts_ns, (uint32_t)order);
    struct ofl_agg_out o;
    uint8_t buf[OFL_TUPLE_FRAME_MAX];
    while (ofl_agg_next(windows, at, &o)) {
        struct ofl_pkt made = { .data = buf, .cap = sizeof buf, .ts_ns = pkt->ts_ns,
                                .len = ofl_agg_write(buf, sizeof buf, pkt->data, &t, &o) };
        MAKE(out, &made);
    }
    int64_t g = group >= 0 ? ofl_tuple_attr(pkt->data, &t, pkt->ts_ns, (uint32_t)group) : 0;
    int rc = ofl_agg_add(windows, at, g, ofl_tuple_attr(pkt->data, &t, pkt->ts_ns, (uint32_t)attr));
    if (rc == -ERANGE)
        DROP_WHY(late);
    if (rc < 0)
        DROP_WHY(groups_full);
    ofl_agg_keep(windows, pkt->data, &t, pkt->ts_ns);   /* the end's results are made so */
    CONSUME();
    """
    at_end = r"""
    struct ofl_pkt rest;
    while (ofl_agg_drain(windows, &rest))
        MAKE(out, &rest);
    """

    def __init__(self, name: str | None = None, *, fn: str, attr: int, size: int,
                 advance: int, group: int = -1, order: int = 0, groups: int = 64) -> None:
        name = name or "aggregate"
        if fn not in AGG_FNS:
            raise OfflowError(f"element `{name}`: fn={fn!r}: expected one of "
                              f"{', '.join(AGG_FNS)}")
        if not (_whole(size) and _whole(advance) and 0 < advance <= SIZE_MAX
                and 0 < size <= SIZE_MAX and size // advance < 1024):
            raise OfflowError(f"element `{name}`: size={size!r}, advance={advance!r}: both "
                              f"must be 1..{SIZE_MAX} (whole numbers), with size / advance "
                              "below 1024")
        if group != -1:
            _attr(name, "group", group)
        if not (_whole(groups) and 0 < groups <= 65536):
            raise OfflowError(f"element `{name}`: groups={groups!r}: expected 1..65536")
        super().__init__(name, attr=_attr(name, "attr", attr), order=_attr(name, "order", order),
                         group=group, windows=_table(f"{name}_windows", "ofl_agg", "ofl_agg", {
                             "fn": fn, "size": size, "advance": advance, "groups": groups}))


class BSort(Element):
    """Sorts approximately on attribute `attr` (default ts) with slack n (Aurora's BSort):
    a buffer of n + 1 tuples; once full, each arrival sends out the smallest held (the
    earliest arrived among equal ones). A tuple at most n places late comes out in
    order; one later comes out late, never dropped. Assumes nothing of its input's
    order; its output is in order when the input's disorder is within n. At the end of
    a finite stream the tuples still held come out, smallest first."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    params = {"attr": "uint32_t"}
    tables = ("held",)
    includes = INCLUDES
    drops = _DROPS
    body = _PARSE + r"""
    if (attr > t.n)
        DROP_WHY(short_tuple);
    /* cannot fail: a parsed tuple fits a slot, and a full buffer was popped last time */
    ofl_bsort_push(held, pkt->data, t.end, pkt->ts_ns,
                   ofl_tuple_attr(pkt->data, &t, pkt->ts_ns, (uint32_t)attr));
    struct ofl_pkt first;
    if (ofl_bsort_pop(held, &first))
        MAKE(out, &first);
    CONSUME();
    """
    at_end = r"""
    struct ofl_pkt rest;
    while (ofl_bsort_drain(held, &rest))
        MAKE(out, &rest);
    """

    def __init__(self, name: str | None = None, *, slack: int, attr: int = 0) -> None:
        name = name or "bsort"
        if not (_whole(slack) and 0 <= slack <= 4095):
            raise OfflowError(f"element `{name}`: slack={slack!r}: expected 0..4095")
        super().__init__(name, attr=_attr(name, "attr", attr),
                         held=_table(f"{name}_held", "ofl_bsort", "ofl_bsort", {"slack": slack}))


def _sides(name: str, left_port: int, right_port: int, size: int, cap: int) -> None:
    if not (_whole(size) and 0 <= size <= SIZE_MAX and _whole(cap) and
            0 < cap <= 65536):
        raise OfflowError(f"element `{name}`: size={size!r}, cap={cap!r}: the window is "
                          f"0..{SIZE_MAX} and each side keeps 1..65536 tuples")
    for p in (left_port, right_port):
        if not (_whole(p) and 0 < p < 65536):
            raise OfflowError(f"element `{name}`: UDP port {p!r}: expected 1..65535")
    if left_port == right_port:
        raise OfflowError(f"element `{name}`: left_port and right_port are both {left_port}; "
                          "the two streams are told apart by their UDP ports")


_SIDE = r"""
unsigned side = t.dport == left_port || t.sport == left_port ? 0u
              : t.dport == right_port || t.sport == right_port ? 1u : 2u;
if (side == 2u)
    DROP_WHY(other_stream);
"""
_OTHER = {"other_stream": "a tuple from or to neither left_port nor right_port",
          "full": "not kept for later matches: its side already holds `cap` tuples"}


class Join(Element):
    """Joins two streams (Aurora's window Join): the left stream's tuples are those whose
    UDP destination or source port is `left_port` (a capture's stream to a port, a
    sender's own socket over UDP), the right's `right_port`, both on this one input. A
    left and a right tuple whose keys (attributes `left_key`, `right_key`) are equal and
    whose order attributes (`order`, default ts) differ by at most `size` make one
    tuple, once, when the later of the two arrives: the left values then the right
    ones, with the arriving tuple's headers and ts. Assumes each side's order attribute
    never decreases (a tuple below an earlier one of its side is dropped as late) and
    the two sides interleaved by it: a tuple is kept, up to `cap` per side, until the
    other side passes t + size. Each input tuple ends here (consumed). Tuples of more
    than 64 values are dropped (a pair would not fit)."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    params = {"left_port": "uint32_t", "right_port": "uint32_t", "left_key": "uint32_t",
              "right_key": "uint32_t", "order": "uint32_t"}
    tables = ("kept",)
    includes = INCLUDES
    drops = {**_DROPS, **_LATE, **_OTHER,
             "too_wide": "a tuple of more than 64 values (a joined pair holds at most 128)"}
    body = _PARSE + _SIDE + r"""
    uint32_t key = side ? (uint32_t)right_key : (uint32_t)left_key;
    if (key > t.n || order > t.n)
        DROP_WHY(short_tuple);
    if (t.n > OFL_TUPLE_MAX / 2u)
        DROP_WHY(too_wide);
    int32_t v[OFL_TUPLE_MAX];
    ofl_tuple_values(pkt->data, &t, v);
    if (ofl_join_begin(kept, side, ofl_tuple_attr(pkt->data, &t, pkt->ts_ns, (uint32_t)order),
                       ofl_tuple_attr(pkt->data, &t, pkt->ts_ns, key), v, t.n) < 0)
        DROP_WHY(late);
    uint8_t buf[OFL_TUPLE_FRAME_MAX];
    uint32_t n;
    while (ofl_join_next(kept, v, &n)) {
        struct ofl_pkt made = { .data = buf, .cap = sizeof buf, .ts_ns = pkt->ts_ns,
                                .len = ofl_tuple_write(buf, sizeof buf, pkt->data, &t, v, n) };
        MAKE(out, &made);
    }
    if (ofl_join_add(kept) < 0)
        DROP_WHY(full);
    CONSUME();
    """

    def __init__(self, name: str | None = None, *, size: int, left_port: int, right_port: int,
                 left_key: int, right_key: int, order: int = 0, cap: int = 1024) -> None:
        name = name or "join"
        _sides(name, left_port, right_port, size, cap)
        super().__init__(name, left_port=left_port, right_port=right_port,
                         left_key=_attr(name, "left_key", left_key),
                         right_key=_attr(name, "right_key", right_key),
                         order=_attr(name, "order", order),
                         kept=_table(f"{name}_kept", "ofl_join", "ofl_join",
                                     {"size": size, "cap": cap}))


class Resample(Element):
    """Aligns a left stream with a right one (Aurora's Resample, a semijoin): the left stream's
    tuples are those whose UDP destination or source port is `left_port`, the right's
    `right_port` (as Join's), both on this one input. Each left tuple with right tuples
    within `size` of it (on the order attribute `order`, default ts) comes out with two
    values added: how many, and the average of their attribute `attr` (rounded toward
    0); one with none ends there. A left tuple comes out once the right stream has
    passed its t + size, with its own headers and ts. Assumes each side's order
    attribute never decreases (a tuple below an earlier one of its side is dropped as
    late); keeps up to `cap` tuples per side. Each input tuple ends here (consumed). At
    the end of a finite stream the left tuples still waiting come out the same way, with
    the right tuples within `size` that came (one with none ends there)."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    params = {"left_port": "uint32_t", "right_port": "uint32_t", "attr": "uint32_t",
              "order": "uint32_t"}
    tables = ("kept",)
    includes = INCLUDES
    drops = {**_DROPS, **_LATE, **_OTHER,
             "too_wide": "a left tuple of more than 126 values (two are added)"}
    body = _PARSE + _SIDE + r"""
    if (order > t.n || (side && attr > t.n))
        DROP_WHY(short_tuple);
    int64_t at = ofl_tuple_attr(pkt->data, &t, pkt->ts_ns, (uint32_t)order);
    int rc = side ? ofl_resample_right(kept, at, ofl_tuple_attr(pkt->data, &t, pkt->ts_ns,
                                                                 (uint32_t)attr))
                  : ofl_resample_left(kept, pkt->data, t.end, &t, pkt->ts_ns, at);
    struct ofl_pkt done;
    while (ofl_resample_next(kept, &done))
        MAKE(out, &done);
    if (rc == -ERANGE)
        DROP_WHY(late);
    if (rc == -EMSGSIZE)
        DROP_WHY(too_wide);
    if (rc < 0)
        DROP_WHY(full);
    CONSUME();
    """
    at_end = r"""
    struct ofl_pkt rest;
    while (ofl_resample_drain(kept, &rest))
        MAKE(out, &rest);
    """

    def __init__(self, name: str | None = None, *, size: int, left_port: int, right_port: int,
                 attr: int, order: int = 0, cap: int = 1024) -> None:
        name = name or "resample"
        _sides(name, left_port, right_port, size, cap)
        super().__init__(name, left_port=left_port, right_port=right_port,
                         attr=_attr(name, "attr", attr), order=_attr(name, "order", order),
                         kept=_table(f"{name}_kept", "ofl_resample", "ofl_resample",
                                     {"size": size, "cap": cap}))
