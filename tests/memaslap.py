"""memcaslap (libmemcached's load generator) with verification, against a server the
test runs; shared by the UDP/TCP interop tests."""

from __future__ import annotations

import re
import subprocess

import pytest

from offlow.kvs.tools import HOST, setup_memaslap


def memaslap_stats(out: str) -> dict[str, int]:
    """The `name: number` lines of memcaslap's report."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^(\w+): (\d+)\s*$", out, re.MULTILINE)}


def run_verified(port: int, mode: list[str], seconds: int, bad: tuple[str, ...],
                 timeout: float) -> None:
    """memcaslap for `seconds` on 127.0.0.1:`port` (8 connections, a tenth of the gets
    verified; `mode`: -B binary, -U UDP): it must exit 0 having run gets and sets,
    report the verification, count none of `bad` and print no error. Skips the test
    when memcaslap cannot be had."""
    tool, why = setup_memaslap()
    if not tool:
        pytest.skip(f"memcaslap unavailable: {why}")
    cmd = [tool, "-s", f"{HOST}:{port}", "-t", f"{seconds}s", "-T", "1", "-c", "8",
           "-v", "0.1", *mode]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    stats = memaslap_stats(out)
    assert stats.get("cmd_get", 0) > 0 and stats.get("cmd_set", 0) > 0, out
    assert "verify_failed" in stats, out   # -v: a tenth of the gets are checked
    for name in bad:
        assert stats.get(name, 0) == 0, out
    # memcaslap reports protocol trouble in free text ("... error", "unexpected ...")
    assert not re.search(r"error|unexpect", out, re.IGNORECASE), out
