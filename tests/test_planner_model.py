"""The cost model's arithmetic against cases worked out by hand (the numbers in each
test's comment), not recomputed by the model's code."""

from dataclasses import replace
from pathlib import Path

import pytest

from offlow.build import compile_program
from offlow.errors import OfflowError
from offlow.planner import crossing, profile
from offlow.planner.calibrate import Calibration, ElementCost, QueueCost, from_stats, median
from offlow.planner.model import Crossing, Placement, Segment, clock_needed_mhz, predict
from offlow.planner.plan import format_plan
from offlow.planner.profile import Link, MemoryLevel, Profile
from offlow.planner.request import PlanRequest
from offlow.planner.search import model_inputs, rank
from tests.progs import two_segment


def _profile(name: str, integer: float, lookup: float, link: Link | None) -> Profile:
    return Profile(name=name, description="", sources=("hand-made",), cores=8, clock_mhz=1000,
                   speed={"integer": integer, "lookup": lookup, "hash": 1.0},
                   memory=(MemoryLevel("DRAM", 1, 100),), link=link, memory_mb=1,
                   instructions=0, ipc=0)


HOST = _profile("host", 1.0, 1.0, None)
NIC = _profile("nic", 0.2, 0.5, Link(gbps=40, latency_us=1.0, dma_gbps=20))
PROFILES = {"host": HOST, "nic": NIC}
SEGMENTS = [Segment("rx", {"integer": 40.0}), Segment("route", {"lookup": 60.0})]


def _place(rx: tuple[str, tuple[int, ...]], route: tuple[str, tuple[int, ...]]) -> Placement:
    return Placement(devices={"rx": rx[0], "route": route[0]},
                     cores={"rx": rx[1], "route": route[1]})


def test_a_slow_device_core_is_the_bottleneck():
    # rx on one NIC core: 40 ns / 0.2 = 200 ns a packet -> 5 Mpps; route on the host 60 ns.
    # 100 B a packet cross nic->host: the link 100*8/40 = 20 ns, the DMA 100*8/20 = 40 ns.
    # Latency: 200 + 60 + 1000 (the link's 1 us) + 20 = 1280 ns.
    p = predict(SEGMENTS, [Crossing("rx", "route", 1.0, 100.0)],
                _place(("nic", (0,)), ("host", (0,))), PROFILES)
    assert p.bottleneck.name == "nic core 0"
    assert p.mpps == pytest.approx(5.0)
    assert p.latency_us == pytest.approx(1.28)
    assert {s.name: s.ns for s in p.stages} == pytest.approx(
        {"nic core 0": 200.0, "host core 0": 60.0, "link nic->host": 20.0, "nic DMA": 40.0})


def test_more_device_cores_move_the_bottleneck_to_the_host():
    # rx over 4 NIC cores: 50 ns each; the host's 60 ns is now the slowest: 16.67 Mpps.
    # A packet still takes one core's 200 ns: the latency stays 1.28 us.
    p = predict(SEGMENTS, [Crossing("rx", "route", 1.0, 100.0)],
                _place(("nic", (0, 1, 2, 3)), ("host", (0,))), PROFILES)
    assert p.bottleneck.name == "host core 0"
    assert p.mpps == pytest.approx(1000 / 60)
    assert p.latency_us == pytest.approx(1.28)


def test_segments_sharing_a_core_add_up_and_nothing_crosses():
    # Both on host core 0: 40 + 60 = 100 ns -> 10 Mpps, latency 0.1 us, no link stage.
    p = predict(SEGMENTS, [Crossing("rx", "route", 1.0, 100.0)],
                _place(("host", (0,)), ("host", (0,))), PROFILES)
    assert [s.name for s in p.stages] == ["host core 0"]
    assert p.mpps == pytest.approx(10.0)
    assert p.latency_us == pytest.approx(0.1)


def test_the_dma_engine_limits_a_fat_crossing():
    # 1000 B a packet: link 200 ns, DMA 400 ns; rx on 4 cores (50 ns), route 60 ns.
    # -> the DMA at 2.5 Mpps.
    p = predict(SEGMENTS, [Crossing("rx", "route", 1.0, 1000.0)],
                _place(("nic", (0, 1, 2, 3)), ("host", (0,))), PROFILES)
    assert p.bottleneck.name == "nic DMA"
    assert p.mpps == pytest.approx(2.5)


def test_both_directions_share_the_dma_engine_but_not_the_links():
    # host rx -> nic route -> host tx: 100 B down, then half the packets (0.5) with 60 B up.
    # Links: host->nic 20 ns, nic->host 60*8/40 = 12 ns; DMA (100+60)*8/20 = 64 ns.
    # route on the NIC: 60 / 0.5 = 120 ns -> the bottleneck, 8.33 Mpps.
    # Latency: 40 + 120 + 0 (tx) + (1000 + 20) + (0.5*1000 + 12) = 1692 ns.
    segs = [*SEGMENTS, Segment("tx", {})]
    place = Placement(devices={"rx": "host", "route": "nic", "tx": "host"},
                      cores={"rx": (0,), "route": (0,), "tx": (1,)})
    p = predict(segs, [Crossing("rx", "route", 1.0, 100.0), Crossing("route", "tx", 0.5, 60.0)],
                place, PROFILES)
    stages = {s.name: s.ns for s in p.stages}
    assert stages["link host->nic"] == pytest.approx(20.0)
    assert stages["link nic->host"] == pytest.approx(12.0)
    assert stages["nic DMA"] == pytest.approx(64.0)
    assert p.bottleneck.name == "nic core 0" and p.mpps == pytest.approx(1000 / 120)
    assert p.latency_us == pytest.approx(1.692)


def test_a_small_ring_across_a_long_latency_limits_the_rate():
    # A link of 10 us latency and a 32-entry ring between rx (host) and route (NIC):
    # each entry waits at least 10 us for the consumer to see it, so the ring moves at
    # most 32 entries per 10 us: 312.5 ns a packet (3.2 Mpps), slower than route's 120.
    # With a 1024-entry ring: 9.8 ns, and route is the bottleneck again.
    far = replace(NIC, link=Link(gbps=40, latency_us=10.0, dma_gbps=20))
    place = _place(("host", (0,)), ("nic", (0,)))
    small = predict(SEGMENTS, [Crossing("rx", "route", 1.0, 100.0, ring_size=32)], place,
                    {"host": HOST, "nic": far})
    assert small.bottleneck.name == "ring rx->route"
    assert small.mpps == pytest.approx(3.2)
    big = predict(SEGMENTS, [Crossing("rx", "route", 1.0, 100.0, ring_size=1024)], place,
                  {"host": HOST, "nic": far})
    assert big.bottleneck.name == "nic core 0"


def test_the_clock_a_core_needs_for_a_line_rate():
    # 100 Gb/s of 1500 B packets (1538 B on the wire): 8,127,438 packets/s (the LSO seed's
    # figure); 18 instructions each at one a cycle: 146.3 MHz; at two a cycle: 73.1 MHz.
    assert clock_needed_mhz(18, 1.0, 100, 1538) == pytest.approx(146.29, abs=0.01)
    assert clock_needed_mhz(18, 2.0, 100, 1538) == pytest.approx(73.15, abs=0.01)


def test_the_cmp_nic_presets_give_the_active_nic_seeds_figure_4_shape():
    # A Filter of 40 ns and an Aggregate of 100 ns a tuple (F = 0.4 A), nothing crossing.
    # Host only: 140 ns. Filter on k NIC cores at 1/10: max(40 / (0.1 k), 100):
    # k=1 400 ns (0.35x), 2: 200 (0.7x), 3: 133.3 (1.05x), 4: 100 (1.4x, balanced).
    # At 1/5: k=1 200 (0.7x), k=2 100 (1.4x, balanced), then the host bounds it: 1.4x.
    segs = [Segment("filter", {"integer": 40.0}), Segment("aggregate", {"integer": 100.0})]
    host = profile.load("host")
    only = Placement({"filter": "host", "aggregate": "host"}, {"filter": (0,), "aggregate": (0,)})
    want = {"cmp-nic-200": [0.35, 0.7, 1.05, 1.4], "cmp-nic-400": [0.7, 1.4, 1.4, 1.4]}
    for name, speedups in want.items():
        profiles = {"host": host, "nic": profile.load(name)}
        base = predict(segs, [], only, profiles).mpps
        got = [predict(segs, [], Placement({"filter": "nic", "aggregate": "host"},
                                           {"filter": tuple(range(k)), "aggregate": (0,)}),
                       profiles).mpps / base for k in range(1, 5)]
        assert got == pytest.approx(speedups), name


def test_the_search_finds_the_best_split_and_folds_alike_ones():
    # tests/progs.two_segment: rx (seta) on the NIC, app (reada, readb, out) on the host.
    # Costs: seta 100 ns, reada 10 ns; nothing crosses but one message of 0 B per packet.
    # Both sides have 2 cores; the NIC's are half as fast. By hand:
    #   rx host[0,1] + app nic[0]: host cores 50 ns each, NIC 10/0.5 = 20 ns -> 20 Mpps;
    #   (segments of one device share no core but core 0 all together)
    #   rx host[0] + app host[1]: 100 ns -> 10 Mpps, the lowest latency at 10 (0.11 us);
    #   rx nic[0,1] + app host: 100/0.5/2 = 100 ns -> 10 Mpps too, but 1.21 us.
    # app nic[0,1] also gives 20 Mpps with more cores: folded into the first.
    g = compile_program(two_segment())
    cal = Calibration(
        program="two", packets=1000, frame_bytes=64.0, source_ns=0.0, loops=(("rx", 0.0),),
        elements=(ElementCost("seta", "rx", "integer", 1.0, 100.0),
                  ElementCost("reada", "app", "integer", 1.0, 10.0)),
        queues=(QueueCost("rx->app", "rx", "app", 1.0, 0.0),))
    host = replace(HOST, cores=2)
    nic = replace(NIC, cores=2, speed={"integer": 0.5, "lookup": 0.5, "hash": 0.5})
    ranked = rank(g, cal, {"host": host, "nic": nic})
    best = ranked[0]
    assert dict(best.placement.devices) == {"rx": "host", "app": "nic"}
    assert dict(best.placement.cores) == {"rx": (0, 1), "app": (0,)}
    assert best.prediction.mpps == pytest.approx(20.0)
    assert best.alike == 1
    assert best.settings == ("rx.device=host", "rx.cores=0,1", "app.device=nic")
    second = ranked[1]
    assert second.prediction.mpps == pytest.approx(10.0)
    assert second.prediction.latency_us == pytest.approx(0.11)
    assert dict(second.placement.cores) == {"rx": (0,), "app": (1,)}


def _two_cal(seta: float, rx: float, reada: float, app: float, src: float) -> Calibration:
    """A calibration of tests.progs.two_segment: seta's and reada's ns per visit, the
    loops of rx and app and the reading, per packet read."""
    return Calibration(
        program="two", packets=1000, frame_bytes=64.0, source_ns=src,
        loops=(("app", app), ("rx", rx)),
        elements=(ElementCost("seta", "rx", "integer", 1.0, seta),
                  ElementCost("reada", "app", "integer", 1.0, reada)),
        queues=(QueueCost("rx->app", "rx", "app", 1.0, 0.0),))


def _rx_on_a_half_speed_nic(cal: Calibration) -> dict[str, float]:
    """The core stages (ns per packet read) of two_segment with rx on a NIC core at half
    this host's speed and app on the host, from `cal`."""
    g = compile_program(two_segment())
    nic = replace(NIC, speed={"integer": 0.5, "lookup": 0.5, "hash": 0.5})
    place = Placement({"rx": "nic", "app": "host"}, {"rx": (0,), "app": (0,)})
    p = rank(g, cal, {"host": HOST, "nic": nic}, [place])[0].prediction
    return {s.name: s.ns for s in p.stages if "core" in s.name}


def test_each_segment_is_charged_its_own_loop():
    # seta 100 ns in rx, reada 10 ns in app; their loops (the calibration's, per packet
    # read): rx 60 ns (the source's batches), app 20. rx on a NIC core at half speed:
    # (100 + 60) / 0.5 = 320 ns -> 3.125 Mpps; app on the host: 10 + 20 = 30 ns.
    # (Shared by packets taken, 40 each, rx would be 280 ns: 3.57 Mpps.)
    cal = _two_cal(seta=100, rx=60, reada=10, app=20, src=0)
    assert _rx_on_a_half_speed_nic(cal) == pytest.approx(
        {"nic core 0": 320.0, "host core 0": 30.0})
    assert cal.overhead_ns == pytest.approx(80.0)


def test_a_slow_calibration_run_among_three_does_not_move_the_prediction():
    # Three timed runs of one program; the second ran while neighbours held the CPU:
    # seta 100, 160, 104 ns; rx's loop 60, 90, 58; reada 10, 16, 9; app's loop 20, 30,
    # 21; the reading 80, 120, 78. The medians are seta 104, rx 60, reada 10, app 21:
    # rx on a NIC core at half speed (104 + 60) / 0.5 = 328 ns, app on the host
    # 10 + 21 = 31 ns, the reading 80 (the means would give 381.3 ns, 35.3 and 92.7).
    cal = median([_two_cal(100, 60, 10, 20, 80), _two_cal(160, 90, 16, 30, 120),
                  _two_cal(104, 58, 9, 21, 78)])
    assert _rx_on_a_half_speed_nic(cal) == pytest.approx(
        {"nic core 0": 328.0, "host core 0": 31.0})
    assert cal.source_ns == pytest.approx(80.0)


def test_the_slowed_devices_segments_take_the_slowed_calibration():
    # Not slowed: seta 100 ns, rx's loop 60, reada 10, app's loop 20. Under the
    # profile's slow-down (the spins' lost caches): seta 150, rx's loop 90, reada 30,
    # app's loop 50. With rx on a NIC core at half speed, rx takes the slowed figures:
    # (150 + 90) / 0.5 = 480 ns; app stays on the host with its own: 10 + 20 = 30 ns.
    # (Warm throughout: 320 and 30; slowed throughout: 480 and 80.)
    warm = _two_cal(seta=100, rx=60, reada=10, app=20, src=5)
    slowed = _two_cal(seta=150, rx=90, reada=30, app=50, src=7)
    both = warm.with_segments(slowed, {"rx"})
    assert _rx_on_a_half_speed_nic(both) == pytest.approx(
        {"nic core 0": 480.0, "host core 0": 30.0})
    assert both.source_ns == 5.0  # the reading is not the segments'


def test_a_crossing_between_two_threads_costs_each_end_its_extra():
    # rx on the NIC, route on the host; half the packets cross (0.5 a packet read), each
    # entry costing its producer 100 ns more and its consumer 40 ns more than in one
    # thread. NIC core (integer speed 0.2): 40/0.2 + 0.5*100/0.2 = 200 + 250 = 450 ns.
    # Host core: 60 + 0.5*40 = 80 ns. Latency: 450 + 80 + 0.5*1000 (the link's 1 us) +
    # 100*8/40 = 1030 + 20 = 1050 ns.
    x = Crossing("rx", "route", 0.5, 100.0, push_ns=100.0, pop_ns=40.0)
    p = predict(SEGMENTS, [x], _place(("nic", (0,)), ("host", (0,))), PROFILES)
    stages = {s.name: s.ns for s in p.stages}
    assert stages["nic core 0"] == pytest.approx(450.0)
    assert stages["host core 0"] == pytest.approx(80.0)
    assert p.latency_us == pytest.approx(1.05)
    # rx over two NIC cores: each takes half of its 450 ns.
    two = predict(SEGMENTS, [x], _place(("nic", (0, 1)), ("host", (0,))), PROFILES)
    assert {s.name: s.ns for s in two.stages}["nic core 1"] == pytest.approx(225.0)


def test_a_crossing_within_one_thread_costs_nothing_more():
    # Both on host core 0: the calibration's own rings, 40 + 60 = 100 ns. On two host
    # cores: rx 40 + 100 = 140 ns, route 60 + 40 = 100 ns (another thread, same device).
    x = Crossing("rx", "route", 1.0, 100.0, push_ns=100.0, pop_ns=40.0)
    one = predict(SEGMENTS, [x], _place(("host", (0,)), ("host", (0,))), PROFILES)
    assert {s.name: s.ns for s in one.stages} == pytest.approx({"host core 0": 100.0})
    two = predict(SEGMENTS, [x], _place(("host", (0,)), ("host", (1,))), PROFILES)
    assert {s.name: s.ns for s in two.stages} == pytest.approx(
        {"host core 0": 140.0, "host core 1": 100.0})


def test_the_crossing_fit_and_its_probe_readings():
    # Points (0, 10), (100, 30), (200, 50): the line 10 + 0.2 x; at 50 B: 20 ns. A line
    # that falls below zero is priced 0. One point: flat.
    line = crossing.fit([(0, 10), (100, 30), (200, 50)])
    assert (line.at0, line.per_byte) == pytest.approx((10.0, 0.2))
    assert line.ns(50) == pytest.approx(20.0)
    assert crossing.Line(-10.0, 0.1).ns(50) == 0.0
    assert crossing.fit([(80, 7.0)]) == crossing.Line(7.0, 0.0)
    # A probe's stats: 1,000 packets; the producer (slowed 10x) busy 5 ms: its loop 400
    # us, its copies 30 us, the rest its reading and its spins -> 400 ns and 30; the
    # consumer's sink 50 us of work, its loop 200 us, its copies 60 us -> 250 ns and 60;
    # 80,000 B in 1,000 entries -> 80 B.
    stats = {"nic": {"cores": [{"segment": "a", "pkts_in": 1000, "busy_cpu_ns": 5_000_000,
                                "work_ns": 0, "loop_ns": 400_000, "dilated_ns": 3_600_000,
                                "copy_ns": 30_000,
                                "elements": {"rx": {"in": 1000, "ns": 1_000_000}},
                                "queues": [{"side": "out", "bytes": 80_000, "pushed": 1000}]}]},
             "host": {"cores": [{"segment": "b", "pkts_in": 1000, "busy_cpu_ns": 250_000,
                                 "work_ns": 50_000, "loop_ns": 200_000, "copy_ns": 60_000,
                                 "elements": {}, "queues": []}]}}
    assert crossing.sides(stats) == pytest.approx((80.0, 400.0, 250.0, 30.0, 60.0))


def test_under_a_profile_the_producers_extra_is_over_the_slowed_thread(monkeypatch):
    # Probe readings (ns a packet; entries of 100 B at every size), one thread: the
    # producer 100, the consumer 50; split under the profile: 400 and 90; one thread
    # slowed: 300 and 70. The producer's extra is over the slowed thread (as the device's
    # segments are calibrated): 400 - 300 = 100; the consumer's over the thread not
    # slowed (the host's segments'): 90 - 50 = 40. Without a profile: 300 and 40.
    from types import SimpleNamespace
    readings = {("host", False, "nic"): (100, 50), ("nfp-4000", True, "nic"): (400, 90),
                ("host", True, "nic"): (400, 90), ("nfp-4000", False, "host"): (300, 70)}

    def fake_run(b, o):
        prod, cons = readings[(o.profile, b.split, o.slowed)]
        return SimpleNamespace(ok=True, errors=[], stats={
            "nic": {"cores": [{"segment": "a", "pkts_in": 10, "work_ns": 0,
                               "loop_ns": prod * 10,
                               "queues": [{"side": "out", "bytes": 1000, "pushed": 10}]}]},
            "host": {"cores": [{"segment": "b", "pkts_in": 10, "work_ns": 0,
                                "loop_ns": cons * 10}]}})

    monkeypatch.setattr(crossing, "build_for", lambda p, o: SimpleNamespace(
        split=p.segments["a"].device == "nic"))
    monkeypatch.setattr(crossing, "run", fake_run)
    slowed = crossing.measure(repeats=1, profile="nfp-4000")
    assert [x for p in slowed.points for x in p[1:3]] == pytest.approx([100.0, 40.0] * 3)
    plain = crossing.measure(repeats=1)
    assert [x for p in plain.points for x in p[1:3]] == pytest.approx([300.0, 40.0] * 3)


def test_the_calibration_prices_each_queue_by_its_geometry():
    # rx->route carries 200 B a packet read in 0.5 entries: 400 B an entry; the crossing
    # of its geometry (batch 32, ring 1024): push 10 + 0.5 x 400 = 210, pop 20 + 0 = 20.
    line = crossing.CrossingCost(32, 1024, crossing.Line(10, 0.5), crossing.Line(20, 0.0), ())
    other = crossing.CrossingCost(8, 1024, crossing.Line(999, 0), crossing.Line(999, 0), ())
    cal = Calibration(program="t", packets=1000, frame_bytes=100.0,
                      elements=(ElementCost("e", "rx", "integer", 1.0, 10.0),),
                      queues=(QueueCost("q", "rx", "route", 0.5, 200.0, 32, 1024),),
                      source_ns=0.0, loops=(("rx", 0.0),), crossings=(other, line))
    _, xs = model_inputs(cal)
    assert (xs[0].push_ns, xs[0].pop_ns) == pytest.approx((210.0, 20.0))
    _, bare = model_inputs(replace(cal, crossings=()))
    assert (bare[0].push_ns, bare[0].pop_ns) == (0.0, 0.0)


def test_copies_are_charged_at_this_hosts_speed_on_any_device():
    # rx: seta 100 ns, its loop 60, its copies (into the ring to app) 40; app: reada 10,
    # its loop 20, its copies (out of the ring) 30. rx on a NIC core at half speed:
    # (100 + 60) / 0.5 + 40 = 360 ns (the copies are the emulated DMA's, not the core's
    # work: scaled they would give 400); app on the host: 10 + 20 + 30 = 60 ns.
    cal = replace(_two_cal(seta=100, rx=60, reada=10, app=20, src=0),
                  copies=(("app", 30.0), ("rx", 40.0)))
    assert _rx_on_a_half_speed_nic(cal) == pytest.approx(
        {"nic core 0": 360.0, "host core 0": 60.0})
    assert cal.overhead_ns == pytest.approx(150.0)  # loops 80, copies 70


def test_a_crossings_copies_extra_is_not_scaled_its_loops_is():
    # rx on the NIC (integer speed 0.2), route on the host; every packet crosses (1.0 a
    # packet read). Per entry the producer's loop pays 10 ns more and its copies 50 ns
    # more than in one thread; the consumer's loop 4 more, its copies 30 more.
    # NIC core: 40/0.2 + 10/0.2 + 50 = 200 + 50 + 50 = 300 ns (were the copies scaled:
    # 500). Host core: 60 + 4 + 30 = 94 ns.
    x = Crossing("rx", "route", 1.0, 100.0, push_ns=10.0, pop_ns=4.0, push_copy_ns=50.0,
                 pop_copy_ns=30.0)
    p = predict(SEGMENTS, [x], _place(("nic", (0,)), ("host", (0,))), PROFILES)
    stages = {s.name: s.ns for s in p.stages}
    assert stages["nic core 0"] == pytest.approx(300.0)
    assert stages["host core 0"] == pytest.approx(94.0)


def test_the_calibration_keeps_each_segments_copies_apart_from_its_loop():
    # rx's turns: 150 us outside its bodies, 70 us of it copying; app's 40 us, 25 of it
    # copying (copy_ns is counted apart: loop_ns is the rest) over 1000 packets read.
    g = compile_program(two_segment("host"))
    stats = {"host": {"cores": [
        {"segment": "rx", "cpu": 0, "pkts_in": 1000, "bytes_in": 64_000, "cpu_ns": 1,
         "timer_ns": 0.0, "loop_ns": 80_000, "copy_ns": 70_000, "queues": [],
         "elements": {"src": {"in": 1000, "ns": 5_000}, "seta": {"in": 1000, "ns": 9_000}}},
        {"segment": "app", "cpu": 0, "pkts_in": 1000, "bytes_in": 64_000, "cpu_ns": 1,
         "timer_ns": 0.0, "loop_ns": 15_000, "copy_ns": 25_000, "queues": [],
         "elements": {"reada": {"in": 1000, "ns": 2_000}}}]}}
    cal = from_stats(g, stats, {})
    assert dict(cal.loops) == pytest.approx({"rx": 80.0, "app": 15.0})
    assert dict(cal.copies) == pytest.approx({"rx": 70.0, "app": 25.0})
    assert cal.segment_ns("rx") == pytest.approx({"integer": 9.0 + 80.0, "copy": 70.0})
    # a slowed calibration's segments bring their copies along
    slowed = replace(cal, copies=(("app", 99.0), ("rx", 77.0)))
    assert dict(cal.with_segments(slowed, {"rx"}).copies) == pytest.approx(
        {"rx": 77.0, "app": 25.0})


def test_validation_sets_each_measured_thread_beside_its_stage():
    # Placement: rx on nic core 0, route on host core 0. The measured threads: the NIC's
    # running rx (300 ns a packet read), the host's running route (90 ns).
    from offlow.planner.search import Ranked
    from offlow.planner.validate import Check
    place = _place(("nic", (0,)), ("host", (0,)))
    pred = predict(SEGMENTS, [Crossing("rx", "route", 1.0, 100.0)], place, PROFILES)
    c = Check(Ranked(place, pred, ()), 3.0,
              {("nic", frozenset({"rx"})): 300.0, ("host", frozenset({"route"})): 90.0})
    assert c.stages() == [("host core 0 (route)", 60.0, 90.0), ("nic core 0 (rx)", 200.0, 300.0),
                          ("link nic->host", 20.0, None), ("nic DMA", 40.0, None)]


def test_validation_pools_its_rounds_time_not_their_median_error():
    # Three rounds of one placement, predicted and measured ns per packet read: 100/100,
    # 100/100, then 100/400 (the machine slowed the measured run). Pooled: 100 ns
    # predicted (10 Mpps), 200 measured (5 Mpps), error +100%; the median round would
    # say 0%. The NIC thread's 100, 100, 400 ns average to 200; the host's stage's 25,
    # 50, 75 to 50 and the latencies 1, 2, 6 us to 3.
    from offlow.planner.model import Prediction, Stage
    from offlow.planner.search import Ranked
    from offlow.planner.validate import Check, pooled
    place = _place(("nic", (0,)), ("host", (0,)))
    nic = ("nic", frozenset({"rx"}))
    def round_(pred_ns: float, other_ns: float, meas_ns: float, lat: float) -> Check:
        pred = Prediction((Stage("nic core 0", pred_ns), Stage("host core 0", other_ns)), lat)
        return Check(Ranked(place, pred, ()), 1e3 / meas_ns, {nic: meas_ns},
                     device_ns=(pred_ns / 2, pred_ns))
    rounds = [round_(100, 25, 100, 1.0), round_(100, 50, 100, 2.0), round_(100, 75, 400, 6.0)]
    assert [c.error for c in rounds] == pytest.approx([0.0, 0.0, 3.0])
    c = pooled(rounds)
    assert (c.predicted_mpps, c.measured_mpps, c.error) == pytest.approx((10.0, 5.0, 1.0))
    assert c.rounds == pytest.approx((0.0, 0.0, 3.0))
    assert [(s.name, s.ns) for s in c.ranked.prediction.stages] == [
        ("nic core 0", pytest.approx(100.0)), ("host core 0", pytest.approx(50.0))]
    assert c.ranked.prediction.latency_us == pytest.approx(3.0)
    assert c.threads == {nic: pytest.approx(200.0)}
    assert c.device_ns == pytest.approx((50.0, 100.0))
    # where the slowest stage moves between rounds, each round's own slowest counts:
    # 100 then 300 ns predicted (the host's stage in the second) pool to 200 ns, 5 Mpps
    c = pooled([round_(100, 50, 100, 1.0), round_(100, 300, 100, 1.0)])
    assert c.predicted_mpps == pytest.approx(5.0)


def test_the_calibration_takes_each_segments_loop_from_its_own_turns():
    # 1000 packets read by src; rx's turns spent 150 us outside its bodies, app's 40 us
    # (on its 1000 packets): 150 and 40 ns a packet read, 190 in all. seta 20 us in
    # 1000 visits less the 2 ns timer: 18 ns a visit.
    g = compile_program(two_segment("host"))
    def core(seg: str, loop: int, elements: dict) -> dict:
        return {"segment": seg, "cpu": 0, "pkts_in": 1000, "bytes_in": 64_000, "cpu_ns": 1,
                "timer_ns": 2.0, "loop_ns": loop, "elements": elements, "queues": []}
    stats = {"host": {"cores": [
        core("rx", 150_000, {"src": {"in": 1000, "ns": 50_000},
                             "seta": {"in": 1000, "ns": 20_000}}),
        core("app", 40_000, {"reada": {"in": 1000, "ns": 2_000}})]}}
    cal = from_stats(g, stats, {})
    assert dict(cal.loops) == pytest.approx({"rx": 150.0, "app": 40.0})
    assert cal.overhead_ns == pytest.approx(190.0)
    assert cal.source_ns == pytest.approx(50.0)
    assert {e.name: e.ns for e in cal.elements} == pytest.approx({"seta": 18.0, "reada": 0.0})
    del stats["host"]["cores"][1]["loop_ns"]  # a run without --profile counts no loops
    with pytest.raises(OfflowError, match="counted no loop time"):
        from_stats(g, stats, {})


def test_the_crossing_extra_is_the_median_of_each_rounds_own_difference(monkeypatch):
    # Each round's split run less the one-thread run beside it in time, then the
    # median: a round whose two runs both ran slow (this machine's speed moves between
    # seconds) does not make the extra. One thread reads 100, 300, 200 ns a side in
    # three rounds, split 110, 310, 600: the rounds' extras are 10, 10, 400 (median
    # 10); the difference of the medians would be 310 - 200 = 110.
    one, split = iter([100.0, 300.0, 200.0]), iter([110.0, 310.0, 600.0])
    order = []

    class Done:
        ok, errors, stats = True, [], {}

    monkeypatch.setattr(crossing, "build_for", lambda prog, opts: prog)
    monkeypatch.setattr(crossing, "run", lambda b, opts: (order.append(b), Done())[1])

    def sides(stats):
        ns = next(split if order[-1].segments["a"].device == "nic" else one)
        return 80.0, ns, ns, ns / 10, ns / 5

    monkeypatch.setattr(crossing, "sides", sides)
    cost = crossing.measure(repeats=3, sizes=(64,), packets=1_000)
    # (the copies alike: a tenth and a fifth of each reading, 1, 1, 40 and 2, 2, 80)
    assert cost.points[0] == pytest.approx((80.0, 10.0, 10.0, 1.0, 2.0))



def _report_of(x: crossing.CrossingCost) -> list[str]:
    """The lines of `offlow plan`'s report from its crossing calibration on."""
    cal = Calibration(program="t", packets=1000, frame_bytes=100.0, elements=(), queues=(),
                      source_ns=0.0, loops=(("rx", 0.0),), crossings=(x,))
    text = format_plan(PlanRequest(Path("t.py"), "nic"), cal, PROFILES, [])
    lines = text.splitlines()
    at = next(k for k, line in enumerate(lines) if "crossing calibration" in line)
    return lines[at:lines.index("", at)]


def test_crossing_points_below_zero_are_shown_as_measured_with_what_they_are():
    """A split run that measured faster than one thread (a loaded machine's noise) gives
    points below 0 (bytes, push, pop, push copies, pop copies; shown push+copies/pop+copies):
    `offlow plan` shows them as the fit took them and says what they are (before
    2026-11-28 they were printed without a word); points at or above 0 get no note."""
    noisy = crossing.CrossingCost(32, 1024, crossing.fit([(64, -12), (1500, 30)]),
                                  crossing.fit([(64, 5), (1500, 9)]),
                                  ((64.0, -12.0, 5.0, 3.0, -1.0), (1500.0, 30.0, 9.0, 4.0, 2.0)))
    assert _report_of(noisy) == [
        "  crossing calibration (batch 32, ring 1024; push/pop ns per entry, loop + copies, "
        "medians): 64 B -12+3/5-1, 1500 B 30+4/9+2",
        "    (below 0: the split run measured faster than one thread there, this machine's "
        "noise (a loaded machine's); the lines fitted through these points, which price the "
        "queues above, are never below 0)"]
    assert noisy.push.ns(64) == 0.0  # (what the note says of the line)
    quiet = replace(noisy, points=((64.0, 12.0, 5.0, 0.0, 1.0),))
    assert _report_of(quiet) == ["  crossing calibration (batch 32, ring 1024; push/pop ns "
                                 "per entry, loop + copies, medians): 64 B 12+0/5+1"]
