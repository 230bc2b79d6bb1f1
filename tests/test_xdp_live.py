"""Live counters of an xdp run (runtime/tools/xdp_run.c answers the window's stats
requests as every device process does, docs/metrics.md): read while it runs they
rise, the last copy is the run's exit stats, and `offlow stats WINDOW` and the
progress line of `offlow run` show them. Root: the run makes its own namespace and
veth pair."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from offlow import Program, Shared, SharedMap, Sink, Source, live
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.errors import OfflowError
from offlow.runner import Run, RunOptions
from tests.e2e import ROOT, window_in
from tests.programs.flow_counts import FIVE_TUPLE, FlowCount
from tests.programs.xdp_proto_tally import LENGTHS, ProtoTally
from tests.test_xdp import XDP_TTL, needs_bpf

LIVE_ONLY = ("live_seq", "live_final", "now_ns")  # what a live copy adds to the stats
XDP_TTL_SPLIT = ROOT / "tests" / "programs" / "xdp_ttl_split.py"


def _frames_in(stats: dict[str, Any]) -> int:
    """Packets the xdp process's first element after the source (`frames`) took in."""
    return int(stats["xdp"]["cores"][0]["elements"].get("frames", {}).get("in", 0))


def _read_until(window: Path, check) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """live.read until `check(stats)` holds (no timing is asserted: only that it does).
    A process answers once its program is loaded and attached: until then the read
    says none has started, and is made again."""
    end = time.monotonic() + 60
    while True:
        try:
            stats = live.read(window, timeout=2.0)
        except OfflowError as e:
            if "none has started" not in str(e) or time.monotonic() > end:
                raise
            stats = {}
        if "xdp" in stats and check(stats):
            return stats
        assert time.monotonic() < end, f"never: {stats}"
        time.sleep(0.1)


@needs_bpf
def test_an_xdp_runs_counters_rise_while_it_runs_and_its_last_copy_is_its_exit_stats() -> None:
    """A user-style program on xdp at 2,000 packets/s, running until the test has read
    it twice (so a loaded machine cannot end it first): a first live read and a later
    one, the later larger; once stopped and ended, its last copy (live_final) holds
    exactly the stats the run reports at exit."""
    b = build(load_program(XDP_TTL, ["edge.device=xdp"]))
    r = Run(b, RunOptions(count=1_000_000, rate=2000, timeout=120))
    r.start()
    try:
        first = _read_until(r.window, lambda s: _frames_in(s) > 0)
        assert not first["xdp"].get("live_final")
        later = _read_until(r.window, lambda s: _frames_in(s) > _frames_in(first))
        assert _frames_in(later) > _frames_in(first) > 0
        r.stop()
        end = time.monotonic() + 60
        while r.procs["xdp"].poll() is None:  # (the run folder stays until wait())
            assert time.monotonic() < end
            time.sleep(0.05)
        final = live.read(r.window, timeout=2.0)["xdp"]
    finally:
        res = r.wait()
    assert res.ok, res.errors
    assert final["live_final"] == 1
    assert {k: v for k, v in final.items() if k not in LIVE_ONLY} == res.stats["xdp"]
    assert _frames_in(res.stats) >= _frames_in(later)


def _pushed(stats: dict[str, Any]) -> int:
    """Entries the xdp process pushed into its queues to the host (the AF_XDP crossing)."""
    return sum(int(q["pushed"]) for q in stats["xdp"]["cores"][0]["queues"])


@needs_bpf
def test_an_xdp_runs_crossing_to_the_host_is_counted_live_beside_the_host() -> None:
    """The program split after the TTL (xdp, then the host over AF_XDP) at 2,000
    packets/s until the test has read it twice: a live read answers for both
    processes, and the xdp process's pushes into its queue to the host rise between two
    reads."""
    b = build(load_program(XDP_TTL_SPLIT, ["edge.device=xdp"]))
    r = Run(b, RunOptions(count=1_000_000, rate=2000, timeout=120))
    r.start()
    try:
        first = _read_until(r.window, lambda s: _pushed(s) > 0)
        later = _read_until(r.window, lambda s: _pushed(s) > _pushed(first))
    finally:
        r.stop()
        res = r.wait()
    assert res.ok, res.errors
    assert set(later) == set(res.stats) == {"xdp", "host"}
    assert _pushed(later) > _pushed(first) > 0


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every sample `name` of a Prometheus text, parsed by prometheus-client."""
    return {tuple(sorted(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == name}


def _xdp_packets(text: str) -> dict[str, float]:
    """offlow_element_packets_total of the xdp device's elements, by element."""
    packets = _samples(text, "offlow_element_packets_total")
    return {dict(k)["element"]: v for k, v in packets.items() if dict(k)["device"] == "xdp"}


@needs_bpf
def test_offlow_stats_and_the_progress_line_show_an_xdp_runs_counters(tmp_path: Path) -> None:
    """`offlow run` of the program on xdp as a user runs it (12 s at 2,000 packets/s):
    `offlow stats WINDOW` prints its elements' packets, and a progress line (every 5 s)
    says how many packets were read."""
    run = subprocess.Popen([sys.executable, "-m", "offlow.cli", "run", str(XDP_TTL),
                            "--set", "edge.device=xdp", "--duration", "12", "--rate", "2000",
                            "--window-file", str(tmp_path / "window.json")],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stderr is not None
        window = window_in(run, tmp_path / "window.json")
        # (a process answers once its program is loaded and attached: until then
        # `offlow stats` says none has started; its first answers may come before a
        # packet: asked again until one counts some, or the run ends)
        end = time.monotonic() + 60
        while True:
            stats = subprocess.run([sys.executable, "-m", "offlow.cli", "stats", window],
                                   cwd=ROOT, capture_output=True, text=True, timeout=120)
            if stats.returncode == 0 and _xdp_packets(stats.stdout).get("frames", 0) > 0:
                break
            if ("none has started" not in stats.stderr and stats.returncode != 0) or \
                    time.monotonic() > end:
                break
            time.sleep(0.2)
        rest = run.stderr.read()
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, rest
    assert stats.returncode == 0, stats.stderr
    assert _xdp_packets(stats.stdout).get("frames", 0) > 0, stats.stdout
    progress = re.search(r"offlow: running, \d+ of 12 s: ([\d,]+) packets read", rest)
    assert progress, rest
    assert int(progress.group(1).replace(",", "")) > 0


def _tally_and_flows() -> Program:
    """A user's program on xdp with both kinds of table: ProtoTally's shared arrays
    (per-CPU array maps) and FlowCount's hash map of flows (a BPF hash map)."""
    p = Program("xdp_tally_flows")
    wire, frames, v4 = Source("wire"), ParseEth("frames"), CheckIPv4("v4")
    tally = ProtoTally("tally", per_proto=Shared("protos", "uint64_t", 8),
                       per_len=Shared("lengths", "uint32_t", LENGTHS),
                       budget=Shared("budget", "int32_t", 1), tiny=Shared("tiny", "uint8_t", 4))
    count = FlowCount("count", seen=SharedMap("flows", FIVE_TUPLE, "uint64_t", 4096))
    back, rest = Sink("back"), Discard("rest")
    wire >> frames
    frames["ipv4"] >> v4 >> tally >> count >> back
    frames["ipv6"] >> rest
    frames["other"] >> rest
    p.segment("edge", [wire, frames, v4, tally, count, back, rest], device="xdp", cores=[0])
    return p


def _flows(stats: dict[str, Any]) -> int:
    return int(stats["xdp"]["tables"]["flows"]["items"])


@needs_bpf
def test_an_xdp_runs_counters_only_reads_carry_no_elements_and_reads_of_tables_do() -> None:
    """As a generated process answers (live.h's OFL_LIVE_TABLES): a counters-only live
    read of the xdp process has each shared array as its length and the hash map's
    counters without pairs; a read of the tables has the arrays' elements and every
    pair; the last copy has them too."""
    r = Run(build(_tally_and_flows()), RunOptions(count=1_000_000, rate=2000, timeout=120))
    r.start()
    try:
        counters = _read_until(r.window, lambda s: _flows(s) > 0)["xdp"]["tables"]
        assert counters["lengths"] == {"kind": "array", "length": LENGTHS}
        assert counters["protos"] == {"kind": "array", "length": 8}
        assert set(counters["flows"]) == {"kind", "items", "entries", "full"}
        assert counters["flows"]["entries"] == 4096
        whole = live.read(r.window, timeout=30, tables=True)["xdp"]["tables"]
        assert isinstance(whole["lengths"], list) and len(whole["lengths"]) == LENGTHS
        assert sum(whole["protos"][:4]) > 0
        assert len(whole["flows"]["pairs"]) == whole["flows"]["items"] >= _flows(
            {"xdp": {"tables": counters}})
        r.stop()
        end = time.monotonic() + 60
        while r.procs["xdp"].poll() is None:  # (the run folder stays until wait())
            assert time.monotonic() < end
            time.sleep(0.05)
        final = live.read(r.window, timeout=2.0)["xdp"]["tables"]
    finally:
        r.stop()  # (again: a failed check above must not leave it running to its timeout)
        res = r.wait()
    assert res.ok, res.errors
    assert final == res.stats["xdp"]["tables"]
    assert len(final["flows"]["pairs"]) == final["flows"]["items"] > 0
