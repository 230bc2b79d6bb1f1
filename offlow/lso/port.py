"""The host side of a send port (runtime/lib/lso/include/offlow/lso_port.h), from Python: a
host program writes each large send into the port's double-buffered send buffer and
posts its descriptor; the device cuts it (offlow.elements.lso.Segment) and posts a
completion. A thin ctypes layer over the C host side, built once as a shared library:
the waits spin in C.

    with SendPort.create() as port:              # /dev/shm/offlow-lso-...
        ...start the program with port.run_opts(graph)...
        port.send(template, payload, mss=1460)
        port.finish()
    print(port.completions())"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from offlow import cbuild
from offlow.errors import OfflowError
from offlow.ir import Graph

DESC_FIXED = 24  # lso.h's OFL_LSO_DESC_FIXED
HDR_MAX = 128  # OFL_LSO_HDR_MAX
SEND_MAX = 65535  # OFL_LSO_SEND_MAX
CSUM_OFFLOAD = 0x0001  # OFL_LSO_CSUM_OFFLOAD
NIC_CTYPE = "struct ofl_lso_nic"  # the device side's table type (lso_nic.h)
# lso.h's refusal reasons, by value: the element's drop reasons and the completions'
REASONS = {-5301: "bad_desc", -5302: "bad_template", -5303: "beyond_buffer",
           -5304: "bad_mss", -5305: "too_long"}
KINDS = ("ssm", "bom", "com", "eom", "zero")  # lso.h's message kinds, by value
# The runtime modules the host side's shared library holds: (library, module).
MODULES = (("lso", "lso_port"), ("lso", "lso"), ("core", "ring"), ("core", "window"),
           ("core", "wait"), ("core", "err"), ("core", "pkt"), ("core", "src"))


class PortError(OfflowError):
    """A send port call failed; `errno` is the (positive) errno value."""

    def __init__(self, what: str, err: int) -> None:
        super().__init__(f"{what}: {os.strerror(err)}")
        self.errno = err


@dataclass(frozen=True)
class Completion:
    """What the device said about one send: `status` 0, or the reason it refused it."""

    tag: int
    status: int
    packets: int
    length: int

    @property
    def reason(self) -> str:
        return REASONS.get(self.status, "") if self.status else ""


class _Send(ctypes.Structure):
    _fields_ = [("tmpl", ctypes.c_char_p), ("tlen", ctypes.c_uint32),
                ("payload", ctypes.c_char_p), ("len", ctypes.c_uint32),
                ("mss", ctypes.c_uint16), ("flags", ctypes.c_uint16),
                ("frag_id", ctypes.c_uint32), ("tag", ctypes.c_uint32)]


class _Done(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int32), ("tag", ctypes.c_uint32),
                ("packets", ctypes.c_uint32), ("len", ctypes.c_uint32)]


def _library() -> ctypes.CDLL:
    """Build (once per content hash) and load the host side's library."""
    so = cbuild.build_shared("libofflow-lso.so", MODULES)
    lib = ctypes.CDLL(str(so))
    vp, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
    for name, res, args in [
        ("ofl_lso_host_size", ctypes.c_size_t, []),
        ("ofl_lso_host_create", i32, [vp, ctypes.c_char_p, u32, u32]),
        ("ofl_lso_host_send", i32, [vp, ctypes.POINTER(_Send), u64]),
        ("ofl_lso_host_post_raw", i32, [vp, ctypes.c_char_p, u32, u64]),
        ("ofl_lso_host_reap", u32, [vp, ctypes.POINTER(_Done), u32]),
        ("ofl_lso_host_finish", i32, [vp, u64]),
        ("ofl_lso_host_destroy", None, [vp]),
        ("ofl_lso_split", i32, [ctypes.c_char_p, u32, ctypes.POINTER(u32), ctypes.POINTER(u32)]),
        ("ofl_lso_mss_for", u32, [ctypes.c_char_p, u32, u32]),
    ]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def descriptor(template: bytes, off: int, length: int, mss: int, flags: int = 0,
               frag_id: int = 0, tag: int = 0) -> bytes:
    """A descriptor's bytes as the host posts them (struct ofl_lso_desc: the fixed part,
    little-endian, then the template)."""
    return struct.pack("<IIHHHHII", off, length, mss, flags, len(template), 0, frag_id,
                       tag) + template


class SendPort:
    """The host end of one send port; create() makes its file, close() removes it."""

    def __init__(self, path: Path, half: int, entries: int) -> None:
        self.path = path
        self._lib = _library()
        self._h = ctypes.create_string_buffer(self._lib.ofl_lso_host_size())
        rc = self._lib.ofl_lso_host_create(self._h, str(path).encode(), half, entries)
        if rc < 0:
            raise PortError(f"creating the send port {path}", -rc)
        self._open = True
        self._tag = 0
        self.sent = 0
        self._done: list[Completion] = []
        self._buf = (_Done * 256)()

    @classmethod
    def create(cls, path: Path | None = None, half: int = 1 << 20,
               entries: int = 256) -> SendPort:
        """A new port: a send buffer of two halves of `half` bytes, FIFOs of `entries`
        descriptors; its file is /dev/shm/offlow-lso-... unless `path` names one."""
        path = path or Path("/dev/shm") / f"offlow-lso-{os.getpid()}-{secrets.token_hex(4)}"
        return cls(path, half, entries)

    def run_opts(self, g: Graph, mtu: int = 1500, move: str = "pio",
                 dma_min: int | None = None) -> tuple[str, ...]:
        """The run options (NAME.KEY=VALUE) that point a compiled program at this port:
        every source reads its descriptors (kind=lso), every send-port table cuts them
        for a link of IP MTU `mtu`, payloads moving by `move` (pio, dma, auto, place)."""
        opts = [o for n in g.nodes if n.kind == "source"
                for o in (f"{n.name}.kind=lso", f"{n.name}.port={self.path}")]
        tables = [t.name for t in g.shared if t.ctype == NIC_CTYPE]
        if not tables:
            raise OfflowError(f"program `{g.name}` has no send-port table "
                              "(offlow.elements.lso.send_port) to cut the sends")
        for t in tables:
            opts += [f"{t}.path={self.path}", f"{t}.mtu={mtu}", f"{t}.move={move}"]
            if dma_min is not None:
                opts.append(f"{t}.dma_min={dma_min}")
        return tuple(opts)

    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            raise PortError(what, -rc)
        return rc

    def send(self, template: bytes, payload: bytes | bytearray | memoryview, mss: int, *,
             offload: bool = False, frag_id: int | None = None, tag: int | None = None,
             timeout: float = 30.0) -> int:
        """Post one send (the payload is copied into the send buffer); waits for room.
        Returns its tag (the next number unless given), which is also the Identification
        of its IPv6 fragments unless `frag_id` is given."""
        if not self._open:
            raise OfflowError("the send port is closed")
        data = bytes(payload)
        tag = self._tag if tag is None else tag
        self._tag = tag + 1
        s = _Send(template, len(template), data, len(data), mss,
                  CSUM_OFFLOAD if offload else 0,
                  (tag if frag_id is None else frag_id) & 0xFFFFFFFF, tag & 0xFFFFFFFF)
        rc = self._lib.ofl_lso_host_send(self._h, ctypes.byref(s), int(timeout * 1e9))
        if rc == -errno.EINVAL:
            raise OfflowError(f"send {tag}: not a send the port takes (a template of Ethernet, "
                              f"IPv4/IPv6 and TCP/UDP headers of at most {HDR_MAX} bytes, an "
                              f"MSS above 0, at most {SEND_MAX} bytes of payload)")
        self._check(rc, f"send {tag}")
        self.sent += 1
        self._reap()
        return tag

    def post_raw(self, desc: bytes, timeout: float = 30.0) -> None:
        """Post descriptor bytes exactly as given (a malformed one, to see it refused);
        nothing goes into the send buffer."""
        self._check(self._lib.ofl_lso_host_post_raw(self._h, desc, len(desc), int(timeout * 1e9)),
                    "posting a raw descriptor")
        self.sent += 1
        self._reap()

    def completions(self) -> list[Completion]:
        """Every completion so far (in posting order), the ones returned before too; after
        close() (a session's end), those it had."""
        if self._open:  # (after close the handle is gone: reaping would read freed memory)
            self._reap()
        return list(self._done)

    def _reap(self) -> None:
        # taken after every post: the port keeps at most OFL_LSO_KEEP (4,096) completions
        # for us and forgets the rest, so a capture of more sends reported 4,096
        while (n := self._lib.ofl_lso_host_reap(self._h, self._buf, 256)) > 0:
            self._done += [Completion(d.tag, d.status, d.packets, d.len)
                           for d in self._buf[:n]]

    def finish(self, timeout: float = 60.0) -> None:
        """No more sends: the device's source ends once it has taken them all; returns
        when every send has completed."""
        self._check(self._lib.ofl_lso_host_finish(self._h, int(timeout * 1e9)),
                    "waiting for the last completions")

    def close(self) -> None:
        """Unmap the port and remove its file."""
        if self._open:
            self.completions()
            self._open = False
            self._lib.ofl_lso_host_destroy(self._h)

    def __enter__(self) -> SendPort:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- frames that carry a whole send ----------------------------------------------

    def split(self, frame: bytes) -> tuple[bytes, bytes] | None:
        """(template, payload) of a frame that carries a whole send (as a TSO/GSO capture
        holds one), or None when it is not one (lso.h's template rules)."""
        hl, ln = ctypes.c_uint32(), ctypes.c_uint32()
        if self._lib.ofl_lso_split(frame, len(frame), ctypes.byref(hl), ctypes.byref(ln)) < 0:
            return None
        return frame[:hl.value], frame[hl.value:hl.value + ln.value]

    def mss_for(self, template: bytes, mtu: int) -> int:
        """The largest MSS `template` allows at IP MTU `mtu` (0: none)."""
        return int(self._lib.ofl_lso_mss_for(template, len(template), mtu))

    def send_frames(self, frames: Iterable[bytes], mtu: int, offload: bool = False,
                    timeout: float = 30.0) -> tuple[int, int]:
        """Post every frame that carries a send, with the largest MSS the link's MTU
        allows; returns (sends posted, frames that are not sends, skipped)."""
        sent = skipped = 0
        for frame in frames:
            parts = self.split(frame)
            mss = self.mss_for(parts[0], mtu) if parts else 0
            if parts is None or not mss or len(parts[1]) > SEND_MAX:
                skipped += 1
                continue
            self.send(parts[0], parts[1], mss, offload=offload, timeout=timeout)
            sent += 1
        return sent, skipped
