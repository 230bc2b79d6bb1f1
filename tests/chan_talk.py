"""A host program as a user writes one, run by the remote tests (in a namespace of its
own when asked): it starts a program with a session, talks to its channel and prints
what it got as JSON, so that a run with the device on `nic` and one on `remote:NAME`
can be compared. `python -m tests.chan_talk echo|ledger PROGRAM [ENDPOINT SECRET]`."""

from __future__ import annotations

import errno
import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from offlow.channels import Channel, ChannelError, ChannelTimeout
from offlow.dsl.loader import load_program
from offlow.runner import RunOptions
from offlow.session import session

T = 30.0  # seconds a call may wait: generous, the machine may be loaded


def error_of(call: Any) -> str:
    """What `call()` raised (the error's class and errno name), or "none"."""
    try:
        call()
    except ChannelTimeout:
        return "ChannelTimeout"
    except ChannelError as e:
        return f"ChannelError {errno.errorcode.get(e.errno, e.errno)}"
    return "none"


def echo(ch: Channel) -> dict[str, Any]:
    """tests/programs/echo.py: direct messages of sizes 0..56, answers in bulk, the
    errors a host program meets."""
    got: dict[str, Any] = {"direct": [ch.request(bytes(range(n)), T).hex() for n in
                                      (0, 1, 7, 31, 55, 56)]}
    got["oversize"] = error_of(lambda: ch.send(bytes(57)))
    ch.send(b"quiet, never answered", T)
    got["timeout"] = error_of(lambda: ch.recv(timeout=0.3))
    bulks = []
    for k in (5, 200):
        ch.send(b"bulk" + bytes([k]), T)
        blob = bytes(ch.bulk_recv(300_000, timeout=T))
        bulks.append([len(blob), zlib.crc32(blob),
                      blob == bytes((i * 7 + k) & 0xFF for i in range(300_000))])
        bulks.append(ch.request(b"after", T).hex())
    got["bulk"] = bulks
    ch.send(b"bulk" + bytes([1]), T)
    got["bulk_other_size"] = error_of(lambda: ch.bulk_recv(bytearray(1000), timeout=T))
    got["after_errors"] = ch.request(b"xy", T).hex()
    return got


def ledger(ch: Channel) -> dict[str, Any]:
    """tests/programs/ledger.py: odd sizes, signed amounts, a bulk answer of an odd
    size between direct messages."""
    import struct
    answers = []
    for amounts, tail in (([5, -3], b""), ([2**31 - 1, 1], b"\x01\x02\x03"), ([], b"z"),
                          (list(range(-6, 7)), b"ab")):
        msg = struct.pack(f"<{len(amounts)}i", *amounts) + tail
        answers.append(ch.request(msg, T).hex())
    ch.send(b"dump\x07", T)
    pages = bytes(ch.bulk_recv(131_071, timeout=T))
    answers.append([len(pages), pages == bytes((i * 13 + 7) % 251 for i in range(131_071))])
    answers.append(ch.request(struct.pack("<i", -1), T).hex())
    return {"answers": answers}


def main(argv: list[str]) -> int:
    kind, program = argv[0], Path(argv[1])
    opts = RunOptions(count=50)
    if len(argv) > 2:
        opts = RunOptions(count=50, remotes=(argv[2],), secret_file=Path(argv[3]))
    t0 = time.monotonic()
    with session(load_program(program), opts) as s:
        ch = s.channel(kind)
        # the first message waits for the device's process, started on the far machine
        # (or as the nic's) when the run starts: under load that takes seconds
        ch.send(b"quiet" if kind == "echo" else b"", timeout=60)
        if kind == "ledger":
            ch.recv(timeout=60)
        got = echo(ch) if kind == "echo" else ledger(ch)
        s.wait_drained()
    assert s.result is not None
    dev = next(iter(k for k in s.result.stats if k != "host"), "")
    small = {k: v for k, v in s.result.stats[dev]["tables"].items() if len(v) <= 4}
    print(json.dumps({"got": got, "ok": s.result.ok, "tables": small,
                      "seconds": round(time.monotonic() - t0, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
