"""runtime/lib/tsp from Python (ctypes): the TSPLIB parser and the 2-opt climber."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from offlow.cbuild import build_shared
from offlow.errors import OfflowError

_P = ctypes.POINTER


class _Tsp(ctypes.Structure):
    _fields_ = [("n", ctypes.c_uint32), ("k", ctypes.c_uint32),
                ("dist", _P(ctypes.c_int32)), ("nbr", _P(ctypes.c_uint32))]


@cache
def lib() -> ctypes.CDLL:
    """The library's modules as a shared object, with their signatures."""
    so = ctypes.CDLL(str(build_shared("tsp-ctypes", [("tsp", "tsp"), ("tsp", "tsplib")])))
    u32p, dp = _P(ctypes.c_uint32), _P(ctypes.c_double)
    so.ofl_tsplib_parse.argtypes = [ctypes.c_char_p, ctypes.c_size_t, _P(dp), u32p,
                                    ctypes.c_char_p, ctypes.c_size_t]
    so.ofl_tsp_init.argtypes = [_P(_Tsp), dp, ctypes.c_uint32]
    so.ofl_tsp_free.argtypes = [_P(_Tsp)]
    so.ofl_tsp_climbs.restype = ctypes.c_int64
    so.ofl_tsp_climbs.argtypes = [_P(_Tsp), ctypes.c_uint64, ctypes.c_uint32, u32p,
                                  _P(ctypes.c_uint64)]
    so.free.argtypes = [ctypes.c_void_p]
    return so


@dataclass(frozen=True)
class Cities:
    """A TSPLIB instance: its name (the file's) and its cities' coordinates."""

    name: str
    xy: tuple[tuple[float, float], ...]

    @property
    def n(self) -> int:
        return len(self.xy)


def parse(text: bytes, name: str = "<text>") -> Cities:
    """Parse a TSPLIB EUC_2D file's bytes with the library's parser: OfflowError naming
    the file, the line and the reason when it is malformed."""
    xy, n = _P(ctypes.c_double)(), ctypes.c_uint32()
    err = ctypes.create_string_buffer(256)
    rc = lib().ofl_tsplib_parse(text, len(text), ctypes.byref(xy), ctypes.byref(n), err, 256)
    if rc != 0:
        raise OfflowError(f"{name}: {err.value.decode(errors='replace') or 'out of memory'}")
    try:
        pts = tuple((xy[2 * i], xy[2 * i + 1]) for i in range(n.value))
    finally:
        lib().free(xy)
    return Cities(name, pts)


def load(path: str | Path) -> Cities:
    """Parse the TSPLIB file at `path` (OfflowError when it cannot be read or parsed)."""
    try:
        text = Path(path).read_bytes()
    except OSError as e:
        raise OfflowError(f"{path}: cannot read the TSPLIB file ({e.strerror})") from None
    return parse(text, str(path))


class Instance:
    """An instance built for climbing (distances, neighbour lists) in C memory."""

    def __init__(self, cities: Cities) -> None:
        self.n = cities.n
        flat = (ctypes.c_double * (2 * self.n))(*(v for p in cities.xy for v in p))
        self._t = _Tsp()
        if lib().ofl_tsp_init(ctypes.byref(self._t), flat, self.n) != 0:
            raise OfflowError(f"{cities.name}: cannot build an instance of {self.n} cities")

    def climbs(self, seed: int, count: int) -> tuple[int, list[int], int]:
        """`count` climbs from seeds seed.. (the GIL released meanwhile): the best length,
        its tour and its seed."""
        tour, best_seed = (ctypes.c_uint32 * self.n)(), ctypes.c_uint64()
        length = lib().ofl_tsp_climbs(ctypes.byref(self._t), seed, count, tour,
                                      ctypes.byref(best_seed))
        if length < 0:
            raise OfflowError("out of memory for a climb")
        return length, list(tour), best_seed.value

    def close(self) -> None:
        lib().ofl_tsp_free(ctypes.byref(self._t))


def max_climbers() -> int:
    """OFL_TSP_MAX_CLIMBERS, read from the library (tsp.c exports it)."""
    return ctypes.c_uint32.in_dll(lib(), "ofl_tsp_max_climbers").value


def check_table(name: str, options: dict[str, str]) -> None:
    """The climbers table `name`'s options (path=, climbers=) checked before a run
    starts, with the library's own parser: one OfflowError naming the file, the line
    and the reason."""
    path = options.get("path")
    if not path:
        raise OfflowError(f"table `{name}`: no path= (a TSPLIB file: --opt {name}.path=FILE)")
    climbers, most = options.get("climbers", "1"), max_climbers()
    if not climbers.isdigit() or not 1 <= int(climbers) <= most:
        raise OfflowError(f"table `{name}`: climbers={climbers}: expected 1 to {most}")
    load(path)
