"""Flag sets for a build's own sources only (offlow/cbuild.py build_exe `own_sets`): they
reach the compile of the sources given, while the runtime libraries linked are the
archives every other build with the same sets links (not built again with a system
header folder or a warning that changes nothing in them); the xdp target's host side
(libnl's headers) is built so. A peer's flags (`peer`: DPDK's from pkg-config) reach the
sources only too: a benchmark driver built against DPDK links the archives its offlow
twin links."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from offlow import cbuild
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.runner import RunOptions, build_for, run
from offlow.targets import xdp
from tests.e2e import ROOT

# an unused static function: refused under -Wall -Werror, taken with part_of_generated
UNUSED = "static int unused(void) { return 1; }\nint main(void) { return 0; }\n"


@pytest.fixture
def library_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[str, ...],
                                                                  tuple[str, ...]]]:
    """(library, flag sets, extra flags) of each build_library call (it still runs)."""
    calls: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
    real = cbuild.build_library

    def recorded(name: str, sets: Sequence[str] = cbuild.TOOL,
                 extra: Sequence[str] = ()) -> Path:
        calls.append((name, tuple(sets), tuple(extra)))
        return real(name, sets, extra)

    monkeypatch.setattr(cbuild, "build_library", recorded)
    return calls


def test_own_sets_reach_the_sources_and_not_the_libraries(
        tmp_path: Path, library_builds: list[tuple[str, tuple[str, ...], tuple[str, ...]]]
) -> None:
    src = tmp_path / "unused.c"
    src.write_text(UNUSED)
    with pytest.raises(OfflowError, match="unused"):
        cbuild.build_exe("own-sets-refused", [src])
    exe = cbuild.build_exe("own-sets", [src], own_sets=("part_of_generated",))
    assert exe.is_file()
    assert library_builds and all(sets == cbuild.TOOL and extra == ()
                                  for _, sets, extra in library_builds), library_builds


@pytest.mark.skipif(xdp.TARGET.unusable() is not None,
                    reason=f"xdp cannot run here: {xdp.TARGET.unusable()}")
def test_the_xdp_host_side_links_the_archives_other_builds_link(
        library_builds: list[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> None:
    """Before, the host side's sets held `libnl` (an include folder only its own
    sources need): every xdp program built the core, lpm and map libraries again."""
    build(load_program(ROOT / "tests" / "programs" / "xdp_split.py", ["edge.device=xdp"]))
    host = {name for name, _, _ in library_builds}
    assert set(xdp.HOST_LIBS) <= host, library_builds
    assert all(sets == cbuild.TOOL and extra == ()
               for _, sets, extra in library_builds), library_builds


def test_a_profile_scaled_build_times_its_elements_and_links_the_plain_archives(
        library_builds: list[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> None:
    """Before, a profile-scaled run's element_time went to the libraries too: each
    `offlow plan` calibration built the core (and every library its program links)
    again with a -D the runtime's sources never read."""
    o = RunOptions(count=2000, sizes="64:1", profile="cmp-nic-200")
    b = build_for(load_program(ROOT / "examples" / "ttl_pipeline.py"), o)
    assert library_builds and all(sets == cbuild.TOOL and extra == ()
                                  for _, sets, extra in library_builds), library_builds
    res = run(b, o)  # its elements timed: the generated code had element_time
    assert res.ok, res.errors
    elements = [v for d in res.stats.values() for c in d["cores"] for v in c["elements"].values()]
    assert elements and all("ns" in v for v in elements), elements


@pytest.fixture
def library_archives(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path]]:
    """(library, archive) of each build_library call (it still runs)."""
    calls: list[tuple[str, Path]] = []
    real = cbuild.build_library

    def recorded(name: str, sets: Sequence[str] = cbuild.TOOL,
                 extra: Sequence[str] = ()) -> Path:
        archive = real(name, sets, extra)
        calls.append((name, archive))
        return archive

    monkeypatch.setattr(cbuild, "build_library", recorded)
    return calls


def test_a_peers_flags_reach_the_sources_and_not_the_libraries(
        tmp_path: Path, library_archives: list[tuple[str, Path]]) -> None:
    src = tmp_path / "unused.c"
    src.write_text(UNUSED)
    with pytest.raises(OfflowError, match="unused"):
        cbuild.build_exe("peer-flags-refused", [src])
    # (a flag set of the build description stands for a peer's pkg-config flags)
    exe = cbuild.build_exe("peer-flags", [src], peer=cbuild.flags("part_of_generated"))
    assert exe.is_file()
    # the libraries linked are the plain archives (built without the peer's flags)
    linked = list(library_archives)
    assert linked and all(archive == cbuild.build_library(name) for name, archive in linked), \
        linked


@pytest.mark.skipif(subprocess.run(["pkg-config", "--exists", "libdpdk"]).returncode != 0,
                    reason="libdpdk-dev is not installed")
def test_the_dpdk_drivers_link_the_archives_their_offlow_twins_link(
        library_archives: list[tuple[str, Path]]) -> None:
    """Before, DPDK's flags went to the libraries too: `offlow bench lso` and `offlow
    bench router` built the core, lso and lpm archives a second time for their DPDK
    drivers (byte for byte the same archives, under another key)."""
    from benchmarks import lso, router
    from benchmarks.common import routes

    for offlow_twin, dpdk_driver in ((lso.build_offlow, lso.build_dpdk),
                                     (routes.build_offlow, router.build_dpdk)):
        library_archives.clear()
        offlow_twin()
        ours = dict(library_archives)
        library_archives.clear()
        dpdk_driver()
        theirs = dict(library_archives)
        assert theirs and theirs == ours, (theirs, ours)
