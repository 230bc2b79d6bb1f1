"""Blocking C calls that a signal interrupts.

Python runs a signal's handler (KeyboardInterrupt for Ctrl-C) only between bytecodes:
a C call that waits for a device never sees it. So while such a call may block, this
process's signal wakeup fd (signal.set_wakeup_fd: Python's own C-level handler writes
a byte to it for every signal, in whichever thread the signal lands) points at a pipe
whose read end the C waits poll (ofl_chan_set_intr, runtime/core/include/offlow/wait.h):
the call returns -EINTR within a millisecond, Python runs the handler, and a call
whose handler did not raise goes on waiting. Only the main thread can be interrupted
so (it alone runs handlers); the wakeup fd it had is put back after each call, and
the bytes meant for it are passed on."""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

FOREVER = 2**64 - 1
# Blocking calls first run this long without the wakeup fd (two system calls of a
# few microseconds each): most calls end in it, and a signal waits at most that long.
FIRST_TRY_S = 200e-6


def timeout_ns(timeout: float | None) -> int:
    """A timeout in seconds as the C calls' nanoseconds (None: for ever)."""
    return FOREVER if timeout is None else max(0, int(timeout * 1e9))


class Wakeup:
    """The pipe a blocking call's waits poll, and Python's signal wakeup fd while the
    call runs (see the module docstring)."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    @contextmanager
    def armed(self) -> Iterator[None]:
        """Point the wakeup fd at the pipe for the block (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = signal.set_wakeup_fd(self.w, warn_on_full_buffer=False)
        try:
            yield
        finally:
            signal.set_wakeup_fd(old)
            if old != -1:  # someone else's (an event loop's): give it its bytes
                data = self.drain()
                if data:
                    try:
                        os.write(old, data)
                    except OSError:
                        pass

    def drain(self) -> bytes:
        """What the signals wrote (the pipe is empty after)."""
        out = b""
        while True:
            try:
                chunk = os.read(self.r, 4096)
            except (BlockingIOError, InterruptedError):
                return out
            if not chunk:
                return out
            out += chunk

    def resumable(self, call: Callable[[int], int], timeout: float | None) -> int:
        """Run `call(timeout_ns)` (a direct send or receive: one that -EINTR leaves as
        if it never started) until it ends otherwise or `timeout` s have passed; a
        signal's handler runs in between (and may raise). Returns its last result."""
        deadline = None if timeout is None else time.monotonic() + timeout
        armed = False
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if armed:
                with self.armed():
                    rc = call(timeout_ns(left))
            else:
                first = left is not None and left <= FIRST_TRY_S
                rc = call(timeout_ns(left if first else FIRST_TRY_S))
                if rc == -errno.ETIMEDOUT and not first:
                    armed = True
                    continue
            if rc != -errno.EINTR:
                return rc
            self.drain()  # the handler has run; it did not raise: wait on

    def once(self, call: Callable[[], int]) -> int:
        """Run `call()` (a bulk transfer: -EINTR ends it on both sides) with the
        wakeup fd pointed at the pipe, emptied first."""
        self.drain()
        with self.armed():
            return call()

    def close(self) -> None:
        os.close(self.r)
        os.close(self.w)
