"""offlow/races.py: a shared array updated with a plain read-modify-write from two or
more threads at once is said (explain's warnings, `offlow run`'s stderr and result),
naming the table, the elements, the threads and the atomic add to write instead; one
thread, or atomic adds, say nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from offlow import Element, Program, Shared, Sink, Source
from offlow.build import plan_program
from offlow.explain import explain
from offlow.races import lost_updates


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
        "table `bytes`: `tally` updates it with a plain read-modify-write (`+=`, `++`, `|=`, "
        "...) on 2 threads at once (host core 0, host core 1): updates made at the same time "
        "are lost; in `tally` write e.g. __atomic_fetch_add(&per_bucket[i], v, "
        "__ATOMIC_RELAXED), or run its users on one core"]
    assert "warnings:\n  table `bytes`: `tally` updates it" in explain(plan)


def test_one_thread_or_atomic_adds_say_nothing() -> None:
    for plan in (plan_program(_one(Tally, [0])), plan_program(_one(Tally, [0], "nic")),
                 plan_program(_one(AtomicTally, [0, 1])), plan_program(_one(AtomicTally, [0, 1],
                                                                            "nic"))):
        assert lost_updates(plan) == []
        assert "warnings:" not in explain(plan)


def test_two_segments_on_two_threads_updating_one_array_are_said() -> None:
    """The NIC's segment and the host's each add to the array in the window."""
    p = Program("two")
    counts = Shared("bytes", "uint64_t", 8)
    src, a, b, out = Source("rx"), Tally("first", per_bucket=counts), \
        Tally("second", per_bucket=counts), Sink("tx")
    src >> a >> b >> out
    p.segment("rx", [src, a], device="nic", cores=[0])
    p.segment("app", [b, out], device="host", cores=[0])
    [w] = lost_updates(plan_program(p))
    assert w.startswith("table `bytes`: `first`, `second` update it with a plain "
                        "read-modify-write (`+=`, `++`, `|=`, ...) on 2 threads at once "
                        "(host core 0, nic core 0)")


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
    assert ("on several CPUs at once (xdp: every CPU that receives): updates made at the "
            "same time are lost; in `tally` write e.g. __atomic_fetch_add(&per_bucket[i]"
            in w), w
    assert w.endswith("on xdp an array that every element only adds to becomes one copy "
                      "per CPU, which loses nothing")
    assert lost_updates(plan_program(_one(Tally, [0], "xdp"))) == []


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
    assert ("offlow: warning: table `seen`: `t` updates it with a plain read-modify-write"
            in res.stderr)
    assert "__atomic_fetch_add(&seen[i], v, __ATOMIC_RELAXED)" in res.stdout  # (its warnings)
