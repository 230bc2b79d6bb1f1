"""runtime/lib/crypto from Python (ctypes): MD5, the K-chain digest and a CBC key table,
for the tests and for making the benchmarks' ciphertexts with offlow's own code."""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path
from types import TracebackType

from offlow.cbuild import build_shared
from offlow.errors import OfflowError

CIPHERS = {"aes-128-cbc": 1, "bf-cbc": 2}  # cbc.h's enum ofl_cbc_cipher


@cache
def lib() -> ctypes.CDLL:
    """The library's md5x and cbc modules as a shared object, with their signatures."""
    so = ctypes.CDLL(str(build_shared("crypto-ctypes", [("crypto", "md5x"), ("crypto", "cbc")])))
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    so.ofl_md5.argtypes = [ctypes.c_char_p, sz, ctypes.c_char_p]
    so.ofl_md5_chains.argtypes = [ctypes.c_char_p, sz, ctypes.c_uint, ctypes.c_char_p]
    so.ofl_cbc_table_parse.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p, sz, ctypes.c_int,
                                       ctypes.c_char_p]
    so.ofl_cbc_find.restype = vp
    so.ofl_cbc_find.argtypes = [vp, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint16,
                                ctypes.c_uint16]
    so.ofl_cbc_encrypt.restype = so.ofl_cbc_decrypt.restype = ctypes.c_long
    so.ofl_cbc_encrypt.argtypes = [vp, vp, ctypes.c_char_p, sz, ctypes.c_char_p, sz]
    so.ofl_cbc_decrypt.argtypes = [vp, vp, ctypes.c_char_p, sz, ctypes.c_char_p]
    so.ofl_cbc_table_close.argtypes = [vp]
    return so


class KeyTable:
    """A parsed key table (cbc.h). `rc` is ofl_cbc_table_parse's result and `error` its
    reason; encrypt/decrypt return bytes or the library's negative code."""

    def __init__(self, text: str | bytes, cipher: str) -> None:
        self.ptr = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        raw = text.encode() if isinstance(text, str) else text
        self.rc = lib().ofl_cbc_table_parse(ctypes.byref(self.ptr), raw, len(raw),
                                            CIPHERS[cipher], err)
        self.error = err.value.decode()

    def flow(self, src: int, dst: int, sport: int, dport: int) -> int | None:
        """The flow's handle (addresses as host-order integers), or None."""
        if not self.ptr:
            raise OfflowError(f"key table not parsed: {self.error}")
        return lib().ofl_cbc_find(self.ptr, src, dst, sport, dport)

    def encrypt(self, flow: int, data: bytes, cap: int | None = None) -> bytes | int:
        room = len(data) + 64 if cap is None else cap
        out = ctypes.create_string_buffer(max(room, 1))
        n = lib().ofl_cbc_encrypt(self.ptr, flow, data, len(data), out, room)
        return n if n < 0 else out.raw[:n]

    def decrypt(self, flow: int, data: bytes) -> bytes | int:
        out = ctypes.create_string_buffer(len(data) + 1)
        n = lib().ofl_cbc_decrypt(self.ptr, flow, data, len(data), out)
        return n if n < 0 else out.raw[:n]

    def close(self) -> None:
        lib().ofl_cbc_table_close(self.ptr)
        self.ptr = ctypes.c_void_p()

    def __enter__(self) -> KeyTable:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def check_key_table(name: str, options: dict[str, str]) -> None:
    """Key table `name`'s run-time options (path=, cipher=) checked before a run starts,
    with the library's own parser: OfflowError with the file, the line and the reason."""
    cipher, path = options.get("cipher", "aes-128-cbc"), options.get("path", "")
    if cipher not in CIPHERS:
        raise OfflowError(f"key table `{name}`: cipher={cipher}: expected "
                          + " or ".join(CIPHERS))
    if not path:
        raise OfflowError(f"key table `{name}`: no key file (--opt {name}.path=FILE)")
    try:
        text = Path(path).read_bytes()
    except OSError as e:
        raise OfflowError(f"key table `{name}`: {path}: {e.strerror}") from None
    with KeyTable(text, cipher) as t:
        if t.rc:
            raise OfflowError(f"key table `{name}`: {path}: {t.error}")
