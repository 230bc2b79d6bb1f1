"""The stream operators (offlow.elements.streams) against single-threaded references
written for the tests (tests/stream_oracles.py), on random tuple streams with order and
window edge cases, placed on the host, on the NIC, and split across both."""

from __future__ import annotations

import io
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import Element, Port, Program, Sink, Source, cbuild
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.elements.streams import (
    INCLUDES,
    Aggregate,
    BSort,
    Filter,
    Join,
    Map,
    Resample,
    TupleIn,
    TupleReply,
)
from offlow.errors import OfflowError
from offlow.report import summarize
from offlow.runner import Run, RunOptions, build_for, run
from offlow.streams.tuples import SEED_VALUES, Tuple, generate, values_of, write_pcap
from tests import stream_oracles as ref
from tests.test_udp_port import client

LEFT, RIGHT = 7001, 7002
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SANITIZE = cbuild.flags("sanitize")
PLACEMENTS = {"host": ("host", "host"), "nic": ("nic", "nic"), "split": ("nic", "host")}


def stream_of(tuples: list[Tuple], ports: list[int]) -> list[ref.Arrival]:
    return [(t.ts, t.v, port) for t, port in zip(tuples, ports, strict=True)]


def run_ops(tmp: Path, ops: list[Element], arrivals: list[ref.Arrival],
            placement: str = "split") -> tuple[list[ref.Out], dict[str, Any]]:
    """Source -> TupleIn -> ops -> Sink over a capture of `arrivals`: the tuples written
    out, in order, as (ts in ns, as the sink's nanosecond capture keeps it, values), and
    the run's summary."""
    write_pcap(tmp / "in.pcap", [(Tuple(ts, v), port) for ts, v, port in arrivals])
    p = Program("streams_test")
    src, tin, out = Source("rx"), TupleIn("tin"), Sink("tx")
    chain: Any = src >> tin
    for op in ops:
        chain = chain >> op
    chain >> out
    rx_dev, app_dev = PLACEMENTS[placement]
    p.segment("rx", [src, tin], device=rx_dev, cores=[0])
    p.segment("app", [*ops, out], device=app_dev, cores=[1 if rx_dev == app_dev else 0])
    o = RunOptions(input=tmp / "in.pcap", output=tmp / "out.pcap", timeout=120)
    b = build_for(p, o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    assert s["accounting"]["unaccounted"] == 0
    with open(tmp / "out.pcap", "rb") as f:
        got = [(int(ts * 10**9), values_of(bytes(buf))) for ts, buf in dpkt.pcap.Reader(f)]
    assert all(v is not None for _, v in got)
    return [(ts, tuple(v or ())) for ts, v in got], s


def drops(s: dict[str, Any], at: str) -> Counter[str]:
    return Counter({d["reason"]: d["packets"] for d in s["accounting"]["dropped"]
                    if d["at"] == at})


def mixed(seed: int, count: int = 400, disorder: int = 0, values: int = 6) -> list[ref.Arrival]:
    """A stream with runs of equal timestamps, long gaps (empty windows) and, with
    `disorder`, late tuples; values small enough for ties and shared keys."""
    parts = [generate(seed, count // 4, values=values, gap_ns=1000, disorder=disorder),
             generate(seed + 1, count // 4, values=values, gap_ns=0, start_ns=10**6),
             generate(seed + 2, count // 4, values=values, gap_ns=20000, start_ns=2 * 10**6,
                      low=-5, high=5),
             generate(seed + 3, count // 4, values=values, gap_ns=500, start_ns=10**7,
                      disorder=disorder, low=-(1 << 31), high=(1 << 31) - 1)]
    tuples = [t for part in parts for t in part]
    return stream_of(tuples, [LEFT if (t.v[0] + i) % 3 else RIGHT for i, t in enumerate(tuples)])


@pytest.mark.parametrize("placement", ["host", "nic", "split"])
def test_filter_keeps_exactly_the_tuples_its_predicate_holds_for(placement: str,
                                                                  tmp_path: Path) -> None:
    arrivals = mixed(11, disorder=4)
    got, s = run_ops(tmp_path, [Filter("hot", attr=2, op=">=", value=60)], arrivals, placement)
    assert got == ref.filter_(arrivals, 2, ">=", 60)
    assert 0 < len(got) < len(arrivals)
    assert s["accounting"]["consumed"] == {"hot": len(arrivals) - len(got)}


def test_filter_on_ts_and_map_project_in_order(tmp_path: Path) -> None:
    arrivals = mixed(12, disorder=4)
    cut = arrivals[len(arrivals) // 2][0]
    ops: list[Element] = [Filter("early", attr=0, op="<", value=cut), Map("proj", attrs=(5, 1, 5))]
    got, _ = run_ops(tmp_path, ops, arrivals, "nic")
    want = ref.map_([a for a in arrivals if a[0] < cut], (5, 1, 5))
    assert got == want and len(want) > 10


@pytest.mark.parametrize("fn", ["avg", "sum", "count", "min", "max"])
def test_aggregate_matches_the_reference_window_by_window(fn: str, tmp_path: Path) -> None:
    arrivals = mixed(13, disorder=3)
    op = Aggregate("agg", fn=fn, attr=4, size=5000, advance=2000, group=2, groups=128)
    got, s = run_ops(tmp_path, [op], arrivals, "host" if fn == "avg" else "split")
    want, want_drops = ref.aggregate(arrivals, fn, 4, 5000, 2000, group=2, groups=128)
    assert got == want and len(want) > 50
    assert drops(s, "agg") == want_drops and want_drops["late"] > 0


def test_a_tuple_at_a_windows_end_closes_it_and_avg_rounds_toward_zero(tmp_path: Path) -> None:
    """Windows of 2000 ns every 1000 ns: [-1000, 1000) holds -4 and -3 (avg -3.5: -3), done
    by the tuple at 1000; [0, 2000) holds -4, -3, 5 (avg -2/3: 0), done by the tuple at
    exactly 2000, its end. Results are v1 group, v2 count, then the value and the window's
    start as int64 (low, high). [1000, 3000) (5, -1: avg 2) and [2000, 4000) (-1) are
    still open at the end and come out with the last tuple's ts."""
    tuples = [Tuple(0, (-4,)), Tuple(500, (-3,)), Tuple(1000, (5,)), Tuple(2000, (-1,))]
    op = Aggregate("edge", fn="avg", attr=1, size=2000, advance=1000)
    got, _ = run_ops(tmp_path, [op], stream_of(tuples, [LEFT] * 4), "nic")
    assert got == [(1000, (0, 2, -3, -1, -1000, -1)), (2000, (0, 3, 0, 0, 0, 0)),
                   (2000, (0, 2, 2, 0, 1000, 0)), (2000, (0, 1, -1, -1, 2000, 0))]


def test_aggregate_drops_a_tuple_of_one_group_too_many(tmp_path: Path) -> None:
    arrivals = mixed(21)
    op = Aggregate("few", fn="sum", attr=1, size=3000, advance=1000, group=2, groups=5)
    got, s = run_ops(tmp_path, [op], arrivals, "nic")
    want, want_drops = ref.aggregate(arrivals, "sum", 1, 3000, 1000, group=2, groups=5)
    assert got == want and len(want) > 50
    assert drops(s, "few") == want_drops and want_drops["groups_full"] > 0


@pytest.mark.parametrize("placement", ["nic", "host"])
def test_aggregate_over_a_value_attribute_without_groups(placement: str, tmp_path: Path) -> None:
    """Windows over v1 (sorted first by a BSort whose slack covers the disorder), one
    group; tumbling windows (advance = size) with gaps between them that stay empty."""
    tuples = sorted(generate(14, 300, values=3, low=0, high=5000), key=lambda t: t.v[0])
    arrivals = stream_of(tuples, [LEFT] * len(tuples))
    got, s = run_ops(tmp_path, [Aggregate("tumble", fn="sum", attr=3, size=97, advance=97,
                                          order=1)], arrivals, placement)
    want, want_drops = ref.aggregate(arrivals, "sum", 3, 97, 97, order=1)
    assert got == want and not want_drops and not drops(s, "tumble")


@pytest.mark.parametrize("placement", ["host", "nic", "split"])
def test_bsort_sorts_within_its_slack_and_lets_later_tuples_out_late(placement: str,
                                                                      tmp_path: Path) -> None:
    arrivals = mixed(15, disorder=6)
    got, s = run_ops(tmp_path, [BSort("sort", slack=4)], arrivals, placement)
    want = [(ts, v) for ts, v, _ in ref.bsort(arrivals, 4)]
    assert got == want
    assert len(got) == len(arrivals)  # the last `slack` held come out at the end
    assert not drops(s, "sort")


def test_bsort_with_a_deep_buffer_keeps_the_reference_order(tmp_path: Path) -> None:
    """On v1 (random, many ties): the buffer holds 38 of a shuffled stream at a time."""
    arrivals = mixed(27, count=800, disorder=60)
    got, _ = run_ops(tmp_path, [BSort("deep", slack=37, attr=1)], arrivals, "host")
    assert got == [(ts, v) for ts, v, _ in ref.bsort(arrivals, 37, a=1)]
    assert len(got) == len(arrivals)  # the 37 still held come out at the end


def test_bsort_with_slack_covering_the_disorder_feeds_an_aggregate_with_no_late_tuple(
        tmp_path: Path) -> None:
    arrivals = mixed(16, disorder=3)
    ops: list[Element] = [BSort("sort", slack=3),
                          Aggregate("agg", fn="max", attr=1, size=3000, advance=1000)]
    got, s = run_ops(tmp_path, ops, arrivals, "split")
    want, want_drops = ref.aggregate(ref.bsort(arrivals, 3), "max", 1, 3000, 1000)
    assert got == want and len(want) > 50
    assert not want_drops and not drops(s, "agg")


@pytest.mark.parametrize("placement", ["host", "nic", "split"])
def test_join_pairs_every_match_within_its_window_once(placement: str, tmp_path: Path) -> None:
    keys = generate(170, 200, values=4, gap_ns=700, disorder=2, low=0, high=4,
                    start_ns=10**8)  # few keys: many pairs
    arrivals = mixed(17, disorder=2) + stream_of(keys, [(LEFT, RIGHT)[t.v[1] % 2] for t in keys])
    op = Join("pairs", size=1500, left_port=LEFT, right_port=RIGHT, left_key=3, right_key=3)
    got, s = run_ops(tmp_path, [op], arrivals, placement)
    want, want_drops = ref.join(arrivals, 1500, LEFT, RIGHT, 3, 3)
    assert got == want and len(want) > 30
    assert drops(s, "pairs") == want_drops


def test_join_on_equal_timestamps_and_other_streams(tmp_path: Path) -> None:
    """A size-0 join: only equal timestamps pair (both orders of arrival); tuples to a
    third port are dropped as other_stream."""
    tuples = generate(18, 240, values=2, gap_ns=0, low=0, high=3)
    for k in range(len(tuples)):
        tuples[k] = Tuple(1000 * (k // 6), tuples[k].v)  # runs of 6 equal timestamps
    ports = [(LEFT, RIGHT, 9)[k % 3] if k % 7 else RIGHT for k in range(len(tuples))]
    arrivals = stream_of(tuples, ports)
    op = Join("eq", size=0, left_port=LEFT, right_port=RIGHT, left_key=1, right_key=2)
    got, s = run_ops(tmp_path, [op], arrivals, "nic")
    want, want_drops = ref.join(arrivals, 0, LEFT, RIGHT, 1, 2)
    assert got == want and len(want) > 10
    assert drops(s, "eq") == want_drops and want_drops["other_stream"] > 0


@pytest.mark.parametrize("placement", ["host", "nic", "split"])
def test_resample_gives_each_left_tuple_the_average_of_the_right_ones_near_it(
        placement: str, tmp_path: Path) -> None:
    arrivals = mixed(19, disorder=2)
    op = Resample("align", size=2500, left_port=LEFT, right_port=RIGHT, attr=4)
    got, s = run_ops(tmp_path, [op], arrivals, placement)
    want, want_drops = ref.resample(arrivals, 2500, LEFT, RIGHT, 4)
    assert got == want and len(want) > 50
    assert drops(s, "align") == want_drops


class Scale(Element):
    """A user's own element on tuples: v2 times `factor`, saturated (names and comments
    of its own)."""

    includes = INCLUDES
    inputs = (Port("readings", "tuple"),)
    outputs = (Port("scaled", "tuple"),)
    params = {"factor": "int32_t"}
    body = r"""
    struct ofl_tuple_view tv;   /* where the values lie */
    if (ofl_tuple_parse(pkt->data, pkt->len, &tv) < 0 || tv.n < 2)
        DROP();
    int32_t vals[OFL_TUPLE_MAX];
    ofl_tuple_values(pkt->data, &tv, vals);
    int64_t x = (int64_t)vals[1] * factor;   // may overflow int32: clamp
    vals[1] = x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t)x;
    pkt->len = ofl_tuple_write(pkt->data, pkt->cap, pkt->data, &tv, vals, tv.n);
    """


def test_a_users_program_with_its_own_element_between_operators(tmp_path: Path) -> None:
    arrivals = mixed(20)
    ops: list[Element] = [Scale("my_scale", factor=3), Filter("keep", attr=2, op="!=", value=0),
                          Aggregate("totals", fn="sum", attr=2, size=4000, advance=4000,
                                    group=3, groups=128)]
    got, s = run_ops(tmp_path, ops, arrivals, "split")
    assert not s["accounting"]["dropped"]

    def scale(v: tuple[int, ...]) -> tuple[int, ...]:
        return (v[0], max(-(1 << 31), min((1 << 31) - 1, v[1] * 3)), *v[2:])

    scaled = [(ts, scale(v), p) for ts, v, p in arrivals]
    want, _ = ref.aggregate(ref_filter_arrivals(scaled, 2, "!=", 0), "sum", 2, 4000, 4000,
                            group=3)
    assert got == want and len(want) > 20


def ref_filter_arrivals(arrivals: list[ref.Arrival], a: int, op: str,
                        value: int) -> list[ref.Arrival]:
    keep = Counter(ref.filter_(arrivals, a, op, value))
    out = []
    for x in arrivals:
        if keep[x[:2]]:
            keep[x[:2]] -= 1
            out.append(x)
    return out


OPERATOR_ERRORS: list[tuple[Callable[[], Element], str]] = [
    (lambda: Filter("f", attr=1, op="=~", value=1), "op='=~'"),
    (lambda: Filter("f", attr=129, op="<", value=1), "attr=129"),
    (lambda: Map("m", attrs=(0,)), "not ts"),
    (lambda: Map("m", attrs=(1,) * 129), "not 129"),
    (lambda: Aggregate("a", fn="median", attr=1, size=2, advance=1), "fn='median'"),
    (lambda: Aggregate("a", fn="avg", attr=1, size=5000, advance=1), "below 1024"),
    (lambda: Aggregate("a", fn="sum", attr=1, size=2**62, advance=2**61), "both must be 1.."),
    (lambda: Join("j", size=2**63, left_port=1, right_port=2, left_key=1, right_key=1),
     "size=9223372036854775808"),
    (lambda: BSort("b", slack=5000), "slack=5000"),
    (lambda: Aggregate("a", fn="avg", attr=1, size=2, advance=1, groups=0), "groups=0"),
    (lambda: Resample("r", size=-1, left_port=1, right_port=2, attr=1), "size=-1"),
    (lambda: Join("j", size=1, left_port=1, right_port=2, left_key=1, right_key=1,
                  cap=70000), "cap=70000"),
    (lambda: Join("j", size=1, left_port=5, right_port=5, left_key=1, right_key=1),
     "both 5"),
]


@pytest.mark.parametrize(("make", "says"), OPERATOR_ERRORS, ids=[s for _, s in OPERATOR_ERRORS])
def test_operator_settings_out_of_range_are_one_clear_error(
        make: Callable[[], Element], says: str) -> None:
    with pytest.raises(OfflowError) as e:
        make()
    assert says in str(e.value)


def serve_udp(ops: list[Element], talk: Callable[[int], None]) -> dict[str, Any]:
    """Source -> TupleIn -> ops -> TupleReply -> Sink serving UDP on a free port while
    `talk(port)` runs; the run's summary."""
    p = Program("streams_udp")
    src, tin, back, out = Source("rx"), TupleIn("tin"), TupleReply("back"), Sink("tx")
    chain: Any = src >> tin
    for op in ops:
        chain = chain >> op
    chain >> back >> out
    p.segment("rx", [src, tin], device="nic", cores=[0])
    p.segment("app", [*ops, back, out], device="host", cores=[0])
    r = Run(build(p), RunOptions(udp_port=0, timeout=120))
    r.start()
    try:
        assert r.udp_port
        talk(r.udp_port)
    finally:
        r.stop()
        res = r.wait()
    assert res.ok, res.errors
    return summarize(r.build.plan, res.stats)


def receive(s: socket.socket, n: int) -> list[tuple[int, ...]]:
    out = []
    for _ in range(n):
        data = s.recv(65536)
        out.append(struct.unpack(f"<{len(data) // 4}i", data))
    return out


def test_the_same_filter_runs_on_tuples_in_udp_datagrams(tmp_path: Path) -> None:
    """Tuples sent as datagrams (ts added on arrival) through Filter; the ones that pass
    come back; datagrams that hold no tuple are dropped and counted by TupleIn."""
    tuples = generate(22, 300, values=SEED_VALUES)
    want = [v for _, v in ref.filter_([(t.ts, t.v, 0) for t in tuples], 7, "<", 30)]
    bad = [b"", b"12345", bytes(4 * 129)]

    def talk(port: int) -> None:
        with client() as c:
            got: list[tuple[int, ...]] = []
            for k in range(0, len(tuples), 50):  # bursts the socket buffers hold
                part = tuples[k:k + 50]
                for t in part:
                    c.sendto(struct.pack(f"<{len(t.v)}i", *t.v), ("127.0.0.1", port))
                n = len(ref.filter_([(0, t.v, 0) for t in part], 7, "<", 30))
                got += receive(c, n)
            for b in bad:
                c.sendto(b, ("127.0.0.1", port))
            # a tuple that passes, after them: its answer says the bad ones were read
            # (one source core reads in order), before the run is stopped
            marker = (0,) * len(tuples[0].v)
            c.sendto(struct.pack(f"<{len(marker)}i", *marker), ("127.0.0.1", port))
            assert receive(c, 1) == [marker]
            assert got == want

    s = serve_udp([Filter("cold", attr=7, op="<", value=30)], talk)
    assert drops(s, "tin") == {"bad_size": len(bad)}


def test_a_join_of_two_senders_over_udp_tells_them_apart_by_their_ports() -> None:
    """Two sockets send the two streams (v1 is their time); each joined tuple goes back
    to the sender of the later of its pair, as the reference says."""
    tuples = generate(23, 200, values=3, low=0, high=3)
    tuples = [Tuple(0, (k * 100, *t.v[1:])) for k, t in enumerate(tuples)]
    with client() as left, client() as right:
        lp, rp = left.getsockname()[1], right.getsockname()[1]
        sides = [(left, lp) if t.v[1] % 2 else (right, rp) for t in tuples]
        arrivals = [(0, t.v, port) for t, (_, port) in zip(tuples, sides, strict=True)]
        want, _ = ref.join(arrivals, 250, lp, rp, 3, 3, order=1)
        # which sender each result goes back to: the one whose tuple made it
        back = {lp: Counter[tuple[int, ...]](), rp: Counter[tuple[int, ...]]()}
        made_by = ref.join_makers(arrivals, 250, lp, rp, 3, 3, order=1)
        for (_, v), port in zip(want, made_by, strict=True):
            back[port][v] += 1

        def talk(port: int) -> None:
            for t, (sock, _) in zip(tuples, sides, strict=True):
                sock.sendto(struct.pack("<3i", *t.v), ("127.0.0.1", port))
                time.sleep(0.0005)  # one receive queue: arrival order is send order
            assert Counter(receive(left, sum(back[lp].values()))) == back[lp]
            assert Counter(receive(right, sum(back[rp].values()))) == back[rp]

        op = Join("pairs", size=250, left_port=lp, right_port=rp, left_key=3, right_key=3,
                  order=1)
        serve_udp([op], talk)
        assert len(want) > 20


def test_an_order_sensitive_operator_on_two_cores_is_a_compile_error() -> None:
    p = Program("two_cores")
    src, tin, out = Source("rx"), TupleIn("tin"), Sink("tx")
    sort = BSort("my_sort", slack=3)
    src >> tin >> sort >> out
    p.segment("rx", [src, tin], device="nic", cores=[0])
    p.segment("app", [sort, out], device="host", cores=[0, 1])
    with pytest.raises(OfflowError, match=r"table `my_sort_held` is one core's state .*"
                                          r"`my_sort` in segment `app` \(cores 0,1\)"):
        build(p)


@pytest.mark.parametrize("settings", [[], ["select.device=host"], ["select.cores=0,1"]],
                         ids=["nic-host", "host", "two-nic-cores"])
def test_the_seeds_partitioned_query_example_matches_the_reference(
        settings: list[str], tmp_path: Path) -> None:
    """examples/streams_query.py: Filter on the NIC, Aggregate on the host. On two NIC
    cores the filtered tuples reach the host interleaved (each ring keeps its own
    order): every tuple the filter keeps reaches the Aggregate, which takes it or drops
    it as late."""
    tuples = generate(24, 3000)
    arrivals = stream_of(tuples, [LEFT] * len(tuples))
    write_pcap(tmp_path / "in.pcap", [(t, LEFT) for t in tuples])
    o = RunOptions(input=tmp_path / "in.pcap", output=tmp_path / "out.pcap", timeout=120)
    b = build_for(load_program(EXAMPLES / "streams_query.py", settings), o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    with open(tmp_path / "out.pcap", "rb") as f:
        got = [values_of(bytes(buf)) for _, buf in dpkt.pcap.Reader(f)]
    kept = ref_filter_arrivals(arrivals, 1, "<", 20)
    want, _ = ref.aggregate(kept, "avg", 2, 100_000, 50_000)
    assert 500 < len(kept) < 700 and len(want) > 50
    if settings and settings[0].startswith("select.cores"):
        agg = s["elements"]["average"]
        assert agg["in"] == len(kept) == agg["consumed"] + drops(s, "average")["late"]
    else:
        assert got == [v for _, v in want] and not drops(s, "average")


def test_every_operator_is_clean_under_asan_and_ubsan(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """All six operators in one chain, runtime and generated code built with the
    sanitizers (any out-of-bounds access, undefined behaviour or leak fails a process),
    writing what the same program writes built plainly."""
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    monkeypatch.setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    tuples = generate(25, 600, values=64, disorder=5, low=-2, high=2)  # few keys: pairs
    arrivals = stream_of(tuples, [(LEFT, RIGHT)[k % 3 == 0] for k in range(len(tuples))])
    write_pcap(tmp_path / "in.pcap", [(Tuple(ts, v), port) for ts, v, port in arrivals])

    def chain() -> Program:
        p = Program("all_six")
        src, tin, out = Source("rx"), TupleIn("tin"), Sink("tx")
        ops = [BSort("sort", slack=2), Filter("f", attr=3, op="!=", value=2),
               Map("m", attrs=tuple(range(30, 0, -1))),
               Join("j", size=2000, left_port=LEFT, right_port=RIGHT, left_key=4, right_key=4),
               Resample("r", size=3000, left_port=LEFT, right_port=RIGHT, attr=2),
               Aggregate("a", fn="min", attr=61, size=5000, advance=1000, group=1,
                         groups=4096)]
        x: Any = src >> tin
        for op in ops:
            x = x >> op
        x >> out
        p.segment("rx", [src, tin, *ops[:3]], device="nic", cores=[0])
        p.segment("app", [*ops[3:], out], device="host", cores=[0])
        return p

    outs = []
    for flags in ((), SANITIZE):
        o = RunOptions(input=tmp_path / "in.pcap", output=tmp_path / "out.pcap", timeout=300)
        res = run(build(chain(), werror=True, extra_flags=list(flags)), o)
        assert res.ok, res.errors
        outs.append((tmp_path / "out.pcap").read_bytes())
    assert outs[0] == outs[1]
    assert len(list(dpkt.pcap.Reader(io.BytesIO(outs[0])))) >= 20  # every operator had work


def test_a_looped_capture_with_advance_ts_is_one_stream_whose_time_goes_on(
        tmp_path: Path) -> None:
    """--opt rx.advance_ts=1: each replay's timestamps follow the previous pass's (shifted
    by the capture's span + 1 ns), so an Aggregate sees three passes as one ordered
    stream; without it every replay's tuples come late."""
    tuples = generate(26, 200, values=3)
    write_pcap(tmp_path / "in.pcap", [(t, LEFT) for t in tuples])
    span = tuples[-1].ts - tuples[0].ts + 1
    three = [(t.ts + k * span, t.v, LEFT) for k in range(3) for t in tuples]
    p = Program("looped")
    src, tin, out = Source("rx"), TupleIn("tin"), Sink("tx")
    agg = Aggregate("sums", fn="sum", attr=1, size=20_000, advance=10_000)
    src >> tin >> agg >> out
    p.segment("rx", [src, tin, agg, out], device="nic", cores=[0])
    for advance in (True, False):
        o = RunOptions(input=tmp_path / "in.pcap", output=tmp_path / "out.pcap", loops=3,
                       timeout=120, opts=("rx.advance_ts=1",) if advance else ())
        b = build_for(p, o, werror=True)
        res = run(b, o)
        assert res.ok, res.errors
        with open(tmp_path / "out.pcap", "rb") as f:
            got = [values_of(bytes(buf)) for _, buf in dpkt.pcap.Reader(f)]
        late = drops(summarize(b.plan, res.stats), "sums")["late"]
        if advance:
            want, _ = ref.aggregate(three, "sum", 1, 20_000, 10_000)
            assert got == [v for _, v in want] and late == 0
        else:
            assert late == 2 * (len(tuples) - 1)  # a replay's tuples lie below the first's last
