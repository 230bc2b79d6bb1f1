"""offlow.debian.find_or_install: a peer program found at once, or installed with
apt-get and found, or the reason it is not there; and the setups built on it
(benchmarks.common.peers.setup_ucx, offlow.kvs.tools' memcached and memcaslap)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from benchmarks.common import peers
from offlow import debian


class FakeApt:
    """apt_install's stand-in: records its calls, answers `why` (None: installed), and
    makes `find` find the tool when the install succeeds."""

    def __init__(self, why: str | None, installs: bool = True) -> None:
        self.why, self.installs = why, installs
        self.calls: list[tuple[list[str], str, str]] = []
        self.installed = False

    def __call__(self, packages: Sequence[str], what: str, who: str = "setup") -> str | None:
        self.calls.append((list(packages), what, who))
        self.installed = self.why is None and self.installs
        return self.why

    def find(self) -> str | None:
        return "/usr/bin/tool" if self.installed else None


def test_found_at_once_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    apt = FakeApt(None)
    monkeypatch.setattr(debian, "apt_install", apt)
    assert debian.find_or_install(lambda: "1.2", ["p"], "tool", "setup", "gone") == ("1.2", None)
    assert apt.calls == []


def test_missing_is_installed_then_found(monkeypatch: pytest.MonkeyPatch) -> None:
    apt = FakeApt(None)
    monkeypatch.setattr(debian, "apt_install", apt)
    assert debian.find_or_install(apt.find, ["p", "q"], "tool (p)", "T setup", "gone") == (
        "/usr/bin/tool", None)
    assert apt.calls == [(["p", "q"], "tool (p)", "T setup")]


def test_an_install_that_fails_gives_apt_gets_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(debian, "apt_install", FakeApt("installing it needs root"))
    assert debian.find_or_install(lambda: None, ["p"], "tool", "setup", "gone") == (
        None, "installing it needs root")


def test_installed_and_still_missing_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """(benchmarks/remote.py's own copy answered (None, None) here: no path, no reason.)"""
    apt = FakeApt(None, installs=False)
    monkeypatch.setattr(debian, "apt_install", apt)
    monkeypatch.setattr(peers.shutil, "which", lambda name: None)
    assert peers.setup_ucx() == (None, "ucx-utils installed but no ucx_perftest")
    assert apt.calls == [(["ucx-utils"], "ucx_perftest", "UCX setup")]
    # not asked to install: says what is missing, installs nothing
    assert peers.setup_ucx(install=False) == (
        None, "ucx_perftest is not installed (Debian package ucx-utils)")
    assert len(apt.calls) == 1
