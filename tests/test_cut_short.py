"""A capture's records cut short by its snap length (caplen < len) are never run: each
is counted at the source as `cut_short`, on every device that reads the capture, and
the run's report says how many and what to do. The program is a user's VLAN tag
stripper (tests/programs/tag_strip.py), which parses no IP: before, it forwarded such
a frame cut short, uncounted."""

from __future__ import annotations

import json
import runpy
import struct
import subprocess
from pathlib import Path
from typing import Any

import dpkt
import jsonschema
import pytest

from offlow import Program
from offlow.report import format_summary, summarize
from offlow.runner import RunOptions, build_for, run
from offlow.targets import remote, xdp
from tests.e2e import ROOT, read_frames
from tests.test_remote import run as run_cli
from tests.test_remote import secret_file, serve

TAG_STRIP = ROOT / "tests" / "programs" / "tag_strip.py"
needs_bpf = pytest.mark.skipif(xdp.TARGET.unusable() is not None,
                               reason=f"xdp cannot run here: {xdp.TARGET.unusable()}")
SIZES = (1499, 1500, 1517, 1517, 1500, 1499, 1517)  # dpkt's default snaplen: 1500


def _frame(size: int, k: int) -> bytes:
    """An 802.1Q frame (VID 100 + k) of `size` bytes whose payload is no IP."""
    head = bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, k]) + struct.pack(">HHH", 0x8100,
                                                                       100 + k, 0x88B5)
    return head + bytes((k + i) % 251 for i in range(size - len(head)))


def _capture(path: Path) -> list[bytes]:
    """The frames written as a user writes them: dpkt's Writer with its default
    snaplen (1500), which libpcap applies when reading, as tcpdump does."""
    frames = [_frame(size, k) for k, size in enumerate(SIZES)]
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for k, fr in enumerate(frames):
            w.writepkt(fr, ts=k * 1e-6)
    with open(path, "rb") as f:  # the file says so: snaplen 1500
        assert dpkt.pcap.Reader(f).snaplen == 1500
    return frames


def _stripped(frames: list[bytes]) -> list[bytes]:
    """dpkt's reading: each whole (<= snaplen) frame with its one tag removed."""
    out = []
    for fr in frames:
        if len(fr) > 1500:
            continue
        eth = dpkt.ethernet.Ethernet(fr)
        assert len(eth.vlan_tags) == 1
        out.append(fr[:12] + fr[16:])
    return out


def _run(tmp_path: Path, device: str, loops: int) -> tuple[dict[str, Any], list[bytes]]:
    made = runpy.run_path(str(TAG_STRIP))["program"]()
    assert isinstance(made, Program)
    made.apply_setting(f"edge.device={device}")
    out = tmp_path / f"{device}.pcap"
    o = RunOptions(input=tmp_path / "cut.pcap", output=out, loops=loops, timeout=60)
    b = build_for(made, o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    return summarize(b.plan, res.stats), read_frames(out)


@pytest.mark.parametrize(("device", "loops"), [
    ("host", 1), ("host", 2), ("nic", 1), pytest.param("xdp", 1, marks=needs_bpf)])
def test_records_cut_by_the_snap_length_are_counted_at_the_source_never_forwarded(
        tmp_path: Path, device: str, loops: int) -> None:
    frames = _capture(tmp_path / "cut.pcap")
    cut = sum(len(fr) > 1500 for fr in frames)
    s, got = _run(tmp_path, device, loops)
    assert cut == 3 and got == _stripped(frames) * loops  # the 1500-byte ones go out whole
    src = s["sources"]["wire"]
    assert (src["packets"], src["cut_short"], src["dropped"]) == (
        (len(frames) - cut) * loops, cut * loops, 0)
    a = s["accounting"]
    at_wire = [d for d in a["dropped"] if d["at"] == "wire"]
    assert [(d["reason"], d["packets"]) for d in at_wire] == [("cut_short", cut * loops)]
    assert "larger snap length" in at_wire[0]["what"]
    assert (a["read"], a["forwarded"], a["unaccounted"]) == (
        len(frames) * loops, (len(frames) - cut) * loops, 0)
    # one line of the report says how many and what to do
    line = [x for x in format_summary(s).splitlines() if x.startswith("source wire:")]
    assert line == [f"source wire: {(len(frames) - cut) * loops} packets, {cut * loops} cut "
                    "short in the capture (records holding only part of their frame, never "
                    "run: capture with a larger snap length, e.g. tcpdump -s 0)"]


@pytest.mark.skipif(remote.TARGET.unusable() is not None,
                    reason=f"remote: {remote.TARGET.unusable()}")
def test_a_remote_device_counts_the_records_cut_short_as_the_nic_does(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """`offlow run` with the stripper on a remote device (serve-device on this host):
    the same count at its source, the same frames out, the report's line."""
    frames = _capture(tmp_path / "cut.pcap")
    secret = secret_file(tmp_path)
    _, port = serve(procs, secret)
    out = tmp_path / "remote.pcap"
    rc, s, err = run_cli(procs, [str(TAG_STRIP), "--input", str(tmp_path / "cut.pcap"),
                                 "--output", str(out), "--set", "edge.device=remote:a",
                                 "--remote", f"a=127.0.0.1:{port}", "--secret-file",
                                 str(secret)])
    assert rc == 0 and s["ok"], err
    jsonschema.validate(s, json.loads((ROOT / "docs" / "run-result.schema.json").read_text()))
    assert read_frames(out) == _stripped(frames)
    assert (s["sources"]["wire"]["packets"], s["sources"]["wire"]["cut_short"]) == (4, 3)
    a = s["accounting"]
    assert [(d["at"], d["packets"]) for d in a["dropped"] if d["reason"] == "cut_short"] == [
        ("wire", 3)]
    assert (a["read"], a["unaccounted"]) == (len(frames), 0)
