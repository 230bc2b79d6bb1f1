"""`offlow bench xdp --e2e` (benchmarks/xdp_e2e.py): its frames are what the program
forwards, and a short run measures every row through a veth pair in a namespace it
removes; no timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dpkt
import pytest

from benchmarks import xdp_e2e
from offlow.errors import OfflowError
from offlow.targets import xdp

WHY_NOT = xdp.TARGET.unusable() or (None if os.geteuid() == 0 else "not root")


class _Run:
    """Stands for a row's `offlow run`: up for `reads` looks at its counters (None:
    until the end)."""

    def __init__(self, reads: int | None = None) -> None:
        self.reads = reads

    def poll(self) -> int | None:
        return None if self.reads is None or self.reads > 0 else 0


def _scripted(monkeypatch: pytest.MonkeyPatch, run: _Run, answers: list) -> list:
    """The run's live counters are `answers`, one per look (the last repeated); returns
    the list of what each look got."""
    seen: list = []

    def totals(window: Path) -> dict | None:
        got = answers[min(len(seen), len(answers) - 1)]
        seen.append(got)
        if run.reads is not None:
            run.reads -= 1
        return got

    monkeypatch.setattr(xdp_e2e, "_totals", totals)
    monkeypatch.setattr(xdp_e2e, "progress_totals", lambda stats: stats)
    monkeypatch.setattr(xdp_e2e, "SETTLED", 0.05)
    return seen


def test_a_row_whose_run_ends_before_naming_its_window_says_why(tmp_path: Path) -> None:
    """(Its window file never written: the run's own error, not a wait to the deadline.)"""
    run = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit('no such iface')"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with pytest.raises(OfflowError, match=r"offlow run \(xdp\) ended early: no such iface"):
        xdp_e2e._started(tmp_path / "window.json", run, "xdp")


def test_a_row_starts_once_every_process_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _Run()
    seen = _scripted(monkeypatch, run, [None, {"nic": {}}, {"nic": {}, "host": {}}])
    assert xdp_e2e._answering(Path("w"), {"nic", "host"}, run)
    assert len(seen) == 3
    gone = _Run(reads=2)
    _scripted(monkeypatch, gone, [{"nic": {}}])
    assert not xdp_e2e._answering(Path("w"), {"nic", "host"}, gone)


def test_a_row_ends_once_its_counters_stop_moving(monkeypatch: pytest.MonkeyPatch) -> None:
    moving = [{"read": n, "forwarded": n, "dropped": 0} for n in (10, 20, 30)]
    run = _Run()
    seen = _scripted(monkeypatch, run, [*moving, moving[-1] | {"dropped": 1}, moving[-1]])
    assert xdp_e2e._settled(Path("w"), run)
    assert seen[:5] == [*moving, moving[-1] | {"dropped": 1}, moving[-1]]  # none skipped
    assert all(a == seen[-1] for a in seen[4:])  # ended on a still count
    assert len(seen) >= 6  # (the last one seen at least twice)


def test_a_row_whose_run_ends_first_is_not_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _Run(reads=3)
    _scripted(monkeypatch, run, [{"read": n} for n in (1, 2, 3)])
    assert not xdp_e2e._settled(Path("w"), run)
    ended = _Run()
    _scripted(monkeypatch, ended, [{"read": 1}, None])  # (the window gone: it ended)
    assert not xdp_e2e._settled(Path("w"), ended)


def test_the_generators_frames_are_64_byte_ipv4_udp_with_good_checksums() -> None:
    frames = xdp_e2e.frames()
    assert len({f[30:34] for f in frames}) == len(frames) == 8  # 8 destinations
    for f in frames:
        ip = dpkt.ethernet.Ethernet(f).data
        assert len(f) == 60 and isinstance(ip, dpkt.ip.IP) and ip.len == 46 and ip.ttl == 64
        raw = bytes(f[14:34])
        total = sum(int.from_bytes(raw[k:k + 2], "big") for k in range(0, 20, 2))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        assert total == 0xFFFF
        assert isinstance(ip.data, dpkt.udp.UDP) and ip.data.ulen == 26


@pytest.mark.skipif(WHY_NOT is not None, reason=f"cannot run here: {WHY_NOT}")
def test_a_short_run_measures_each_placement_and_leaves_no_namespace(tmp_path: Path) -> None:
    res = xdp_e2e.measure(0.3)
    rows = {r["row"]: r for r in res["rows"]}
    assert list(rows) == [xdp_e2e.CEILING, "xdp", "xdp+host", "nic", "host"]
    for name in ("xdp", "xdp+host", "nic", "host"):
        r = rows[name]
        assert 0 < r["took"] <= r["sent"], r
        assert 0 < r["forwarded"] <= r["took"], r  # (a port's sink may drop, counted)
    assert rows["xdp"]["forwarded"] == rows["xdp"]["took"]  # every frame: TTL 64, good sums
    assert set(res["ratios"]) == {"xdp/nic", "xdp/host", "xdp+host/nic", "xdp+host/host",
                                  "xdp/generator alone"}
    report = xdp_e2e.format_report(res)
    assert "machine: " in report and "ratios: xdp/nic" in report
    xdp_e2e.plot(res, tmp_path / "e2e.png")
    assert (tmp_path / "e2e.png").read_bytes()[:4] == b"\x89PNG"
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"ofl-bench-e2e-{os.getpid()}" not in listed
