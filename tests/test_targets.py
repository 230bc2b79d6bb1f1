"""Device targets as plug-ins (offlow/targets/): `offlow targets` lists them and why one
cannot run here; a placement a target refuses is a compile error naming the element,
the target and the reason; a target added to the list runs a program with nothing
else changed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from offlow import targets
from offlow.build import build, compile_program, plan_program
from offlow.cli import main
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.ir import Graph, Node, Segment
from offlow.plan import make_plan
from offlow.targets import gpu, host, nic, process, remote, xdp
from offlow.targets.nic import Nic
from tests.e2e import EXAMPLE, ROOT
from tests.example_outputs import CASES, outputs, recorded

ROUTER = ROOT / "examples" / "router.py"


def test_offlow_targets_lists_host_and_nic_as_usable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    assert "host: usable here" in out and "nic: usable here" in out
    assert "missing package `PACKAGE` (what it is for; apt-get install PACKAGE)" in out
    assert main(["targets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    xdp_why = xdp.TARGET.unusable() or ""  # (tests/test_xdp.py: its own reasons)
    gpu_why = gpu.TARGET.unusable() or ""  # (tests/test_gpu.py)
    remote_why = remote.TARGET.unusable() or ""  # (tests/test_remote.py)
    assert [(r["name"], r["usable"], r["why_not"]) for r in rows] == [
        ("host", True, ""), ("nic", True, ""), ("xdp", not xdp_why, xdp_why),
        ("gpu", not gpu_why, gpu_why), ("remote", not remote_why, remote_why)]


def test_a_nic_without_its_window_folder_says_why_and_is_not_built(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nic, "SHM", tmp_path / "no-shm")
    row = next(r for r in targets.listing() if r["name"] == "nic")
    assert not row["usable"]
    assert row["why_not"] == f"no device ({tmp_path / 'no-shm'} is not a writable folder: " \
                             "the window lives there)"
    prog = load_program(EXAMPLE)
    # still planned (what explain shows), not built
    assert [d.target for d in plan_program(prog).devices] == ["nic", "host"]
    with pytest.raises(OfflowError, match="target `nic` cannot run on this machine: no device"):
        build(prog)
    build(load_program(EXAMPLE, ["rx.device=host"]))  # the host alone still builds


def test_a_missing_compiler_is_a_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process.shutil, "which", lambda name: None)
    assert host.TARGET.unusable() == (
        "missing package `gcc` (the C compiler that builds each device's process; "
        "apt-get install gcc)")


class NoLookups(Nic):
    """A NIC that cannot run longest-prefix-match lookups, nor core groups."""

    name = "nic"

    def refuse_node(self, g: Graph, node: Node) -> str | None:
        if any(ref.startswith("routes") for _, ref in node.tables):
            return "it has no memory for LPM tables"
        return None

    def refuse_segment(self, g: Graph, segment: Segment) -> str | None:
        return "it runs no core groups" if segment.group else None


def test_a_placement_the_target_refuses_is_a_compile_error() -> None:
    g = compile_program(load_program(ROUTER))
    with pytest.raises(OfflowError) as err:
        make_plan(g, {"host": host.TARGET, "nic": NoLookups()})
    assert str(err.value) == ("element `lpm4` (LookupIPv4) cannot run on target `nic`: it has "
                              "no memory for LPM tables; place segment `route` on another "
                              "device")
    make_plan(compile_program(load_program(ROUTER, ["route.device=host"])),
              {"host": host.TARGET, "nic": NoLookups()})  # the lookups on the host: fine
    grouped = compile_program(load_program(EXAMPLE, ["rx.cores=0,1", "app.cores=0,1",
                                                     "app.group=on", "app.device=nic"]))
    with pytest.raises(OfflowError, match="segment `app` cannot run on target `nic`: it runs "
                                          "no core groups"):
        make_plan(grouped, {"nic": NoLookups()})


class SecondNic(Nic):
    """Another emulated NIC: a target named nic2, added to the list of targets only
    (which names a target's module: this one, whose TARGET it is)."""

    name = "nic2"


TARGET = SecondNic()


@pytest.mark.parametrize("case", ["ttl_pipeline-tls", "router-synthetic"])
def test_a_target_added_to_the_list_runs_programs_unchanged(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Placed on a target that only the list of targets knows, the examples' segments
    give the very outputs they give on the nic (its tables, which it cannot read from
    files, sent by the host)."""
    monkeypatch.setitem(targets.TARGETS, "nic2", __name__)
    moved = {"ttl_pipeline-tls": ("rx.device=nic2",),
             "router-synthetic": ("rx.device=nic2", "route.device=nic2")}[case]
    c = next(c for c in CASES if c.name == case)
    plan = plan_program(load_program(ROOT / "examples" / c.program, list(moved)))
    assert [d.name for d in plan.devices] == ["nic2", "host"]
    assert all(t.bulk for t in plan.graph.shared if t.is_object)
    got = outputs(replace(c, settings=moved))
    assert got == recorded()[case]


def test_an_unknown_device_names_the_targets() -> None:
    p = load_program(EXAMPLE)
    with pytest.raises(OfflowError, match="unknown device `tpu`; devices: host, nic, xdp, gpu"):
        p.place("rx", device="tpu")
