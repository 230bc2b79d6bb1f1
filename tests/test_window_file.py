"""`offlow run --window-file PATH` (offlow/windowfile.py): once the processes are
started, the run's window, offlow's pid, the program and its devices, as JSON a tool
reads instead of parsing the human start line; a PATH that cannot be written is one
clear error before any process starts; `wait_for` waits for this run's file only."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from offlow import windowfile
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.lifecycle import SHM
from offlow.runner import Run, RunOptions, check_options
from offlow.windowfile import RunWindow
from tests.e2e import EXAMPLE, ROOT
from tests.test_errors_before_start import offlow_run


class _Proc:
    """Stands for a started `offlow run`: pid `pid`, up for `looks` polls (None: ever)."""

    def __init__(self, pid: int, looks: int | None = None) -> None:
        self.pid = pid
        self.looks = looks

    def poll(self) -> int | None:
        if self.looks is None:
            return None
        self.looks -= 1
        return None if self.looks >= 0 else 0


def _info(pid: int) -> RunWindow:
    return RunWindow(SHM / f"offlow-p-{pid}-00", pid, "p", ("nic", "host"))


def test_a_window_file_is_replaced_whole_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text("an earlier run's\n")
    windowfile.write(path, _info(7))
    assert RunWindow.parse(path.read_text()) == _info(7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.json"]  # (no w.json.tmp left)
    assert windowfile.wait_for(path, _Proc(7), within=60) == _info(7)


def test_an_earlier_runs_window_file_is_not_this_runs(tmp_path: Path) -> None:
    """A file naming another pid is waited past: this run ending without writing its
    own is the error, not the stale file returned."""
    path = tmp_path / "w.json"
    windowfile.write(path, _info(7))
    with pytest.raises(OfflowError, match=r"offlow run \(pid 8\) ended without writing its "
                                          r"window file .*w\.json"):
        windowfile.wait_for(path, _Proc(8, looks=3), within=60)


def test_waiting_for_a_window_file_ends_at_its_deadline(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text("{not json")
    with pytest.raises(OfflowError, match=r"did not write its window file .*w\.json within "
                                          r"0\.05 s"):
        windowfile.wait_for(path, _Proc(8), within=0.05)


@pytest.mark.parametrize("where, message", [
    (lambda t: t, "is a directory; name a file in it"),
    (lambda t: t / "nowhere" / "w.json", "no such directory"),
])
def test_an_unwritable_window_file_is_refused_before_anything_starts(
        where: Callable[[Path], Path], message: str, tmp_path: Path) -> None:
    path = where(tmp_path)
    with pytest.raises(OfflowError, match=re.escape(f"--window-file {path}: {message}")):
        check_options(RunOptions(window_file=path))
    rc, out, err = offlow_run(["run", str(EXAMPLE), "--window-file", str(path)], tmp_path)
    assert rc == 2 and out == "", err
    assert err.strip() == f"offlow: error: --window-file {path}: {message}" + (
        f" {path.parent}" if message == "no such directory" else ""), err


def test_a_window_file_that_cannot_be_written_at_start_stops_the_run(tmp_path: Path) -> None:
    """Its folder removed after the options were checked: Run.start is one clear error
    and leaves no process or window (the run is not left running unnamed)."""
    folder = tmp_path / "gone"
    folder.mkdir()
    r = Run(build(load_program(EXAMPLE)), RunOptions(duration=120,
                                                     window_file=folder / "w.json"))
    folder.rmdir()
    with pytest.raises(OfflowError, match="--window-file .*w.json: cannot write it"):
        r.start()
    assert r.procs and all(p.poll() is not None for p in r.procs.values())
    assert not r.window.exists()


def test_a_run_started_from_python_writes_its_window_file_as_it_starts(tmp_path: Path) -> None:
    """(Run.start writes it, not the command line's start line.)"""
    path = tmp_path / "w.json"
    r = Run(build(load_program(EXAMPLE)), RunOptions(duration=0.5, window_file=path))
    r.start()
    try:
        written = RunWindow.parse(path.read_text())
    finally:
        res = r.wait()
    assert res.ok, res.errors
    assert written == RunWindow(r.window, os.getpid(), "ttl_pipeline", tuple(r.procs))
    assert set(r.procs) == {"nic", "host"}


def test_the_window_file_names_the_live_run_and_offlow_stats_reads_it(tmp_path: Path) -> None:
    """`offlow run --duration 120 --window-file F` as a tool runs it: F names offlow's
    pid, the program, its window (the one the start line names) and the devices whose
    counters `offlow stats WINDOW` prints; stopped by Ctrl-C, the run ends cleanly and
    leaves F, naming a window that is gone."""
    path = tmp_path / "window.json"
    run = subprocess.Popen([sys.executable, "-m", "offlow.cli", "run", str(EXAMPLE),
                            "--duration", "120", "--window-file", str(path)], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got = windowfile.wait_for(path, run, within=240)  # (a cold cache compiles first)
        live = got.window.exists()
        stats = subprocess.run([sys.executable, "-m", "offlow.cli", "stats", str(got.window)],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err
    assert (got.pid, got.program, got.devices) == (run.pid, "ttl_pipeline", ("nic", "host"))
    assert live and got.window.parent == SHM, got
    assert f"`offlow stats {got.window}`" in err, err
    assert stats.returncode == 0, stats.stderr
    devices = {s.labels["device"] for f in text_string_to_metric_families(stats.stdout)
               for s in f.samples if s.name == "offlow_segment_packets_total"}
    assert devices == set(got.devices), stats.stdout
    assert RunWindow.parse(path.read_text()) == got and not got.window.exists()
    assert not os.path.exists(f"{path}.tmp")
