"""Straightforward single-threaded references of the stream operators, written for the
tests from the operators' stated semantics (docs/streams.md), not from their C: each
takes the tuples in arrival order as (ts, values, UDP destination port) and returns the
tuples that come out, in order, as (ts, values), and the drops by reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

Arrival = tuple[int, tuple[int, ...], int]
Out = tuple[int, tuple[int, ...]]


def attr(ts: int, v: tuple[int, ...], a: int) -> int:
    return ts if a == 0 else v[a - 1]


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def i64(x: int) -> tuple[int, int]:
    """A 64-bit integer as two int32 values, low then high (as the frames hold it)."""
    u = x & (1 << 64) - 1
    lo, hi = u & 0xFFFFFFFF, u >> 32
    return (lo - (1 << 32) if lo >= 1 << 31 else lo, hi - (1 << 32) if hi >= 1 << 31 else hi)


def filter_(stream: list[Arrival], a: int, op: str, value: int) -> list[Out]:
    ops = {"<": int.__lt__, "<=": int.__le__, "==": int.__eq__, "!=": int.__ne__,
           ">=": int.__ge__, ">": int.__gt__}
    return [(ts, v) for ts, v, _ in stream if ops[op](attr(ts, v, a), value)]


def map_(stream: list[Arrival], attrs: tuple[int, ...]) -> list[Out]:
    return [(ts, tuple(v[k - 1] for k in attrs)) for ts, v, _ in stream]


def aggregate(stream: list[Arrival], fn: str, a: int, size: int, advance: int,
              group: int = -1, order: int = 0,
              groups: int = 64) -> tuple[list[Out], Counter[str]]:
    """Results come out with the ts of the tuple that closed their window; at the end
    the windows still open that hold some tuple, with the ts of the last tuple taken in."""
    out: list[Out] = []
    drops: Counter[str] = Counter()
    windows: dict[int, dict[int, list[int]]] = {}  # window index -> group -> values

    def close(ts: int, t: float) -> None:  # the windows done by t, oldest first
        for w in sorted(windows):
            if w * advance + size <= t and windows[w]:
                for g, vals in windows.pop(w).items():
                    res = {"count": len(vals), "sum": sum(vals), "min": min(vals),
                           "max": max(vals), "avg": trunc_div(sum(vals), len(vals))}[fn]
                    out.append((ts, (g, len(vals), *i64(res), *i64(w * advance))))

    last = None
    last_ts = 0
    for ts, v, _ in stream:
        t = attr(ts, v, order)
        close(ts, t)
        if last is not None and t < last:
            drops["late"] += 1
            continue
        last = t
        g = attr(ts, v, group) if group >= 0 else 0
        holding = []
        w = t // advance  # the last window that starts at or before t, then back
        while w * advance + size > t:
            holding.append(windows.setdefault(w, {}))
            w -= 1
        if any(len(x) == groups and g not in x for x in holding):
            drops["groups_full"] += 1
            continue
        for x in holding:
            x.setdefault(g, []).append(attr(ts, v, a))
        last_ts = ts
    close(last_ts, float("inf"))  # the end of the stream
    return out, drops


def bsort(stream: list[Arrival], slack: int, a: int = 0) -> list[Arrival]:
    """The tuples that come out, whole, in order (what is held last, at the end)."""
    held: list[tuple[int, int, Arrival]] = []  # (key, arrival, tuple)
    out = []
    for i, x in enumerate(stream):
        held.append((attr(x[0], x[1], a), i, x))
        if len(held) == slack + 1:
            first = min(held, key=lambda h: (h[0], h[1]))
            held.remove(first)
            out.append(first[2])
    return out + [h[2] for h in sorted(held, key=lambda h: (h[0], h[1]))]  # at the end


def in_order(stream: list[Arrival], left_port: int, right_port: int, order: int,
             drops: Counter[str]) -> Iterator[tuple[int, tuple[int, ...], int, int]]:
    """The tuples of two streams told apart by port, as (ts, values, side, order value),
    without those of other ports and the late ones (counted in `drops`)."""
    last: dict[int, int] = {}
    for ts, v, port in stream:
        if port not in (left_port, right_port):
            drops["other_stream"] += 1
            continue
        side = 0 if port == left_port else 1
        t = attr(ts, v, order)
        if side in last and t < last[side]:
            drops["late"] += 1
            continue
        last[side] = t
        yield ts, v, side, t


def join(stream: list[Arrival], size: int, left_port: int, right_port: int, left_key: int,
         right_key: int, order: int = 0) -> tuple[list[Out], Counter[str]]:
    """Every pair with equal keys and order attributes at most `size` apart, out when the
    later arrives, with its ts; a late tuple (below an earlier one of its side) is
    dropped. (A tuple is kept forever here: the operator's forgetting must change no
    output.)"""
    seen: dict[int, list[tuple[int, int, tuple[int, ...]]]] = {0: [], 1: []}
    out: list[Out] = []
    drops: Counter[str] = Counter()
    for ts, v, side, t in in_order(stream, left_port, right_port, order, drops):
        key = attr(ts, v, right_key if side else left_key)
        for t2, k2, v2 in seen[1 - side]:
            if k2 == key and abs(t2 - t) <= size:
                out.append((ts, v + v2 if side == 0 else v2 + v))
        seen[side].append((t, key, v))
    return out, drops


def join_makers(stream: list[Arrival], size: int, left_port: int, right_port: int,
                left_key: int, right_key: int, order: int = 0) -> list[int]:
    """The port of the tuple whose arrival made each of join's outputs, in order."""
    out = []
    for k in range(len(stream)):
        before = len(join(stream[:k], size, left_port, right_port, left_key, right_key,
                          order)[0])
        after = len(join(stream[:k + 1], size, left_port, right_port, left_key, right_key,
                         order)[0])
        out += [stream[k][2]] * (after - before)
    return out


def resample(stream: list[Arrival], size: int, left_port: int, right_port: int, a: int,
             order: int = 0) -> tuple[list[Out], Counter[str]]:
    """Each left tuple with the count and average of the right tuples within `size`,
    out once a right tuple past its t + size arrives or the stream ends (only those with
    some near), with its own ts."""
    lefts: list[tuple[int, int, tuple[int, ...]]] = []
    rights: list[tuple[int, int]] = []
    last: dict[int, int] = {}
    out: list[Out] = []
    drops: Counter[str] = Counter()

    def done(lt: int, lts: int, lv: tuple[int, ...]) -> None:
        near = [x for rt, x in rights if abs(rt - lt) <= size]
        if near:
            out.append((lts, (*lv, len(near), trunc_div(sum(near), len(near)))))

    for ts, v, side, t in in_order(stream, left_port, right_port, order, drops):
        last[side] = t
        if side == 0:
            lefts.append((t, ts, v))
        else:
            rights.append((t, attr(ts, v, a)))
        right_max = last.get(1)
        while lefts and right_max is not None and right_max > lefts[0][0] + size:
            done(*lefts.pop(0))
    for left in lefts:  # the end of the stream
        done(*left)
    return out, drops
