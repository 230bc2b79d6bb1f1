"""Hot reload (offlow/reload.py, `offlow reload`, docs/reload.md): a running program's
segments take the code of a new build of a compatible program between two batches,
keeping their tables and every packet.

The program (tests/programs/reload_mark.py) stamps each packet's TTL with a mark on
the NIC and counts packets by mark on the host. Under traffic, a reload of the host's
code loses nothing (packets in = packets out + counted drops; the tables read the same
before and after; the counts, kept across the swap, add up to every packet out), and a
reload of the NIC's code shows in the output: the packets, read back with dpkt, carry
the old mark up to one point and the new mark after it, none lost or duplicated. Each
refusal (a program that does not compile, another table, another queue layout, a
window that is not running) is one clear error, and the program runs on untouched."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import Handler
from offlow.build import plan_program, reload_object
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.layout import describe, differences
from offlow.reload import description_path, reload
from offlow.runner import Run, RunOptions, RunResult, build_for
from offlow.session import attach
from tests.programs import reload_mark

PROGRAM = Path(reload_mark.__file__)
SHIFT = [0, 11, 22, 33, 44]  # the control plane's values (shift[0] = 0 keeps the mark)


def _options(out: Path) -> RunOptions:
    """Traffic for up to a minute: each test stops the run (cleanly: the sources end,
    the queues drain) once it has seen what it needs."""
    return RunOptions(duration=60.0, rate=15000, output=out, count=1000, seed=3)


def _stop(run: Run) -> RunResult:
    run.stop()
    return run.wait()


def _ready(o: RunOptions, *variants: dict[str, Any]) -> None:
    """Build each variant and its reload objects before the run (the reload under test
    then only checks and sends)."""
    for kw in variants:
        b = build_for(reload_mark.program(**kw), o)
        for d in b.plan.devices:
            reload_object(b, d.name)


def _wait_for_packets(window: Path, mark: int, beyond: int = 0) -> int:
    """Wait until the host has counted more than `beyond` packets of `mark`; the count."""
    deadline = time.monotonic() + 60
    with attach(window) as a:
        while (n := int(a.tables["seen_by_mark"][mark])) <= beyond:
            assert time.monotonic() < deadline, f"no more packets of mark {mark} (have {n})"
            time.sleep(0.05)
    return n


def _set_shift(window: Path) -> list[int]:
    with attach(window) as a:
        for i, v in enumerate(SHIFT):
            a.tables["shift"][i] = v
        return _tables(a)


def _tables(a: Any) -> list[int]:
    return [int(a.tables["shift"][i]) for i in range(len(SHIFT))]


@contextmanager
def _running(o: RunOptions, **kw: Any) -> Iterator[Run]:
    run = Run(build_for(reload_mark.program(**kw), o), o)
    run.start()
    try:
        yield run
    except BaseException:
        run.stop()
        run.wait()
        raise


def _marks(path: Path) -> list[int]:
    with path.open("rb") as f:
        return [dpkt.ethernet.Ethernet(buf).data.ttl for _, buf in dpkt.pcap.Reader(f)]


def _accounting(res: RunResult) -> tuple[int, int, int]:
    """Packets in at the source, out at the sink, and dropped or consumed on the way
    (every element's counters and every queue instance's), from the run's stats."""
    cores = [c for dev in res.stats.values() for c in dev["cores"]]
    sin = sum(v["packets"] for c in cores for v in c["sources"].values())
    out = sum(v["packets"] for dev in res.stats.values() for v in dev["sinks"].values())
    lost = sum(e["drop"] + e["consumed"] for c in cores for e in c["elements"].values())
    lost += sum(i["dropped"] for c in cores for i in c.get("instances", []))
    return sin, out, lost


def test_reload_under_traffic_loses_no_packet_and_keeps_the_tables(tmp_path: Path) -> None:
    o = _options(tmp_path / "out.pcap")
    _ready(o, {}, {"how": "atomic"})
    with _running(o) as run:
        before = _set_shift(run.window)
        _wait_for_packets(run.window, 7)
        done = reload(run.window, reload_mark.program(how="atomic"))
        with attach(run.window) as a:
            after = _tables(a)
            at_swap = int(a.tables["seen_by_mark"][7])
        _wait_for_packets(run.window, 7, at_swap + 1000)  # counted on by the new code
        res = _stop(run)
    assert res.ok, res.errors
    assert done.reloaded == ("host",) and done.unchanged == ("nic",)
    assert before == after == SHIFT
    sin, out, lost = _accounting(res)
    assert sin > 0 and sin == out + lost
    assert lost == 0  # synthetic traffic is IPv4: nothing is discarded
    seen = res.stats["host"]["tables"]["seen_by_mark"]
    # the count, held by the process whose code was replaced, covers every packet
    assert seen[7] == out == len(_marks(o.output)) and sum(seen) == out


def test_reload_changes_the_output_from_one_batch_on(tmp_path: Path) -> None:
    o = _options(tmp_path / "out.pcap")
    _ready(o, {}, {"mark": 9})
    with _running(o) as run:
        _wait_for_packets(run.window, 7)
        done = reload(run.window, reload_mark.program(mark=9))
        _wait_for_packets(run.window, 9)
        res = _stop(run)
    assert res.ok, res.errors
    assert done.reloaded == ("nic",)
    marks = _marks(o.output)
    runs = [(m, len(list(g))) for m, g in itertools.groupby(marks)]
    # the old code's packets, then the new code's: one switch, at a batch boundary
    assert [m for m, _ in runs] == [7, 9], runs
    sin, out, lost = _accounting(res)
    assert sin == out == len(marks) and lost == 0
    seen = res.stats["host"]["tables"]["seen_by_mark"]
    assert (seen[7], seen[9]) == (runs[0][1], runs[1][1])


def test_refused_reloads_leave_the_program_running_untouched(tmp_path: Path) -> None:
    o = _options(tmp_path / "out.pcap")
    ring_256 = reload_mark.program()
    ring_256.set_queues(ring_size=256)
    _ready(o, {})
    with _running(o) as run:
        _set_shift(run.window)
        _wait_for_packets(run.window, 7)
        described = description_path(run.window).read_text()
        with pytest.raises(OfflowError, match=r"(?s)C compiler failed .*'oops' undeclared"):
            reload(run.window, reload_mark.program(mark=9, how="seen[state->ttl] += oops;"))
        with pytest.raises(OfflowError, match=r"table `shift`: running uint32_t\[5\] in "
                                              r"nic, new uint32_t\[6\] in nic"):
            reload(run.window, reload_mark.program(mark=9, shift_len=6))
        with pytest.raises(OfflowError, match=r"queue `edge->count`: running edge -> count, "
                                              r"1 ring of 1024 entries .*, new edge -> "
                                              r"count, 1 ring of 256 entries"):
            reload(run.window, ring_256)
        assert description_path(run.window).read_text() == described
        with attach(run.window) as a:
            assert _tables(a) == SHIFT
            seen = int(a.tables["seen_by_mark"][7])
        _wait_for_packets(run.window, 7, seen + 500)  # it runs on
        res = _stop(run)
    assert res.ok, res.errors
    marks = _marks(o.output)
    assert set(marks) == {7}  # the old code ran throughout
    sin, out, lost = _accounting(res)
    assert sin == out == len(marks) and lost == 0
    with pytest.raises(OfflowError, match="no such window"):  # the run has ended
        reload(run.window, reload_mark.program(mark=9))


def test_reload_command_line(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "offlow.cli", *args],
                              capture_output=True, text=True, timeout=300)

    assert "reload" in cli("--help").stdout
    assert "keeping its tables" in cli("reload", "--help").stdout.replace("\n", " ")
    nowhere = cli("reload", "/dev/shm/offlow-gone-1-00000000", str(PROGRAM))
    assert nowhere.returncode == 2
    assert nowhere.stderr.strip().splitlines() == [
        "offlow: error: /dev/shm/offlow-gone-1-00000000: no such window (the program has "
        "ended, or the path is not the one `offlow run --serve` printed)"]
    o = _options(tmp_path / "out.pcap")
    changed = tmp_path / "marked.py"
    # (and a line the C compiler warns of, which the reload shows as a run would)
    changed.write_text(PROGRAM.read_text().replace("mark: int = 7", "mark: int = 8")
                       .replace("    const uint8_t ttl =",
                                "    int spare;\n    const uint8_t ttl ="))
    _ready(o, {})
    b = build_for(load_program(changed), o)  # (its #line directives name its file)
    for d in b.plan.devices:
        reload_object(b, d.name)
    with _running(o) as run:
        _wait_for_packets(run.window, 7)
        ok = cli("reload", str(run.window), str(changed))
        _wait_for_packets(run.window, 8)
        same = cli("reload", str(run.window), str(changed))
        res = _stop(run)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "offlow: reloaded nic of `reload_mark` (host: code unchanged)"
    line = changed.read_text().splitlines().index("    int spare;") + 1
    shown = [w for w in ok.stderr.splitlines() if "spare" in w]
    assert len(shown) == 1 and shown[0].startswith(f"offlow: warning: {changed}:{line}:"), \
        ok.stderr
    assert shown[0].endswith("unused variable 'spare' [-Wunused-variable]"), shown
    assert same.stdout.strip() == "offlow: the code of `reload_mark` is unchanged: nothing to " \
                                  "reload"
    assert res.ok and set(_marks(o.output)) == {7, 8}


def test_a_program_channel_may_not_take_a_reload_channel_name() -> None:
    with pytest.raises(OfflowError, match="names starting with `reload.` are the processes'"):
        reload_mark.program().channel("reload.nic", Handler("h"))


def test_layouts_differ_by_what_a_reload_cannot_change_only() -> None:
    base = describe(plan_program(reload_mark.program()))
    # bodies and parameters are code: the same layout
    assert differences(base, describe(plan_program(reload_mark.program(mark=9, how="atomic")))) \
        == []
    moved = reload_mark.program()
    moved.apply_setting("count.cores=1")
    assert differences(base, describe(plan_program(moved))) == [
        "segment `count`: running host cores [0], elements tx, tally, new host cores [1], "
        "elements tx, tally"]  # (callees first)
