"""The mtu as a user meets it: any value typed compiles and works (the entry layout the
Python side computes is the one the C compiler lays out), a program that sets none is
sized to its input so a real capture loses no frame, and frames longer than an mtu the
user sets are dropped and counted at the source."""

from __future__ import annotations

import runpy
import subprocess
from dataclasses import replace
from pathlib import Path

import dpkt
import pytest

from offlow import OfflowError, Program, cbuild
from offlow.build import compile_program
from offlow.cli import main
from offlow.codegen.queuegen import entry_decls
from offlow.dsl.loader import load_program
from offlow.ir import Queue
from offlow.ir.layout import max_mtu
from offlow.plan import queue_plan
from tests.e2e import EXAMPLE, TLS, read_frames, run_example
from tests.test_e2e import expected_forwarded

LOGICAL = Path(__file__).resolve().parent / "programs" / "logical_queue.py"
# every residue modulo 8, the usual Ethernet sizes, odd ones, and the top of the range
MTUS = sorted({*range(64, 80), 1234, 1500, 1514, 1518, 2047, 4519, 9000, 9018, 9216,
               16383, 32769, 65521, 65527})


def queues() -> list[Queue]:
    """Queues with one channel, two (the example's IPv4 and IPv6 paths) and three
    channels with different fields, one without packet bytes."""
    logical = runpy.run_path(str(LOGICAL))["program"]()
    assert isinstance(logical, Program)
    tee = load_program(Path(__file__).resolve().parent / "programs" / "tee.py")
    out = [*compile_program(load_program(EXAMPLE)).queues, *compile_program(logical).queues,
           *compile_program(tee).queues]
    assert {len(q.channels) for q in out} >= {1, 2, 3}
    return out


def test_entry_layouts_agree_with_the_c_compiler_for_any_mtu(tmp_path: Path) -> None:
    """One C file declares every queue's entries for every mtu, each with a static
    assertion that sizeof() is the size the Python side uses (for the ring's entry size,
    explain and the window layout); gcc must accept them all."""
    lines = ['#include "offlow/ring.h"', "#include <stdint.h>"]
    for k, q in enumerate(queues()):
        for mtu in {*MTUS, max_mtu(q)}:  # a queue with several channels holds less
            if mtu <= max_mtu(q):
                lines += entry_decls(queue_plan(replace(q, name=f"q{k}_mtu{mtu}"), mtu))
    src = tmp_path / "layouts.c"
    src.write_text("\n".join(lines) + "\n")
    d = cbuild.description()
    res = subprocess.run([d.compiler(), *d.flags("base", "syntax"),
                          *cbuild.include_flags(d.closure(["core"])), str(src)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[:2000]
    assert sum("_Static_assert(sizeof" in x for x in lines) >= len(MTUS) * 4


@pytest.mark.parametrize("mtu", [1500, 9018, 1234])
def test_a_typed_mtu_compiles_forwards_what_fits_and_counts_the_rest(
        mtu: int, tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    s = run_example([f"mtu={mtu}"], input=TLS, output=out)
    assert s["ok"], s["errors"]
    frames = read_frames(TLS)
    assert read_frames(out) == expected_forwarded(frames, mtu)
    assert s["sources"]["rx"]["dropped"] == sum(len(f) > mtu for f in frames)
    assert s["mtu"] == mtu


def test_a_program_without_an_mtu_takes_every_frame_of_the_capture(tmp_path: Path) -> None:
    """The demo capture's three 4.4-4.5 KB frames (coalesced TCP segments) go through."""
    out = tmp_path / "out.pcap"
    s = run_example(input=TLS, output=out)
    assert s["ok"], s["errors"]
    assert len(read_frames(out)) == len(read_frames(TLS)) == 1095
    assert s["sources"]["rx"]["dropped"] == 0
    assert s["mtu"] == 4519 and "longest frame of tls_ciphers.pcap" in s["mtu_why"]


def test_synthetic_traffic_sizes_the_mtu_to_its_largest_frame() -> None:
    s = run_example(count=300, sizes="64:3,9000:1")
    assert s["ok"], s["errors"]
    assert s["mtu"] == 9000
    assert s["sources"]["rx"]["packets"] == 300 and s["sources"]["rx"].get("dropped", 0) == 0


def test_explain_states_the_mtu_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(EXAMPLE), "--input", str(TLS)]) == 0
    out = capsys.readouterr().out
    assert "mtu 4519 B (the longest frame of tls_ciphers.pcap)" in out
    assert main(["explain", str(EXAMPLE), "--set", "mtu=1234"]) == 0
    assert "mtu 1234 B (set by the program or --set mtu)" in capsys.readouterr().out


def jumbo_capture(path: Path, sizes: list[int]) -> list[bytes]:
    """Ethernet/IPv4/UDP frames of the given sizes (GRO-sized ones too)."""
    frames = []
    for n in sizes:
        udp = dpkt.udp.UDP(sport=1000, dport=2000, data=b"x" * (n - 42))
        udp.ulen = len(udp)
        ip = dpkt.ip.IP(src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02", p=17, ttl=64,
                        data=udp)
        frames.append(bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                                   type=0x0800, data=ip)))
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for k, fr in enumerate(frames):
            w.writepkt(fr, ts=1.0 + k)
    return frames


def test_gro_sized_frames_near_the_top_of_the_range(tmp_path: Path) -> None:
    """A queue with several channels counts fields and packet bytes in one 16-bit length:
    an mtu fitted to such a capture is lowered to what it holds (the longest frame is
    then dropped and counted), and a typed mtu above it is one clear error saying how
    far to lower it."""
    with pytest.raises(OfflowError, match=r"set the mtu to at most (\d+)") as err:
        compile_program(load_program(EXAMPLE, ["mtu=65535"]))
    most = int(str(err.value).rsplit(" ", 1)[1])
    assert 65535 - 64 < most < 65535  # the example's queue has a few bytes of fields
    compile_program(load_program(EXAMPLE, [f"mtu={most}"]))
    with pytest.raises(OfflowError):
        compile_program(load_program(EXAMPLE, [f"mtu={most + 1}"]))
    cap, out = tmp_path / "gro.pcap", tmp_path / "out.pcap"
    frames = jumbo_capture(cap, [60, 1514, 9018, 64000, 65530])
    s = run_example(input=cap, output=out)
    assert s["ok"], s["errors"]
    assert s["mtu"] == most and "lowered" in s["mtu_why"]
    assert read_frames(out) == expected_forwarded(frames, most)
    assert s["sources"]["rx"]["dropped"] == 1


@pytest.mark.parametrize("value", ["63", "65536", "0", "-1", "big"])
def test_an_mtu_out_of_range_is_refused_with_the_range(value: str) -> None:
    with pytest.raises(OfflowError, match="mtu"):
        load_program(EXAMPLE, [f"mtu={value}"])
