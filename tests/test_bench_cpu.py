"""benchmarks/common/cpu.py: CPU time of a process's threads (what the peers' rates in
`offlow bench router --sweeps ports` are divided by)."""

from __future__ import annotations

import os
import threading

from benchmarks.common.cpu import busiest, thread_cpu


def test_busiest_is_the_thread_that_used_the_most_between_two_readings() -> None:
    assert busiest({"7": 1.0}, {"7": 1.5, "9": 0.2}) == 0.5
    assert busiest({"7": 1.0}, {"9": 0.7}) == 0.7  # a thread born in between
    assert busiest({}, {}) == 0.0


def test_thread_cpu_reads_a_spinning_thread_of_this_process() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    before = thread_cpu(os.getpid())
    th = threading.Thread(target=spin)
    th.start()
    stop.wait(0.5)
    after = thread_cpu(os.getpid())
    stop.set()
    th.join()
    assert before and after
    # a spinning thread gets some CPU (how much depends on the machine's load)
    assert busiest(before, after) > 0
