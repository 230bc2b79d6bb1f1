"""Channels from Python: open a channel of a running program by name and exchange
direct messages and bulk transfers with the device that serves it.

This is a thin ctypes layer over the C channel API (runtime/core/include/offlow/chan.h),
built once as a shared library: the blocking calls wait in C (the GIL is released;
spin, yield, then nap: they cost no CPU while the device is idle, and a signal such
as Ctrl-C ends the wait and raises here: offlow/interrupt.py),
and bulk transfers hand the C side the address of the caller's buffer (bytes,
bytearray, memoryview or a contiguous NumPy array), so the device's copy engine
moves the bytes straight out of (or into) it: no extra copy in Python. Arrays from
`Region.array` live in registered memory (a sealed memfd the device maps once):
between processes their transfers take one copy instead of two."""

from __future__ import annotations

import ctypes
import errno
import os
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offlow import cbuild
from offlow.errors import OfflowError
from offlow.interrupt import Wakeup, timeout_ns
from offlow.lifecycle import pid_alive

if TYPE_CHECKING:
    import numpy as np

MSG_MAX = 56
SIDE_A, SIDE_B = 0, 1


class ChannelError(OfflowError):
    """A channel call failed; `errno` is the (positive) errno value."""

    def __init__(self, what: str, err: int, text: str) -> None:
        super().__init__(f"{what}: {text}")
        self.errno = err


class ChannelTimeout(ChannelError):
    """A blocking call ran out of time (ETIMEDOUT), or a call found the peer not ready
    (EAGAIN; Channel.try_send and try_recv answer that with False / None instead)."""


# The runtime modules the channel library holds: the core's chan*.c, crc32c.c with
# simd.c (which CRC32C path), and window.c for the window header's layout.
MODULES = tuple(("core", m) for m in ("chan", "chan_abi", "chan_bulk", "chan_mem", "chan_mgr",
                                      "crc32c", "simd", "wait", "err", "window"))


def _library() -> ctypes.CDLL:
    """Build (once per content hash) and load the channel library."""
    so = cbuild.build_shared("libofflow-chan.so", MODULES)
    lib = ctypes.CDLL(str(so))
    vp, u32, u64, sz, i32 = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t,
                             ctypes.c_int)
    for name, res, args in [
        ("ofl_chan_end_size", sz, []),
        ("ofl_chan_region_size", sz, [u32]),
        ("ofl_chan_region_format", i32, [vp, sz, u32]),
        ("ofl_chan_create", i32, [vp, ctypes.c_char_p]),
        ("ofl_chan_lookup", i32, [vp, ctypes.c_char_p]),
        ("ofl_chan_name", ctypes.c_char_p, [vp, u32]),
        ("ofl_chan_open", i32, [vp, vp, u32, i32, vp]),
        ("ofl_chan_close", None, [vp]),
        ("ofl_chan_peer_state", i32, [vp]),
        ("ofl_chan_peer_why", i32, [vp]),
        ("ofl_chan_set_intr", i32, [vp, i32]),
        ("ofl_chan_set_chunk", i32, [vp, u32]),
        ("ofl_chan_send", i32, [vp, vp, sz, u64]),
        ("ofl_chan_recv", i32, [vp, vp, sz, u64]),
        ("ofl_chan_try_send", i32, [vp, vp, sz]),
        ("ofl_chan_try_recv", i32, [vp, vp, sz]),
        ("ofl_chan_bulk_send", i32, [vp, vp, sz, u64]),
        ("ofl_chan_bulk_recv", i32, [vp, vp, sz, u64]),
        ("ofl_chan_bulk_send_mem", i32, [vp, vp, sz, sz, u64]),
        ("ofl_chan_bulk_recv_mem", i32, [vp, vp, sz, sz, u64]),
        ("ofl_chan_mem_create", i32, [sz]),
        ("ofl_chan_mem_attach", i32, [vp, i32, vp, sz]),
        ("ofl_chan_inject_corruption", None, [vp, u64]),
        ("ofl_chan_get_stats", None, [vp, vp]),
        ("ofl_crc32c", u32, [u32, vp, sz]),
        ("ofl_strerror", ctypes.c_char_p, [i32]),
        ("ofl_window_hdr_field", i32, [ctypes.c_char_p, ctypes.POINTER(u64),
                                       ctypes.POINTER(u32)]),
        ("ofl_window_hdr_const", i32, [ctypes.c_char_p, ctypes.POINTER(u64)]),
    ]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


class _MemDesc(ctypes.Structure):
    """struct ofl_chan_mem (runtime/core/include/offlow/chan.h)."""

    _fields_ = [("addr", ctypes.c_void_p), ("len", ctypes.c_uint64), ("fd", ctypes.c_int),
                ("ino", ctypes.c_uint64)]


class _Stats(ctypes.Structure):
    """struct ofl_chan_stats (runtime/core/include/offlow/chan.h)."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "sent", "posted", "received", "withdrawn", "bulk_sent", "bulk_received", "bulk_failed",
        "chunks", "bytes_memcpy", "bytes_vm", "bytes_bounce", "bytes_mem")] + [
        ("paths", ctypes.c_uint32)]


@dataclass
class _Registered:
    """One block of registered memory: its descriptor, the memfd (kept open while the
    region is: the device maps it through /proc/<pid>/fd) and the mapping."""

    desc: _MemDesc
    fd: int
    mm: Any

    def find(self, addr: int, n: int) -> int | None:
        """Offset of [addr, addr + n) in this block, or None when not inside it."""
        base = self.desc.addr or 0
        return addr - base if base <= addr and addr + n <= base + self.desc.len else None


@dataclass
class _Lib:
    """The loaded library, shared by the channels of one Region (no module state)."""

    c: ctypes.CDLL

    def check(self, rc: int, what: str) -> int:
        if rc >= 0:
            return rc
        text = self.c.ofl_strerror(rc).decode()
        cls = ChannelTimeout if -rc in (errno.ETIMEDOUT, errno.EAGAIN) else ChannelError
        raise cls(what, -rc, text)


@dataclass(frozen=True)
class WindowHeader:
    """The window header's layout as the C runtime states it (window.h:
    ofl_window_hdr_field, ofl_window_hdr_const): no offset of it is written in Python.
    Fields are read and written by name ("chan_off", "stop", ...), little-endian
    unsigned, each its C size."""

    fields: dict[str, tuple[int, int]]  # name -> (byte offset, size)
    magic: int
    version: int
    size: int  # OFL_WINDOW_HDR_SIZE: where the rest of the window starts

    NAMES = ("magic", "size", "version", "abort", "chan_off", "chan_size", "stop", "drained",
             "runner", "stats_req")

    @classmethod
    def of(cls, lib: _Lib) -> WindowHeader:
        off, size, value = ctypes.c_uint64(), ctypes.c_uint32(), ctypes.c_uint64()
        fields = {}
        for name in cls.NAMES:
            lib.check(lib.c.ofl_window_hdr_field(name.encode(), ctypes.byref(off),
                                                 ctypes.byref(size)), f"window field {name}")
            fields[name] = (off.value, size.value)
        consts = []
        for name in ("magic", "version", "hdr_size"):
            lib.check(lib.c.ofl_window_hdr_const(name.encode(), ctypes.byref(value)),
                      f"window constant {name}")
            consts.append(value.value)
        return cls(fields, *consts)

    def get(self, m: Any, name: str) -> int:
        off, size = self.fields[name]
        return int.from_bytes(m[off:off + size], "little")

    def put(self, m: Any, name: str, value: int) -> None:
        off, size = self.fields[name]
        m[off:off + size] = value.to_bytes(size, "little")


def _address(buf: Any, writable: bool) -> tuple[int, int, Any]:
    """(address, length, keep-alive) of a buffer's bytes without copying them; a
    non-contiguous NumPy array is copied once (that is the only copy made)."""
    import numpy as np

    if isinstance(buf, np.ndarray):
        arr = buf if buf.flags.c_contiguous else np.ascontiguousarray(buf)
        if writable and not arr.flags.writeable:
            raise OfflowError("bulk_recv needs a writable buffer")
        return arr.ctypes.data, arr.nbytes, arr
    view = memoryview(buf).cast("B")
    if writable and view.readonly:
        raise OfflowError("bulk_recv needs a writable buffer (bytearray, NumPy array)")
    arr = np.frombuffer(view, dtype=np.uint8)
    return arr.ctypes.data, arr.nbytes, arr


def _message(msg: object, what: str) -> bytes:
    """A direct message's bytes: bytes, a bytearray or a memoryview (bytes(5) would be
    five zero bytes, bytes("x") an error about encodings: neither says what is wrong)."""
    if isinstance(msg, bytes | bytearray | memoryview):
        return bytes(msg)
    hint = f": encode it ({msg[:20]!r}.encode())" if isinstance(msg, str) else ""
    raise TypeError(f"{what}: a message is bytes, a bytearray or a memoryview, not "
                    f"{type(msg).__name__}{hint}")


class Channel:
    """One end of a channel (side A: the host program's). Not for two threads at
    once in the same direction."""

    def __init__(self, lib: _Lib, region: int, name: str, wakeup: Wakeup,
                 abort: int | None = None, side: int = SIDE_A,
                 registered: list[_Registered] | None = None) -> None:
        self.name = name
        self._lib = lib
        self._wakeup = wakeup
        self._registered = registered if registered is not None else []
        self._end = ctypes.create_string_buffer(lib.c.ofl_chan_end_size())
        cid = lib.check(lib.c.ofl_chan_lookup(region, name.encode()), f"channel `{name}`")
        lib.check(lib.c.ofl_chan_open(self._end, region, cid, side, abort),
                  f"opening channel `{name}`")
        self.id = cid
        self._open = True
        lib.c.ofl_chan_set_intr(self._end, wakeup.r)
        if lib.c.ofl_chan_peer_state(self._end) == -errno.EPIPE:
            self.close()
            raise ChannelError(f"channel `{name}`", errno.EPIPE,
                               "its other end belongs to a process that has ended")

    def _check(self, rc: int, what: str) -> int:
        """_Lib.check, and for a channel the device closed because its handler failed
        (the manager's ofl_chan_close_why), that failure: a bare "Broken pipe" said
        nothing of a REPLY too long."""
        why = self._lib.c.ofl_chan_peer_why(self._end) if rc == -errno.EPIPE else 0
        if why >= 0:
            return self._lib.check(rc, what)
        text = self._lib.c.ofl_strerror(why).decode()
        hint = (" (REPLY takes at most 56 bytes; BULK_REPLY any)" if -why == errno.EMSGSIZE
                else "")
        raise ChannelError(what, errno.EPIPE, f"the device's handler for `{self.name}` "
                           f"failed: {text}{hint}; it closed the channel")

    def send(self, msg: bytes | bytearray | memoryview, timeout: float | None = None) -> None:
        """Direct message (at most 56 bytes); returns once the device has taken it."""
        data = _message(msg, f"send on `{self.name}`")
        c = self._lib.c
        rc = self._wakeup.resumable(lambda ns: c.ofl_chan_send(self._end, data, len(data), ns),
                                    timeout)
        self._check(rc, f"send on `{self.name}`")

    def recv(self, timeout: float | None = None) -> bytes:
        """The next direct message from the device."""
        buf = ctypes.create_string_buffer(MSG_MAX)
        c = self._lib.c
        rc = self._wakeup.resumable(lambda ns: c.ofl_chan_recv(self._end, buf, MSG_MAX, ns),
                                    timeout)
        n = self._check(rc, f"recv on `{self.name}`")
        return buf.raw[:n]

    def wait_peer(self, timeout: float) -> bool:
        """Wait until the other end is open (the device that serves this channel has
        started: a remote one starts on its machine after the run's start): True, or
        False once `timeout` s have passed; an other end that closed, or whose process
        is gone, raises ChannelError (EPIPE)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self._lib.c.ofl_chan_peer_state(self._end)
            if state == 1:
                return True
            self._check(state, f"channel `{self.name}`")  # (raises when negative)
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def try_send(self, msg: bytes | bytearray | memoryview) -> bool:
        """Direct message without waiting: True once the device took it, False when
        it is not ready to take one now (the message is then withdrawn). A device
        that closed the channel or whose process is gone raises ChannelError (EPIPE)
        within about a millisecond, so `while not ch.try_send(m)` ends."""
        data = _message(msg, f"try_send on `{self.name}`")
        rc = self._lib.c.ofl_chan_try_send(self._end, data, len(data))
        if rc == -errno.EAGAIN:
            return False
        self._check(rc, f"try_send on `{self.name}`")
        return True

    def try_recv(self) -> bytes | None:
        """The pending direct message from the device, or None when there is none (a
        device that closed the channel or whose process is gone: ChannelError, EPIPE)."""
        buf = ctypes.create_string_buffer(MSG_MAX)
        n = self._lib.c.ofl_chan_try_recv(self._end, buf, MSG_MAX)
        if n == -errno.EAGAIN:
            return None
        self._check(n, f"try_recv on `{self.name}`")
        return buf.raw[:n]

    def request(self, msg: bytes, timeout: float | None = 5.0) -> bytes:
        """send, then recv the answer."""
        self.send(msg, timeout)
        return self.recv(timeout)

    def _bulk(self, send: bool, addr: int, n: int, timeout: float | None) -> None:
        """One bulk transfer of [addr, addr + n): through registered memory when it
        lies in a block of the region's (Region.array), else by address."""
        c, ns = self._lib.c, timeout_ns(timeout)
        for reg in self._registered:
            off = reg.find(addr, n)
            if off is not None:
                fn = c.ofl_chan_bulk_send_mem if send else c.ofl_chan_bulk_recv_mem
                call = partial(fn, self._end, ctypes.byref(reg.desc), off, n, ns)
                break
        else:
            fn = c.ofl_chan_bulk_send if send else c.ofl_chan_bulk_recv
            call = partial(fn, self._end, addr, n, ns)
        rc = self._wakeup.once(call)
        what = f"bulk {'send' if send else 'receive'} of {n} bytes on `{self.name}`"
        if rc == -errno.EINTR:  # a signal whose handler did not raise
            raise ChannelError(what, errno.EINTR, "interrupted by a signal: the transfer was "
                               "given up on both sides")
        self._check(rc, what)

    def bulk_send(self, buf: Any, timeout: float | None = None) -> None:
        """Send a whole buffer (bytes-like or NumPy array) as one bulk transfer."""
        addr, n, keep = _address(buf, writable=False)
        self._bulk(True, addr, n, timeout)
        del keep

    def bulk_recv(self, into: Any, timeout: float | None = None) -> Any:
        """Receive one bulk transfer of exactly len(into) bytes into `into` (a
        bytearray or writable NumPy array), or into a new bytearray of `into` bytes
        when `into` is an int; returns the buffer."""
        if isinstance(into, int):
            into = bytearray(into)
        addr, n, keep = _address(into, writable=True)
        self._bulk(False, addr, n, timeout)
        del keep
        return into

    def stats(self) -> dict[str, int]:
        """This end's counters: messages, bulk transfers, and the bulk bytes each copy
        path moved (bytes_memcpy, bytes_vm, bytes_bounce, bytes_mem: registered)."""
        st = _Stats()
        self._lib.c.ofl_chan_get_stats(self._end, ctypes.byref(st))
        return {name: getattr(st, name) for name, _ in _Stats._fields_}

    def close(self) -> None:
        if self._open:
            self._lib.c.ofl_chan_close(self._end)
            self._open = False


def _channel_offset(m: Any, window: Path, hdr: WindowHeader) -> int:
    """Where the channel region of the window mapped as `m` starts, after checking
    that the header and the region's extent fit the file (runtime/core/include/offlow/
    window.h): the C side trusts what lies inside the region, not where it is."""
    if len(m) < hdr.size or hdr.get(m, "magic") != hdr.magic:
        raise OfflowError(f"{window}: not an offlow window (bad magic)")
    if hdr.get(m, "size") != len(m) or hdr.get(m, "version") != hdr.version:
        raise OfflowError(f"{window}: an offlow window of another version or size "
                          f"({hdr.get(m, 'size')} bytes in its header, {len(m)} in the file)")
    off, size = hdr.get(m, "chan_off"), hdr.get(m, "chan_size")
    if not off:
        raise OfflowError(f"{window}: the program has no channels (Program.channel)")
    if off % 64 or off + max(size, 64) > len(m) or \
            off + int.from_bytes(m[off + 16:off + 24], "little") > len(m):
        raise OfflowError(f"{window}: its channel region lies outside the file")
    return off


class Region:
    """The channel region of a program's window, mapped into this process."""

    @classmethod
    def create(cls, path: Path, names: list[str]) -> Region:
        """A stand-alone window file holding only a channel region with channels
        `names` (for host programs talking to each other, and for tests)."""
        lib = _Lib(_library())
        layout = WindowHeader.of(lib)
        off = layout.size
        size = lib.c.ofl_chan_region_size(max(1, len(names)))
        hdr = bytearray(off)
        for name, value in (("magic", layout.magic), ("size", off + size),
                            ("version", layout.version), ("chan_off", off), ("chan_size", size)):
            layout.put(hdr, name, value)
        with open(path, "xb") as f:
            f.write(bytes(hdr))
            f.truncate(off + size)
        region = cls(path, lib)
        lib.check(lib.c.ofl_chan_region_format(region.address, size, max(1, len(names))),
                  f"formatting channels in {path}")
        for name in names:
            lib.check(lib.c.ofl_chan_create(region.address, name.encode()),
                      f"creating channel `{name}`")
        return region

    def __init__(self, window: Path, lib: _Lib | None = None) -> None:
        import mmap

        self._lib = lib or _Lib(_library())
        self.header = WindowHeader.of(self._lib)
        try:
            fd = os.open(window, os.O_RDWR)
        except OSError as e:
            raise OfflowError(f"{window}: {e.strerror}") from None
        try:
            self._map = mmap.mmap(fd, 0)
        except (OSError, ValueError) as e:
            raise OfflowError(f"{window}: not an offlow window ({e})") from None
        finally:
            os.close(fd)
        try:
            off = _channel_offset(self._map, window, self.header)
        except OfflowError:
            self._map.close()
            raise
        self._base = ctypes.c_char.from_buffer(self._map)
        self._off = off
        self.address = ctypes.addressof(self._base) + off
        self.abort = ctypes.addressof(self._base) + self.header.fields["abort"][0]
        self.channels: dict[str, Channel] = {}
        self._registered: list[_Registered] = []
        self._wakeup = Wakeup()

    def channel(self, name: str, side: int = SIDE_A) -> Channel:
        """Open (once) an end of channel `name`: side A (0) is the host program's, side
        B (1) the device's (the copier of bulk transfers)."""
        key = f"{name}/{side}"
        if key not in self.channels:
            self.channels[key] = Channel(self._lib, self.address, name, self._wakeup,
                                         self.abort, side, self._registered)
        return self.channels[key]

    def names(self) -> list[str]:
        """The channels the region holds, in id order."""
        nchan = int.from_bytes(self._map[self._off + 12:self._off + 16], "little")
        need = self._lib.c.ofl_chan_region_size(nchan)
        if not need or self._off + need > len(self._map):
            return []   # not a formatted region (a count to trust)
        got = (self._lib.c.ofl_chan_name(self.address, i) for i in range(nchan))
        return [n.decode(errors="replace") for n in got if n is not None]

    def array(self, shape: int | tuple[int, ...], dtype: Any = "uint8") -> np.ndarray:
        """A zeroed NumPy array in registered memory: bulk transfers from or into it
        (or any slice of it) are copied once by the device, not twice. It stays
        usable after the region closes, but then transfers take the plain path."""
        import mmap

        import numpy as np

        dt = np.dtype(dtype)
        count = int(np.prod(shape))
        nbytes = max(1, count * dt.itemsize)
        fd = self._lib.check(self._lib.c.ofl_chan_mem_create(nbytes), "registered memory")
        try:
            mm = mmap.mmap(fd, nbytes)
            arr = np.frombuffer(mm, dtype=np.uint8, count=nbytes)
            desc = _MemDesc()
            self._lib.check(self._lib.c.ofl_chan_mem_attach(ctypes.byref(desc), fd,
                                                            arr.ctypes.data, nbytes),
                            "registered memory")
        except BaseException:
            os.close(fd)
            raise
        self._registered.append(_Registered(desc, fd, mm))
        return arr[:count * dt.itemsize].view(dt).reshape(shape)

    def word(self, name: str) -> int:
        """Field `name` of the window header ("stop", "drained", "abort", "runner")."""
        return self.header.get(self._map, name)

    def set_word(self, name: str, value: int) -> None:
        self.header.put(self._map, name, value)

    def close(self) -> None:
        for ch in self.channels.values():
            ch.close()
        self.channels.clear()
        # The mappings stay with the arrays that use them; the memfds go.
        for reg in self._registered:
            os.close(reg.fd)
        self._registered.clear()
        del self._base
        self._map.close()
        self._wakeup.close()


def open_running(window: Path) -> Region:
    """The channel region of the running program whose window is `window`, or a clear
    error when there is no such window, or its program is stopping or has ended."""
    if not window.exists():
        raise OfflowError(f"{window}: no such window (the program has ended, or the "
                          "path is not the one `offlow run --serve` printed)")
    region = Region(window)
    if region.word("stop") or region.word("abort"):
        region.close()
        raise OfflowError(f"{window}: the program is stopping")
    runner = region.word("runner")
    if 0 < runner < 2**31 and not pid_alive(runner):
        region.close()
        raise OfflowError(f"{window}: the program has ended (the process that ran "
                          f"it, pid {runner}, is gone)")
    return region
