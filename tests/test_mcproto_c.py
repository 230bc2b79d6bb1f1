"""The memcached protocol parser and writers (runtime/lib/kvs/tests/test_mcproto.c): every binary
opcode, every parse error with its span, fatality and reply, text commands, requests
cut at every byte offset as a TCP stream delivers them, the UDP frame header, and
the response writers. Built plain and with ASan+UBSan (exact-size input buffers, so
a read past a request's end is caught)."""

from __future__ import annotations

import pytest

from tests.ctools import assert_passed, build_c, lib_test, run_c


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "asan"])
def test_mcproto_parses_and_answers_like_memcached(sanitize: bool) -> None:
    exe = build_c([lib_test("kvs", "test_mcproto")], "test_mcproto", ["kvs"], sanitize)
    res = run_c(exe, timeout=60)
    assert_passed(res)
