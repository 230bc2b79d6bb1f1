"""A process that fails before its first packet (a malformed option, a file or table
that does not open) gives the run ONE error, its reason (ofl_start_failf: STATS.error),
and the run ends at once with it: no raw stderr line, no secondary core's error
("stopped: another core or process failed"), no bare "exited with status 1", and in
text mode no report tables (their zeros say nothing). Until 2026-11-28 only an unread
option did (tests/test_unread_opts.py); `--opt rx.rate=abc` printed a table of zeros,
the reason on raw stderr, a secondary core's error and an exit status. Run with the
examples, as users run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import jsonschema
import pytest

from offlow import targets
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.paths import DATA
from offlow.runner import Run, RunOptions
from tests.e2e import QUIC

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
# what `offlow run` says on stderr before any process's work (a warning: CPUs shared
# by more threads than they have, on a small machine): not errors
BANNERS = ("offlow: running ", "offlow: takes reloads: ", "offlow: warning: oversubscribed")


def offlow_run(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`offlow run examples/PROGRAM ARGS` (text mode)."""
    return subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(EXAMPLES / program),
                           *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=os.environ)


def _bad_gzip(tmp_path: Path) -> Path:
    """A prefix file that exists (the runner's check passes) but does not read: gzip's
    magic, then bytes that are no deflate stream."""
    path = tmp_path / "routes.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"not a deflate stream" * 4)
    return path


# (program, its arguments, the run's one error: its start, which names the option's
# owner, the key and the value). {bad_gzip} is replaced by that file's path, {folder}
# by a folder's.
CASES = [
    # a source (the NIC's; synthetic packets)
    ("ttl_pipeline.py", ["--opt", "rx.rate=abc"],
     "source rx: rate=abc is not a rate"),
    ("ttl_pipeline.py", ["--opt", "rx.loops=-1"], "source rx: loops=-1 is not a number"),
    ("ttl_pipeline.py", ["--opt", "rx.count=1e3"], "source rx: count=1e3 is not a number"),
    # a sink (on the NIC, beside the source: nothing is read before it opens); its
    # capture's path a folder (a kind it has not is refused before the run:
    # tests/test_opt_keys.py)
    ("kvs_cache.py", ["--count", "100", "--opt", "tx.path={folder}"],
     "sink tx: cannot write {folder}: {folder}: Is a directory"),
    # an LPM table (read by the host, sent to the NIC, which waits for it)
    ("router.py", ["--count", "100", "--opt", "routes4.nports=0"],
     "table routes4: nports=0 must be 1..32767"),
    ("router.py", ["--count", "100", "--opt", "routes4.path={bad_gzip}"],
     "table routes4: cannot read prefix file {bad_gzip}: "),
    # a store (all on the host) and a cache (the NIC's)
    ("kvs.py", ["--count", "100", "--opt", "store.capacity=0"],
     "store store: capacity=0 is not a number in 1..4294967295"),
    ("kvs_cache.py", ["--count", "100", "--opt", "cache.ways=abc"],
     "cache cache: ways=abc is not a number"),
    ("kvs_cache.py", ["--count", "100", "--opt", "cache.policy=maybe"],
     "cache cache: policy=maybe (write_through or write_back)"),
    # (a stream operator's table's options and a key table's (crypto's) are checked
    # before the run, in Python: tests/test_user_programs3.py, test_crypto_elements.py)
]


@pytest.mark.parametrize(("program", "args", "want"), CASES,
                         ids=[f"{p}:{a[-1]}" for p, a, _ in CASES])
def test_a_bad_option_is_the_runs_one_error_and_no_table(
        program: str, args: list[str], want: str, tmp_path: Path) -> None:
    paths = {"{bad_gzip}": str(_bad_gzip(tmp_path)), "{folder}": str(tmp_path)}
    for mark, path in paths.items():
        args = [a.replace(mark, path) for a in args]
        want = want.replace(mark, path)
    res = offlow_run(program, *args)
    said = [line for line in res.stderr.splitlines() if not line.startswith(BANNERS)]
    assert res.returncode == 1, res.stderr
    assert len(said) == 1 and said[0].startswith("offlow: error: " + want), res.stderr
    assert res.stdout == "", res.stdout   # no report table


def test_the_json_result_stays_complete_and_valid() -> None:
    """--json: the one error, and every table of the result (zeros), as the schema says."""
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "run",
                        str(EXAMPLES / "ttl_pipeline.py"), "--opt", "rx.rate=abc", "--json"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=os.environ)
    s = json.loads(p.stdout)
    assert p.returncode == 1 and not s["ok"]
    assert s["errors"] == ["source rx: rate=abc is not a rate (packets a second, 0 or more)"]
    assert {x["segment"] for x in s["segments"]} == {"rx", "app"}
    assert s["accounting"]["read"] == 0 and s["accounting"]["unaccounted"] == 0
    jsonschema.validate(s, json.loads((ROOT / "docs" / "run-result.schema.json").read_text()))


def test_a_run_that_failed_after_packets_flowed_still_prints_its_counts(
        tmp_path: Path) -> None:
    """The host's sink fails (its capture's path is a folder); the NIC's source may have
    read packets before the abort reached it: when it did, they are reported (the
    packets counted up to then), when it did not, nothing is. Either way the one
    error."""
    res = offlow_run("ttl_pipeline.py", "--count", "100000", "--opt", f"tx.path={tmp_path}")
    said = [line for line in res.stderr.splitlines() if not line.startswith(BANNERS)]
    assert res.returncode == 1
    assert said == [f"offlow: error: sink tx: cannot write {tmp_path}: {tmp_path}: Is a "
                    "directory"]
    read = [line for line in res.stdout.splitlines() if line.startswith("packets: ")]
    assert res.stdout == "" or (read and not read[0].startswith("packets: 0 read")), res.stdout


def _truncated_table(tmp_path: Path) -> Path:
    """The shared BGP table cut short (its first MB of gzip): read for a while, then an
    error (unexpected end of file)."""
    path = tmp_path / "cut.txt.gz"
    path.write_bytes((DATA / "bgp-full-table.txt.gz").read_bytes()[:1_000_000])
    return path


@pytest.mark.parametrize(("program", "args", "queue"), [
    # a sink (ofl_prog_open: its capture's path a folder), a store (main's table
    # opens): the NIC still reading
    ("ttl_pipeline.py", ["--count", "100000", "--opt", "tx.path={folder}"], "rx->app"),
    ("kvs_cache.py", ["--count", "100000", "--opt", "store.capacity=0"], "parse->store"),
    # the route table, on the host, fails after reading for a while: by then the NIC
    # has read the 130 frames of its capture, put them in the ring and closed it
    ("router.py", ["--set", "route.device=host", "--input", str(QUIC),
                   "--opt", "routes4.path={cut}"], "rx->route"),
], ids=["sink", "store", "route-table-after-the-nic-finished"])
def test_what_the_nic_sent_a_process_that_failed_at_its_start_is_counted(
        program: str, args: list[str], queue: str, tmp_path: Path) -> None:
    """The host fails at its start while the NIC's source reads, or after it finished:
    the frames the NIC put in the ring to the host are counted lost there (ring_broken),
    nothing unaccounted. The failing process marks the rings it would consume broken
    before it aborts the run, so that their producer counts them; a ring its producer
    had closed already it says in STATS.untaken (ofl_prog_fail). Before (2026-11-28)
    the ring's entries were nobody's: 32, 1024 or 130 unaccounted in every run."""
    cut = str(_truncated_table(tmp_path))
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(EXAMPLES / program),
                        *[a.replace("{cut}", cut).replace("{folder}", str(tmp_path))
                          for a in args], "--json"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=os.environ)
    a = json.loads(p.stdout)["accounting"]
    assert p.returncode == 1 and a["unaccounted"] == 0, a
    lost = {(d["at"], d["reason"]): d["packets"] for d in a["dropped"]}
    assert lost == ({(queue, "ring_broken"): a["read"]} if a["read"] else {}), a


def test_the_same_reason_from_two_processes_is_said_once(tmp_path: Path) -> None:
    """Both processes failed with the same reason (both read the same bad option): one
    error; a second, different reason is a second error; no exit status beside them."""
    b = build(load_program(EXAMPLES / "ttl_pipeline.py"))
    r = Run(b, RunOptions(count=1))
    r.tmp = tmp_path
    r.procs = cast(Any, {"nic": SimpleNamespace(returncode=1),
                         "host": SimpleNamespace(returncode=1)})
    (tmp_path / "nic.json.error").write_text("table t: nports=0 must be 1..32767")
    (tmp_path / "host.json.error").write_text("table t: nports=0 must be 1..32767")
    assert r._exit_errors({}) == ["table t: nports=0 must be 1..32767"]
    (tmp_path / "host.json.error").write_text("sink tx: kind=udp needs --udp-fd")
    assert r._exit_errors({}) == ["table t: nports=0 must be 1..32767",
                                  "sink tx: kind=udp needs --udp-fd"]


def test_an_untaken_file_is_read_and_a_torn_one_is_one_error(tmp_path: Path) -> None:
    """Target.untaken: what a process that failed at its start wrote beside its stats
    path is read back as written; none is None; one cut short is an error naming the
    file, not a traceback."""
    t = targets.get("host")
    stats = tmp_path / "host.json"
    assert t.untaken(stats) is None
    side = tmp_path / "host.json.untaken"
    side.write_text('{"device":"host","untaken":[{"queue":"a->b","side":"in","lost":3}]}')
    assert t.untaken(stats) == {"device": "host",
                                "untaken": [{"queue": "a->b", "side": "in", "lost": 3}]}
    side.write_text('{"device":"host","untaken":[{"queue"')
    with pytest.raises(OfflowError, match="the host process wrote an unreadable "
                                          "host.json.untaken"):
        t.untaken(stats)
