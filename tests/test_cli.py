"""The command line: explain output, placement settings, and clean errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from offlow.cli import main
from tests.e2e import EXAMPLE, window_in


def test_explain_shows_segments_queues_and_what_crosses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "rx: device nic" in out
    assert "app: device host" in out
    # only the fields the host side reads cross, not the whole state record
    assert "carries ip_frag:uint8_t, ip_proto:uint8_t, l4_end:uint16_t, l4_off:uint16_t" in out
    assert "class_counts: uint64_t[4] in host memory" in out


def test_explain_moving_rx_to_host_keeps_queues_off_the_interconnect(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(EXAMPLE), "--set", "rx.device=host"]) == 0
    out = capsys.readouterr().out
    assert "rx: device host" in out
    assert "in the window (same device)" in out
    assert "interconnect window" not in out


@pytest.mark.parametrize("argv, message", [
    (["explain", "no-such-file.py"], "program no-such-file.py: no such file"),
    (["explain", str(EXAMPLE), "--set", "rx.device=tpu"], "unknown device `tpu`"),
    (["explain", str(EXAMPLE), "--set", "nosuch.device=host"], "nosuch"),
    (["explain", str(EXAMPLE), "--set", "rx.cores=a,b"], "cores"),
])
def test_errors_exit_2_with_a_message_and_no_traceback(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_program_file_without_program_function(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "empty.py"
    f.write_text("x = 1\n")
    assert main(["explain", str(f)]) == 2
    assert "must define `def program()" in capsys.readouterr().err


@pytest.mark.parametrize("code", ["import sys\nsys.exit(3)\n",
                                  # a program file with a command line of its own
                                  "import argparse\nap = argparse.ArgumentParser()\n"
                                  "ap.add_argument('--n', required=True)\nap.parse_args()\n"])
def test_a_program_file_that_exits_is_one_error_at_its_line(
        tmp_path: Path, code: str, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "exits.py"
    f.write_text(code)
    assert main(["explain", str(f)]) == 2  # (before: offlow ended with the file's status,
    err = capsys.readouterr().err          # sys.exit(3)'s without a word)
    line = len(code.splitlines())
    assert err.splitlines()[-1].startswith(f"offlow: error: {f}:{line}: it called sys.exit("), err
    assert "Traceback" not in err


def test_router_check_command_reports_zero_mismatches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "t.txt"
    table.write_text("0.0.0.0/0\n10.0.0.0/8\n10.1.0.0/16\n10.1.2.3/32\n"
                     "2001:db8::/32\n2001:db8:1::/48\n::/0\n")
    assert main(["router", "check", "--prefixes", str(table), "--random", "2000"]) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out and "prefixes: 4 IPv4 + 3 IPv6" in out


def test_ctrl_c_while_compiling_exits_130_without_a_traceback_or_a_half_built_runtime(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import offlow.cbuild

    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path / "cache"))
    real_cc, calls = offlow.cbuild.cc, []

    def cc_then_ctrl_c(cc: str, args: list[str], what: str) -> None:
        calls.append(what)
        # the runtime's core for the inputs tool (it checks --sizes before anything
        # starts): two object files are built, the third is interrupted (a compile
        # per CPU at once: those under way end, no other begins)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real_cc(cc, args, what)

    monkeypatch.setattr(offlow.cbuild, "cc", cc_then_ctrl_c)
    try:
        rc = main(["run", str(EXAMPLE), "--duration", "1"])
    except KeyboardInterrupt:  # escaping main would end the whole pytest session
        pytest.fail("the Ctrl-C escaped main()")
    assert rc == 130
    err = capsys.readouterr().err
    assert "offlow: interrupted" in err and "Traceback" not in err
    assert 3 <= len(calls) < 3 + (os.cpu_count() or 1), calls
    assert all(c.startswith("runtime/core/src/") for c in calls), calls
    # no runtime-core-*.tmpPID (the folder's marker only)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["CACHEDIR.TAG"]


@pytest.mark.parametrize(("sig", "status", "said"), [("SIGINT", 130, "offlow: interrupted"),
                                                     ("SIGTERM", 143, "offlow: interrupted "
                                                                      "(SIGTERM)")])
def test_a_stop_that_an_import_turns_into_an_import_error_is_a_stop(
        sig: str, status: int, said: str) -> None:
    """A command imports what it uses as it starts (offlow.cli stays light); numpy's C
    extension turns a Ctrl-C during its import into an ImportError (seen by the chaos
    test when the parser imported it). Here `offlow explain`'s import of its module
    sends the signal and fails so, in a fresh interpreter: the command stops as for any
    Ctrl-C, no traceback; an ImportError with no signal stays one."""
    import subprocess
    import sys

    probe = f"""
import builtins, os, signal, sys
real = builtins.__import__
def imp(name, *a, **k):
    if name == "offlow.explain" and name not in sys.modules:
        try:
            os.kill(os.getpid(), signal.{sig})
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
        except KeyboardInterrupt:
            pass
        raise ImportError("the signal came during a C extension's import")
    return real(name, *a, **k)
builtins.__import__ = imp
from offlow.cli import main
sys.exit(main(["explain", {str(EXAMPLE)!r}]))
"""
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert (res.returncode, res.stderr) == (status, said + "\n"), res.stderr
    plain = probe.replace(f"os.kill(os.getpid(), signal.{sig})", "pass")
    res = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1 and "ImportError: the signal came" in res.stderr


def test_a_ctrl_c_between_the_start_and_the_watch_stops_the_run_cleanly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C that lands once the processes are started but before the run's watch
    took over (the start's last lines: a tool that signals on seeing the window file
    meets that moment) escaped runner.run: "offlow: interrupted", no counts, the
    processes left to notice the runner gone. Now it stops the run as one in the watch
    does. Here the start raises it as it returns, as the signal would."""
    from offlow.dsl.loader import load_program
    from offlow.runner import Run, RunOptions, build_for, run

    real_start = Run.start

    def start_then_ctrl_c(self: Run) -> None:
        real_start(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(Run, "start", start_then_ctrl_c)
    opts = RunOptions(duration=60, output=tmp_path / "out.pcap", timeout=120)
    b = build_for(load_program(EXAMPLE), opts)
    try:
        res = run(b, opts)
    except KeyboardInterrupt:  # escaping run would end the whole pytest session
        pytest.fail("the Ctrl-C escaped runner.run")
    assert res.ok and res.interrupted and res.stopped_by == "SIGINT", res.errors
    assert not any(p.name.startswith(f"offlow-{b.graph.name}-{os.getpid()}-")
                   for p in Path("/dev/shm").iterdir())


def test_ctrl_c_during_a_run_prints_the_counts_and_says_so(tmp_path: Path) -> None:
    """`offlow run` in a subprocess, SIGINT once its window file says the run has
    started: the run ends cleanly with its counts and the line that says it was
    stopped."""
    import signal
    import subprocess
    import sys
    import time

    window = tmp_path / "window.json"
    proc = subprocess.Popen([sys.executable, "-m", "offlow.cli", "run", str(EXAMPLE),
                             "--duration", "60", "--window-file", str(window)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ})
    try:
        window_in(proc, window, within=240)  # a cold cache compiles the runtime first
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # (it did not start or did not stop: nothing left)
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "offlow: stopped by Ctrl-C: the counts cover the run until then" in err
    assert "Traceback" not in err
    assert "source " in out and "packets" in out


def test_help_says_what_offlow_is(capsys: pytest.CaptureFixture[str]) -> None:
    """(It printed the cli module's docstring: "The command line: parses arguments and
    calls the library; nothing more.")"""
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Compile packet-processing programs" in out and "parses arguments" not in out
