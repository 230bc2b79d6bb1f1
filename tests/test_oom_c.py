"""Out of memory in the runtime (tests/c/test_oom.c): each allocation of the LPM table
builds, the route-file reader, the key-value store, the NIC cache, the queue ends, a
channel manager, registered channel memory, a whole-file read, the window, the
synthetic, pcap and UDP ports and the key-value store's TCP server fails in turn (the
runtime's malloc, calloc, realloc, aligned_alloc and mmap are wrapped at link time),
and each failure must return -ENOMEM with nothing built; so must each allocation of a
text and a binary session served over TCP (100 KB values, multi-gets, stats): the
client gets memcached's out-of-memory answers where replies were lost, or sees the
connection closed, never a wrong answer. Under ASan+UBSan, nothing may leak either."""

from __future__ import annotations

from pathlib import Path

import pytest

from offlow import cbuild
from tests.ctools import C_TESTS, assert_passed, build_c, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_every_failed_allocation_is_enomem_and_leaks_nothing(sanitize: bool,
                                                             tmp_path: Path) -> None:
    exe = build_c([C_TESTS / "test_oom.c"], "test_oom", ["lpm", "kvs"], sanitize,
                  link=cbuild.flags("wrap_alloc"))
    res = run_c(exe, "--tmp", str(tmp_path), timeout=300)
    assert_passed(res)
    assert res.stdout.count("gives -ENOMEM") == 18
