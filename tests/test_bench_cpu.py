"""benchmarks/common/cpu.py: the share of a CPU a forwarding thread got, from readings of
its threads' CPU time (what `offlow bench router --sweeps ports` divides rates by)."""

from __future__ import annotations

import os
import threading
import time

from benchmarks.common.cpu import busiest, share_before_end, thread_cpu, watch


def test_share_is_taken_before_the_busiest_threads_last_reading() -> None:
    # thread "7" runs at half a CPU for 10 s then ends; "8" (idle) lives on after it
    samples = [(t * 0.1, {"7": t * 0.05, "8": 0.01}) for t in range(101)]
    samples += [(10.0 + t * 0.1, {"8": 0.01}) for t in range(1, 30)]
    assert abs(share_before_end(samples, 8.0, 1.0) - 0.5) < 1e-9
    assert share_before_end(samples, 0.05, 0.0) is None  # one reading in the window
    assert share_before_end([], 1.0, 0.0) is None
    assert busiest({"7": 1.0}, {"7": 1.5, "9": 0.2}) == 0.5


def test_watch_reads_a_spinning_thread_of_this_process() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    th = threading.Thread(target=spin)
    pids = {"me": os.getpid()}
    with watch(pids, "me", every=0.02) as samples:
        th.start()
        time.sleep(0.6)
        stop.set()
        th.join()
    assert len(samples) > 5 and thread_cpu(os.getpid())
    # a spinning thread gets some CPU (how much depends on the machine's load)
    assert busiest(samples[0][1], samples[-1][1]) > 0
