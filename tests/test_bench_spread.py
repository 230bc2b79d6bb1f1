"""benchmarks.common.spread: how every benchmark reports repeated measurements."""

from __future__ import annotations

from benchmarks.common.spread import spread


def test_median_range_and_count() -> None:
    assert spread([3.0, 1.0, 2.0, 10.0]) == {"median": 2.5, "min": 1.0, "max": 10.0, "n": 4}
    assert spread((7.0,)) == {"median": 7.0, "min": 7.0, "max": 7.0, "n": 1}


def test_nothing_measured_is_none_not_an_error() -> None:
    assert spread([]) is None
