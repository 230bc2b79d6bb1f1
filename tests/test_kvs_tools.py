"""offlow/kvs/tools.py's servers: how they end."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from offlow.kvs.tools import Server, kvs_server, memcached, setup_memcached, udp_echo
from tests.kvs_replay import memcached_replies, request_mix


def test_a_real_memcached_is_killed_at_the_end_of_its_context() -> None:
    """memcached keeps nothing and says nothing on a stop, and a SIGTERM ends it only at
    its clock's next tick (up to a second for every oracle run): it is killed instead,
    once it has answered."""
    path, why = setup_memcached()
    if not path:
        pytest.skip(f"memcached unavailable: {why}")
    requests = request_mix(20, keys=3, seed=1)
    with memcached(threads=1) as m:
        assert len(memcached_replies(m.port, requests)) == len(requests)
    assert m.proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["term", "int"])
@pytest.mark.parametrize("start", [udp_echo, kvs_server], ids=["udp_echo", "kvs_server"])
def test_our_servers_stop_on_either_signal_and_print_their_counters(
        start: Callable[[], AbstractContextManager[Server]], sig: int) -> None:
    """Their main thread waits on tool_stop_signals' fd (runtime/tools/tool_io.c): a
    SIGTERM or a SIGINT ends the wait, not the process, so the workers are joined and
    the counters printed, exit status 0."""
    with start() as s:
        s.stop_signal = sig
    assert s.proc.returncode == 0, s.output
    counters = json.loads(s.output.strip().splitlines()[-1])
    assert counters.get("datagrams", counters.get("requests")) == 0
