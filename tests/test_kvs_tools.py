"""offlow/kvs/tools.py's servers: how they end."""

from __future__ import annotations

import signal

import pytest

from offlow.kvs.tools import memcached, setup_memcached
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
