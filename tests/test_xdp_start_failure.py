"""On the xdp target too (its process is a tool of its own: runtime/tools/xdp_run.c), a
failure before the first packet is the run's ONE error (ofl_start_failf: STATS.error),
with nothing unaccounted, and a user's `--opt NAME.KEY=V` that its source, sink or
tables never read is refused before anything is built (offlow.optkeys: with --iface its
source reads its duration only; the process's own check, ofl_args_check_unread, is the
backstop); the keys it does read, and the runner's own options, are not.
Until 2026-11-28 its set-up errors were raw stderr lines followed by "the xdp process
exited with status 1" (and the host's secondary core error), and a misspelt key for a
source or table on xdp ran as if it had not been given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offlow.targets import xdp
from tests.e2e import ROOT, TLS
from tests.netns import veth_in_namespace

EXAMPLES = ROOT / "examples"
XDP_ROUTER = ROOT / "tests" / "programs" / "xdp_router.py"
XDP_TTL = ROOT / "tests" / "programs" / "xdp_ttl.py"
WHY_NOT = xdp.TARGET.unusable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")


def offlow_run(program: Path, *args: str, prefix: tuple[str, ...] = ()) -> tuple[
        int, dict, list[str]]:
    """`offlow run PROGRAM ARGS --json` (run under `prefix`: a namespace): its status,
    summary and the stderr lines that are errors or the xdp process's own."""
    p = subprocess.run([*prefix, sys.executable, "-m", "offlow.cli", "run", str(program), *args,
                        "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=os.environ)
    said = [t for t in p.stderr.splitlines() if t.startswith(("offlow: error:", "offlow xdp"))]
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else {}, said


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small prefix file of both families."""
    p = tmp_path_factory.mktemp("routes") / "small.txt"
    p.write_text("10.0.0.0/8\n192.0.2.0/24\n2001:db8::/32\n")
    return p


def router(routes: Path) -> list[str]:
    """tests/programs/xdp_router.py on xdp, 50 synthetic frames, its tables from `routes`."""
    return [str(XDP_ROUTER), "--set", "edge.device=xdp", "--count", "50",
            "--opt", f"fib.path={routes}", "--opt", f"fib6.path={routes}"]


def test_the_program_refused_at_its_attach_is_the_runs_one_error_none_unaccounted() -> None:
    """ttl_pipeline with rx on xdp and app on the host (the crossing: rings from xdp to
    the host), in native mode on frames of 4,519 bytes: the veth refuses the program
    (one page per frame), every time. The run's one error is that reason, the host's
    core stopped by it says nothing, no exit status; nothing was read, nothing is
    unaccounted. (Before: the raw line, the host's "stopped: another core or process
    failed" and "the xdp process exited with status 1".)"""
    rc, s, said = offlow_run(EXAMPLES / "ttl_pipeline.py", "--set", "rx.device=xdp",
                             "--input", str(TLS), "--xdp-mode", "native")
    want = ("interface ofl-xdp refused the XDP program in native mode: Numerical result out "
            "of range (its MTU is too large for native XDP, which takes one page per frame on "
            "a veth: use --xdp-mode generic, or frames of at most about 3,500 bytes)")
    assert rc == 1 and s["errors"] == [want], (s.get("errors"), said)
    assert said == [f"offlow: error: {want}"]
    assert s["accounting"]["read"] == 0 and s["accounting"]["unaccounted"] == 0


# (a misspelt option for an object on xdp, the run's one error, before it starts)
MISSPELT = {
    "ipv4-table": ("fib.nprts=3", "--opt `fib.nprts=3`: table `fib` reads no option `nprts` "
                   "(did you mean `nports`?); it reads nports, path"),
    "ipv6-table": ("fib6.pth=x", "--opt `fib6.pth=x`: table `fib6` reads no option `pth` (did "
                   "you mean `path`?); it reads nports, path"),
    "source": ("wire.cont=5", "--opt `wire.cont=5`: source `wire` (kind=synth) reads no option "
               "`cont` (did you mean `count`?); it reads advance_ts, count, duration_ns, kind, "
               "loops, prefixes, rate, seed, sizes"),
    "sink": ("back.knd=pcap", "--opt `back.knd=pcap`: sink `back` (no kind=) reads no option "
             "`knd` (did you mean `kind`?); it reads kind, path"),
}


@pytest.mark.parametrize(("opt", "want"), MISSPELT.values(), ids=MISSPELT.keys())
def test_a_misspelt_key_on_xdp_is_the_runs_one_error(opt: str, want: str, routes: Path) -> None:
    rc, s, said = offlow_run(*router(routes), "--opt", opt)
    assert rc == 2 and s == {}, (s, said)  # (refused before anything started)
    assert said == [f"offlow: error: {want}"]


def test_the_documented_options_on_xdp_are_not_refused(routes: Path) -> None:
    """The keys the xdp process reads, given by the user, and the runner's own options
    (--count, --input, --xdp-spread, --xdp-ring, --xdp-mode: options it gives the
    process itself) run: the tables' nports and path, the source's count and seed;
    the crossing's ring."""
    rc, s, said = offlow_run(*router(routes), "--opt", "fib.nports=4", "--opt", "fib6.nports=4",
                             "--opt", "wire.count=30", "--opt", "wire.seed=3", "--xdp-spread")
    assert rc == 0 and s["ok"] and not said, (s.get("errors"), said)
    assert s["accounting"]["read"] == 30
    rc, s, said = offlow_run(EXAMPLES / "ttl_pipeline.py", "--set", "rx.device=xdp",
                             "--input", str(TLS), "--xdp-ring", "256", "--xdp-mode", "generic",
                             "--opt", "rx.loops=2")
    assert rc == 0 and s["ok"] and not said, (s.get("errors"), said)
    assert s["accounting"]["read"] > 1000 and s["accounting"]["unaccounted"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace needs root")
def test_with_iface_the_source_takes_its_duration_only() -> None:
    """--iface: the packets are the interface's, so the source reads only duration_ns:
    the user's duration_ns runs (the run ends by it), a malformed one is one error, and
    any other source key is refused naming the one it takes (before: each ran, the
    malformed duration as 0 ns, the other key ignored)."""
    ns = f"ofl-xf-{os.getpid()}"
    with veth_in_namespace(ns) as sh:
        base = [str(XDP_TTL), "--set", "edge.device=xdp", "--iface", "ofl-a"]
        rc, s, said = offlow_run(*base, "--opt", "wire.duration_ns=300000000",
                                 prefix=tuple(sh))
        assert rc == 0 and s["ok"] and not said, (s.get("errors"), said)
        rc, s, said = offlow_run(*base, "--duration", "5", "--opt", "wire.duration_ns=abc",
                                 prefix=tuple(sh))
        assert said == ["offlow: error: source wire: duration_ns=abc is not a number"], said
        rc, s, said = offlow_run(*base, "--duration", "5", "--opt", "wire.count=5",
                                 prefix=tuple(sh))
        assert rc == 2 and said == [
            "offlow: error: --opt `wire.count=5`: source `wire` (on xdp with --iface) reads "
            "no option `count`; it reads duration_ns"], said
