"""Profile-scaled emulation (`offlow run --profile`): the device's elements are slowed
by the profile's factor per kind of work; what the program computes does not change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from offlow import cbuild
from offlow.build import DATA
from offlow.dsl.loader import load_program
from offlow.runner import RunOptions, build_for, run

ROOT = Path(__file__).resolve().parents[1]
QUERY = ROOT / "examples" / "stream_query.py"


def _run(tmp_path: Path, profile: str) -> tuple[bytes, dict]:
    out = tmp_path / f"out-{profile or 'plain'}.pcap"
    opts = RunOptions(count=3000, sizes="206:1,300:1", output=out, profile=profile)
    b = build_for(load_program(QUERY), opts, extra_flags=cbuild.flags("element_time"))
    res = run(b, opts)
    assert res.ok, res.errors
    return out.read_bytes(), res.stats


def test_a_profile_slows_the_device_and_changes_nothing_it_computes(tmp_path):
    plain, plain_stats = _run(tmp_path, "")
    slowed, stats = _run(tmp_path, "cmp-nic-200")
    assert slowed == plain  # the same frames out, in the same order
    nic = stats["nic"]["cores"]
    # cmp-nic-200 runs every kind of work at 1/10 of this host: each turn's element work
    # is followed by at least 9 times as much spinning (more when a spin is preempted)
    work = sum(c["work_ns"] for c in nic)
    spun = sum(c["dilated_ns"] for c in nic)
    assert work > 0 and 8.5 * work < spun < 200 * work
    for c in stats["host"]["cores"] + plain_stats["nic"]["cores"]:
        assert "dilated_ns" not in c  # the host is not slowed, nor a run without --profile


def _offlow(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OFFLOW_DATA=str(DATA))
    return subprocess.run([sys.executable, "-m", "offlow.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.mark.parametrize("profile,message", [
    ("h100-pcie5", "faster than this host's at integer, lookup, hash work"),
    ("bluefield-9", "no device profile `bluefield-9`"),
])
def test_a_profile_that_cannot_be_emulated_is_refused_before_the_run(profile, message):
    r = _offlow("run", str(QUERY), "--count", "100", "--profile", profile)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "offlow: running" not in r.stderr
