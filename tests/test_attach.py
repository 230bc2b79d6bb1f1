"""Attaching to a running program: `offlow run --serve` prints its window, and other
host programs open its channels by name with offlow.session.attach; what is not a
live program's window is a clear error."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offlow import OfflowError
from offlow.channels import ChannelError, Region
from offlow.session import attach
from tests.ctools import C_TESTS, build_c

ECHO = Path(__file__).resolve().parent / "programs" / "echo.py"


def _serving(args: list[str]) -> tuple[subprocess.Popen[str], Path]:
    """`offlow run ECHO --serve ARGS` in a subprocess, and the window it prints."""
    proc = subprocess.Popen([sys.executable, "-m", "offlow.cli", "run", str(ECHO), "--serve",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ})
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 240  # a cold cache compiles the runtime first
    for line in proc.stderr:  # ends at the line, or at EOF when the run fails
        lines.append(line)
        m = re.search(r"attach: offlow\.session\.attach\('([^']+)'\)", line)
        if m:
            return proc, Path(m.group(1))
        if time.monotonic() > deadline:
            break
    proc.kill()
    proc.communicate()
    raise AssertionError(f"no window printed: {lines}")


def test_a_served_program_is_attached_to_by_its_window() -> None:
    proc, window = _serving(["--count", "20"])
    try:
        with attach(window) as a:
            ch = a.channel("echo")
            assert ch.request(b"hello") == b"olleh"
            with pytest.raises(OfflowError, match="has no channel `nope`; channels: echo"):
                a.channel("nope")
            # One host program holds a channel's end at a time.
            with attach(window) as b:
                with pytest.raises(ChannelError) as e:
                    b.channel("echo")
                assert e.value.errno == errno.EBUSY
        with pytest.raises(OfflowError, match="closed"):
            a.channel("echo")
        # Closed, the end is free for the next host program; the program kept running.
        with attach(window) as b:
            assert b.channel("echo").request(b"abc") == b"cba"
            ch = b.channel("echo")
            ch.send(b"bulk" + bytes([3]))
            got = ch.bulk_recv(300_000, timeout=20)
            assert bytes(got) == bytes((i * 7 + 3) & 0xFF for i in range(300_000))
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "seen" in out  # the summary, with the handler's table
    # The run removed its window: nothing to attach to.
    with pytest.raises(OfflowError, match="no such window"):
        attach(window)


def test_serving_a_program_without_channels_is_refused(tmp_path: Path) -> None:
    # A program with neither channels nor tables (a table has its control channel,
    # which --serve serves: docs/control.md).
    prog = tmp_path / "plain_forward.py"
    prog.write_text(
        "from offlow import Program, Sink, Source\n\n\n"
        "def program() -> Program:\n"
        "    p = Program(\"plain_forward\")\n"
        "    rx, tx = Source(\"wire\"), Sink(\"out\")\n"
        "    rx >> tx\n"
        "    p.segment(\"only\", [rx, tx], device=\"nic\")\n"
        "    return p\n")
    res = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(prog), "--serve"],
                         capture_output=True, text=True, timeout=240)
    assert res.returncode != 0
    assert "has no channels to serve" in res.stderr and "Traceback" not in res.stderr


def _window(path: Path, chan_off: int, chan_size: int, size: int = 8192) -> Path:
    """A window header (runtime/core/include/offlow/window.h) with the given channel extent."""
    hdr = bytearray(size)
    hdr[0:8] = (0x314E49574C464F00).to_bytes(8, "little")
    hdr[8:16] = size.to_bytes(8, "little")
    hdr[16:20] = (2).to_bytes(4, "little")
    hdr[24:32] = chan_off.to_bytes(8, "little")
    hdr[32:40] = chan_size.to_bytes(8, "little")
    path.write_bytes(bytes(hdr))
    return path


def test_what_is_not_a_live_window_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OfflowError, match="no such window"):
        attach(tmp_path / "missing")
    with pytest.raises(OfflowError, match="Is a directory"):
        attach(tmp_path)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(OfflowError, match="not an offlow window"):
        attach(empty)
    junk = tmp_path / "junk"
    junk.write_bytes(os.urandom(8192))
    with pytest.raises(OfflowError, match="not an offlow window"):
        attach(junk)
    with pytest.raises(OfflowError, match="has no channels"):
        attach(_window(tmp_path / "none", 0, 0))
    for off, size in ((1 << 40, 4096), (4096, 1 << 20), (4100, 64)):
        with pytest.raises(OfflowError, match="outside the file"):
            attach(_window(tmp_path / f"w{off}-{size}", off, size))
    # The region's own size field (past its header) must fit the file too.
    w = _window(tmp_path / "long", 4096, 4096)
    data = bytearray(w.read_bytes())
    data[4096 + 16:4096 + 24] = (1 << 30).to_bytes(8, "little")
    w.write_bytes(bytes(data))
    with pytest.raises(OfflowError, match="outside the file"):
        attach(w)
    # A header of another size than its file.
    w = _window(tmp_path / "short", 4096, 4096)
    w.write_bytes(w.read_bytes() + bytes(4096))
    with pytest.raises(OfflowError, match="another version or size"):
        attach(w)
    # Inside the extent, an unformatted region (with a channel count to distrust): no
    # channels by any name.
    w = _window(tmp_path / "blank", 4096, 4096)
    data = bytearray(w.read_bytes())
    data[4096 + 12:4096 + 16] = (0xFFFFFFFF).to_bytes(4, "little")
    w.write_bytes(bytes(data))
    with attach(w) as a:
        with pytest.raises(OfflowError, match="has no channel `x`"):
            a.channel("x")


def test_a_stopping_program_is_not_attached_to(tmp_path: Path) -> None:
    path = tmp_path / "win"
    r = Region.create(path, ["a", "b"])
    with attach(path) as a:
        assert a.region is not None and a.region.names() == ["a", "b"]
    r.set_word("stop", 1)
    r.close()
    with pytest.raises(OfflowError, match="stopping"):
        attach(path)


def test_the_window_of_an_ended_program_is_refused(tmp_path: Path) -> None:
    """A window left by a program whose runner is gone (killed before it could remove
    it), or a channel whose device end a dead process held: attach (or opening that
    channel) is a clear error, not a success whose first send fails."""
    path = tmp_path / "win"
    r = Region.create(path, ["a"])
    r.set_word("runner", os.getpid())
    with attach(path) as a:
        assert a.names() == ["a"]
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    r.set_word("runner", gone.pid)
    with pytest.raises(OfflowError, match=f"the program has ended \\(the process that ran it, "
                                          f"pid {gone.pid}, is gone\\)"):
        attach(path)
    r.set_word("runner", 0)  # unknown: not refused
    code = ("import os, signal, sys; from offlow.channels import Region; "
            "Region(sys.argv[1]).channel('a', side=1); os.kill(os.getpid(), signal.SIGKILL)")
    dev = subprocess.run([sys.executable, "-c", code, str(path)], timeout=120)
    assert dev.returncode == -signal.SIGKILL
    with attach(path) as a:
        with pytest.raises(ChannelError, match="its other end belongs to a process that has "
                                               "ended") as e:
            a.channel("a")
        assert e.value.errno == errno.EPIPE
    r.close()


def test_the_window_header_python_writes_and_reads_is_the_c_struct(tmp_path: Path) -> None:
    """Python reads and writes the window header through the layout C exports
    (WindowHeader): a window Python made opens in C (magic, version, size checked) with
    the fields Python wrote, and the words C sets through the struct are the ones Python
    reads."""
    exe = build_c([C_TESTS / "window_fields.c"], "window_fields")
    path = tmp_path / "win"
    r = Region.create(path, ["a", "b"])
    for name, value in (("abort", 3), ("stop", 1), ("drained", 2), ("runner", os.getpid())):
        r.set_word(name, value)
    got = subprocess.run([str(exe), "read", str(path)], capture_output=True, text=True,
                         check=True).stdout.split()
    fields = dict(zip(got[::2], map(int, got[1::2]), strict=True))
    assert fields == {"size": path.stat().st_size, "chan_off": 4096,
                      "chan_size": path.stat().st_size - 4096, "abort": 3, "stop": 1,
                      "drained": 2, "runner": os.getpid()}
    assert r.names() == ["a", "b"]
    subprocess.run([str(exe), "write", str(path)], check=True)
    assert [r.word(n) for n in ("abort", "stop", "drained", "runner")] == [7, 11, 13, 1234567]
    r.close()


def test_mutated_windows_are_refused_or_opened_never_a_crash(tmp_path: Path) -> None:
    """Random bytes written over the window header and the channel region's header of
    a valid window (deterministic seed): each attach either fails with OfflowError or
    opens a region whose names and lookups work; a read out of bounds would crash this
    process, in a subprocess so that the failure is reported rather than fatal."""
    code = f"""
import random
from pathlib import Path
from offlow import OfflowError
from offlow.channels import ChannelError, Region
from offlow.session import attach
from tests.ctools import C_TESTS, build_c
base = Path({str(tmp_path)!r}) / "base"
Region.create(base, ["a", "b"]).close()
good = base.read_bytes()
rng = random.Random(7)
opened = refused = 0
for i in range(400):
    data = bytearray(good)
    for _ in range(rng.randint(1, 6)):
        at = rng.choice([rng.randrange(64), 4096 + rng.randrange(64)])
        data[at] = rng.randrange(256)
    path = base.with_name(f"m{{i}}")
    path.write_bytes(bytes(data))
    try:
        with attach(path) as a:
            a.region.names()
            try:
                a.region.channel("a")  # straight to the C lookup
            except (OfflowError, ChannelError):
                pass
            opened += 1
    except OfflowError:
        refused += 1
    path.unlink()
print(opened, refused)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    opened, refused = map(int, res.stdout.split())
    assert opened + refused == 400 and opened > 0 and refused > 0


def test_the_tables_channels_are_not_offered(tmp_path: Path) -> None:
    """`table.NAME` channels carry tables between a program's processes at start-up; an
    attached host program is not offered them."""
    path = tmp_path / "win"
    Region.create(path, ["a", "table.routes4"]).close()
    with attach(path) as a:
        assert a.names() == ["a"]
        with pytest.raises(OfflowError, match=r"has no channel `table.routes4`; channels: a$"):
            a.channel("table.routes4")
        assert a.channel("a") is a.channel("a")
    with pytest.raises(OfflowError, match="closed"):
        a.names()
