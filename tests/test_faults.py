"""Faults a user's operations team meets: the runner killed (SIGKILL, SIGTERM) or
started with SIGINT ignored, a failed start, a process of the run that dies, a window left
by a runner killed before its processes started. No process outlives its run, nothing
is left in /dev/shm or the temp folder, and every death is noticed and said."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from offlow import windowfile
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.lifecycle import pid_alive, sweep_stale
from offlow.runner import Run, RunOptions
from tests.e2e import EXAMPLE, ROOT
from tests.procs import CliRun, cpu_seconds, start_cli

ECHO = Path(__file__).resolve().parent / "programs" / "echo.py"
KVS = ROOT / "examples" / "kvs.py"


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    p = subprocess.Popen([sys.executable, "-c", ""])
    p.wait()
    assert not pid_alive(p.pid)
    return p.pid


def start_run(args: list[object], folder: Path, shell_prefix: str = "") -> CliRun:
    """start_cli(ARGS --window-file FOLDER/window.json) (beside the run's TMPDIR, so
    not one of its leftovers)."""
    return start_cli([*args, "--window-file", folder / "window.json"], folder, shell_prefix)


def wait_started(run: CliRun, folder: Path) -> None:
    """Wait until `run` (start_run's) has started its processes: its window file
    written (within 240 s: a cold cache compiles the runtime first). A failure says
    why, with what the run said."""
    try:
        windowfile.wait_for(folder / "window.json", run.proc, 240)
    except OfflowError as e:
        pytest.fail(f"{e}\n{run.stderr()}")


@pytest.mark.parametrize("args", [["--udp", "0"], ["--duration", "60"]],
                         ids=["udp-forever", "duration"])
def test_a_runner_killed_by_sigkill_takes_its_processes_and_files_with_it(
        args: list[str], tmp_path: Path) -> None:
    """SIGKILL of `offlow run` (the OOM killer, `kill -9`): its device processes see
    their lifeline close, stop, and remove the window and the run folder."""
    run = start_run([EXAMPLE, *args], tmp_path)
    try:
        wait_started(run, tmp_path)
        assert len(run.children()) == 2  # host and nic
        assert run.leftovers()  # its window and run folder exist while it runs
        os.kill(run.pid, signal.SIGKILL)
        assert run.wait_gone() == []
        assert run.leftovers() == []
    finally:
        run.kill_all()


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path: Path) -> None:
    """SIGTERM (timeout, systemd, CI cancellation) ends the run cleanly: the counts
    until then are printed, the exit status is 0 and nothing is left behind."""
    run = start_run([EXAMPLE, "--duration", "60"], tmp_path)
    try:
        wait_started(run, tmp_path)
        os.kill(run.pid, signal.SIGTERM)
        assert run.wait_gone() == []
        assert run.proc.returncode == 0, run.stderr()
        assert "offlow: stopped by SIGTERM: the counts cover the run until then" in run.stderr()
        assert "source rx:" in run.stdout() and "Traceback" not in run.stderr()
        assert run.leftovers() == []
    finally:
        run.kill_all()


def test_a_run_started_with_sigint_ignored_still_stops_on_sigint(tmp_path: Path) -> None:
    """A shell script's background job starts with SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler: `offlow run --serve` ignored the SIGINT
    meant to stop it and served for ever (test_attach timed out so under a suite run
    in the background)."""
    run = start_run([ECHO, "--serve", "--count", "20"], tmp_path, shell_prefix="trap '' INT")
    try:
        wait_started(run, tmp_path)
        os.kill(run.pid, signal.SIGINT)
        assert run.wait_gone() == []
        assert run.proc.returncode == 0, run.stderr()
        assert "offlow: stopped by Ctrl-C" in run.stderr()
        assert run.leftovers() == []
    finally:
        run.kill_all()


def test_device_processes_start_with_the_stop_signals_blocked(tmp_path: Path) -> None:
    """A SIGINT or SIGTERM that reaches a device process before it has blocked them
    itself must stay pending (stop.h), not kill it (under load the runner forwarded
    a Ctrl-C in that moment: "the nic process died (SIGINT)"): the runner starts the
    processes with both blocked. A stand-in for the program records its mask (in
    Python: a shell would reset the mask before anything runs)."""
    seen = tmp_path / "sigblk"
    fake = tmp_path / "device.py"
    fake.write_text(f"#!{sys.executable}\n"
                    "import sys\n"
                    "if '--init' not in sys.argv:\n"
                    "    mask = open('/proc/self/status').read().split('SigBlk:')[1].split()[0]\n"
                    f"    open({str(seen)!r}, 'a').write(mask + '\\n')\n")
    fake.chmod(0o755)
    b = build(load_program(EXAMPLE))
    r = Run(replace(b, binaries={dev: fake for dev in b.binaries}), RunOptions(count=10))
    r.start()
    res = r.wait()
    assert res.ok, res.errors
    masks = [int(line, 16) for line in seen.read_text().splitlines()]
    both = 1 << (signal.SIGINT - 1) | 1 << (signal.SIGTERM - 1)
    assert len(masks) == len(b.binaries) and all(m & both == both for m in masks), masks


def test_failed_starts_leave_no_run_folder(tmp_path: Path) -> None:
    """A port in use fails the start once the run folder and window exist: both go."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        for i, args in enumerate([["--udp", str(port)], ["--tcp", "0", "--udp", str(port)]]):
            prog = KVS if "--tcp" in args else EXAMPLE
            run = start_cli([prog, *args], tmp_path / str(i))
            assert run.wait_gone(120) == []
            assert run.proc.returncode == 2
            assert f"cannot bind UDP port {port}" in run.stderr()
            assert run.leftovers() == []


def test_a_stale_window_and_run_folder_are_removed_by_the_sweep(tmp_path: Path) -> None:
    """What a runner killed before its processes started leaves (they would have
    cleaned up), the next run removes: only this user's, only a gone runner's."""
    shm, tmp = tmp_path / "shm", tmp_path / "tmp"
    shm.mkdir()
    tmp.mkdir()
    gone, alive = dead_pid(), os.getpid()
    # a window, the description of its build beside it (offlow reload), a run folder
    stale = [shm / f"offlow-ttl_pipeline-{gone}-0123abcd", tmp / f"offlow-run-{gone}-x1y2",
             shm / f"offlow-ttl_pipeline-{gone}-0123abcd.reload.json"]
    kept = [shm / f"offlow-ttl_pipeline-{alive}-0123abcd", tmp / f"offlow-run-{alive}-x1y2",
            shm / f"offlow-ttl_pipeline-{alive}-0123abcd.reload.json",
            shm / f"offlow-notours-{gone}", tmp / "offlow-run-x"]
    for p in stale + kept:
        if p.name.startswith("offlow-run"):
            p.mkdir()
            (p / "host.json").write_text("{}")
        else:
            p.write_bytes(b"")
    assert sorted(sweep_stale(shm, tmp)) == sorted(stale)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in stale)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV], ids=["sigkill", "sigsegv"])
def test_the_death_of_the_tcp_server_ends_the_run_with_an_error(sig: int) -> None:
    """The process serving TCP (the one holding the store) is watched like every
    process of the run: its death stops the run at once and is said, instead of the
    run going on with its TCP port refusing connections until its own end."""
    b = build(load_program(KVS))
    r = Run(b, RunOptions(tcp_port=0, timeout=30))
    r.start()
    try:
        assert r.tcp_table is not None and r.tcp_port
        with socket.create_connection(("127.0.0.1", r.tcp_port), timeout=10) as c:
            c.sendall(b"version\r\n")
            assert c.recv(100).startswith(b"VERSION")
        server = r.tcp_table.home
        os.kill(r.procs[server].pid, sig)
    finally:
        res = r.wait()
    assert not res.ok
    assert res.errors == [f"the {server} process died ({signal.Signals(sig).name})"]
    assert not r.window.exists()


@pytest.mark.parametrize("args", [[ECHO, "--serve", "--count", "20"], [EXAMPLE, "--udp", "0"]],
                         ids=["serve", "udp"])
def test_an_idle_run_costs_no_cpu(args: list[object], tmp_path: Path) -> None:
    """A program serving channels after its packets (--serve), or a UDP server nobody
    sends to: its processes wait without spinning (each took ~98% of a CPU)."""
    run = start_run(args, tmp_path)
    try:
        wait_started(run, tmp_path)
        time.sleep(1.5)  # past every spin and yield, into the naps
        kids = run.children()
        before = {p: cpu_seconds(p) for p in kids}
        time.sleep(1.0)
        used = {p: cpu_seconds(p) - t for p, t in before.items()}
        os.kill(run.pid, signal.SIGINT)
        assert run.wait_gone() == [] and run.proc.returncode == 0, run.stderr()
        assert kids and all(u < 0.15 for u in used.values()), used
    finally:
        run.kill_all()


def test_a_process_slow_to_stop_after_anothers_death_stops_cleanly(tmp_path: Path) -> None:
    """The NIC's process dies; the host's, asked to stop, is descheduled for three
    seconds first (SIGSTOP: as on a loaded machine) and then stops by itself (its
    producer gone, it exits 1), its counts kept: the death is the run's one error.
    (The runner used to kill whatever was still up two seconds after a failure, adding
    an error of its own and losing the counts.)"""
    b = build(load_program(EXAMPLE))
    r = Run(b, RunOptions(duration=60, timeout=120))
    r.start()
    host = r.procs["host"].pid
    resume = threading.Timer(3.0, os.kill, (host, signal.SIGCONT))
    try:
        os.kill(host, signal.SIGSTOP)
        os.kill(r.procs["nic"].pid, signal.SIGKILL)
        resume.start()  # (while the runner watches: wait() below)
    finally:
        res = r.wait()
        resume.join()
    assert res.errors == ["the nic process died (SIGKILL)"]
    assert r.procs["host"].returncode >= 0  # (it exited: not killed by a signal)
    assert "host" in res.stats
