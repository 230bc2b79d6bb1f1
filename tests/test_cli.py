"""The command line: explain output, placement settings, and clean errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow.cli import main
from tests.e2e import EXAMPLE


def test_explain_shows_segments_queues_and_what_crosses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "rx: device nic" in out
    assert "app: device host" in out
    # only the two fields the host side reads cross, not the whole state record
    assert "carries ip_proto:uint8_t, l4_off:uint16_t" in out
    assert "class_counts: uint64_t[4] in host memory" in out


def test_explain_moving_rx_to_host_keeps_queues_off_the_interconnect(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(EXAMPLE), "--set", "rx.device=host"]) == 0
    out = capsys.readouterr().out
    assert "rx: device host" in out
    assert "in the window (same device)" in out
    assert "interconnect window" not in out


@pytest.mark.parametrize("argv, message", [
    (["explain", "no-such-file.py"], "no such program file"),
    (["explain", str(EXAMPLE), "--set", "rx.device=gpu"], "unknown device `gpu`"),
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


def test_router_check_command_reports_zero_mismatches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "t.txt"
    table.write_text("0.0.0.0/0\n10.0.0.0/8\n10.1.0.0/16\n10.1.2.3/32\n"
                     "2001:db8::/32\n2001:db8:1::/48\n::/0\n")
    assert main(["router", "check", "--prefixes", str(table), "--random", "2000"]) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out and "prefixes: 4 IPv4 + 3 IPv6" in out
