"""Device profiles: what the planner knows of hardware that is not here.

A profile is a YAML file (the presets are in offlow/planner/profiles/, each citing its
sources): the device's cores and clock, the speed of one of its cores relative to one
core of this host per kind of work, its memory levels, the interconnect to the host
and its DMA engine, and its limits. `load` checks every field and names the file and
the field that is missing or wrong."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offlow.errors import OfflowError
from offlow.ir.graph import WORK_KINDS
from offlow.planner.presets import PRESETS, names


@dataclass(frozen=True)
class MemoryLevel:
    name: str
    size_kb: float
    latency_ns: float


@dataclass(frozen=True)
class Link:
    """The interconnect between the host and the device, one direction at a time."""

    gbps: float  # usable bandwidth each way
    latency_us: float  # one-way latency of a batch (a doorbell and its DMA)
    dma_gbps: float  # the DMA engine's rate, shared by both directions


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    sources: tuple[str, ...]
    cores: int
    clock_mhz: float
    speed: dict[str, float]  # work kind -> one device core's speed / one host core's
    memory: tuple[MemoryLevel, ...]
    link: Link | None  # None: the device is this host (no crossing)
    memory_mb: float  # limits
    instructions: int  # the instruction store per core (0: no limit)
    ipc: float  # instructions per cycle, where the sources give it (0: unknown)


def load(name_or_path: str | Path) -> Profile:
    """A preset by name (`liquidio-cn23xx`) or a YAML file by path."""
    import yaml

    path = Path(name_or_path)
    if not path.suffix:
        path = PRESETS / f"{name_or_path}.yaml"
        if not path.exists():
            raise OfflowError(f"no device profile `{name_or_path}`: the presets are "
                              f"{', '.join(names())}, or give a YAML file's path")
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise OfflowError(f"device profile {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise OfflowError(f"device profile {path}: not UTF-8 text") from None
    except yaml.YAMLError as e:
        raise OfflowError(f"device profile {path}: not valid YAML: {e}") from None
    return parse(doc, str(path))


def parse(doc: Any, where: str) -> Profile:
    """A profile from the mapping `doc` read from file `where` (for messages)."""
    r = _Reader(where)
    top = r.mapping(doc, "")
    speed = r.mapping(r.get(top, "speed"), "speed")
    link_doc = r.get(top, "interconnect", optional=True)
    link = None
    if link_doc is not None:
        lk = r.mapping(link_doc, "interconnect")
        link = Link(gbps=r.number(lk, "interconnect.gbps"),
                    latency_us=r.number(lk, "interconnect.latency_us", zero=True),
                    dma_gbps=r.number(lk, "interconnect.dma_gbps"))
    levels = r.get(top, "memory")
    if not isinstance(levels, list) or not levels:
        raise OfflowError(f"device profile {where}: field `memory` must be a list of "
                          "levels (name, size_kb, latency_ns)")
    memory = []
    for k, lv in enumerate(levels):
        m = r.mapping(lv, f"memory[{k}]")
        memory.append(MemoryLevel(name=r.text(m, f"memory[{k}].name"),
                                  size_kb=r.number(m, f"memory[{k}].size_kb"),
                                  latency_ns=r.number(m, f"memory[{k}].latency_ns")))
    limits = r.mapping(r.get(top, "limits"), "limits")
    sources = r.get(top, "sources")
    if not isinstance(sources, list) or not sources or not all(
            isinstance(s, str) and s.strip() for s in sources):
        raise OfflowError(f"device profile {where}: field `sources` must be a non-empty "
                          "list of texts (where each figure comes from)")
    cores = r.number(top, "cores")
    if cores != int(cores):
        raise OfflowError(f"device profile {where}: field `cores` must be a whole number, "
                          f"not {cores}")
    known = {"name", "description", "sources", "cores", "clock_mhz", "speed", "memory",
             "interconnect", "limits", "ipc"}
    extra = sorted(set(top) - known) + sorted(f"speed.{k}" for k in set(speed) - set(WORK_KINDS))
    if extra:
        raise OfflowError(f"device profile {where}: unknown field `{extra[0]}` (the fields: "
                          f"{', '.join(sorted(known))}; speed: {', '.join(WORK_KINDS)})")
    return Profile(
        name=r.text(top, "name"), description=r.text(top, "description"),
        sources=tuple(sources), cores=int(cores), clock_mhz=r.number(top, "clock_mhz"),
        speed={k: r.number(speed, f"speed.{k}") for k in WORK_KINDS},
        memory=tuple(memory), link=link,
        memory_mb=r.number(limits, "limits.memory_mb"),
        instructions=int(r.number(limits, "limits.instructions", zero=True)),
        ipc=r.number(top, "ipc", zero=True) if "ipc" in top else 0.0)


@dataclass(frozen=True)
class _Reader:
    """Reads fields of one file, naming the file and the field in every error."""

    where: str

    def fail(self, msg: str) -> OfflowError:
        return OfflowError(f"device profile {self.where}: {msg}")

    def get(self, m: dict[str, Any], path: str, optional: bool = False) -> Any:
        key = path.rsplit(".", 1)[-1].split("]")[-1]
        if key not in m:
            if optional:
                return None
            raise self.fail(f"missing field `{path}`")
        return m[key]

    def mapping(self, v: Any, path: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            what = f"field `{path}`" if path else "the file"
            raise self.fail(f"{what} must be a mapping of fields, not {type(v).__name__}")
        return v

    def number(self, m: dict[str, Any], path: str, zero: bool = False) -> float:
        v = self.get(m, path)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                or v < 0 or (v == 0 and not zero):
            need = "a number >= 0" if zero else "a number > 0"
            raise self.fail(f"field `{path}` must be {need}, not {v!r}")
        return float(v)

    def text(self, m: dict[str, Any], path: str) -> str:
        v = self.get(m, path)
        if not isinstance(v, str) or not v.strip():
            raise self.fail(f"field `{path}` must be a non-empty text, not {v!r}")
        return v


# The longest link latency profile-scaled emulation holds a doorbell back (the NIC
# process refuses more: runtime/core/src/gen.c, link.latency_us).
MAX_EMULATED_LATENCY_US = 1e6


def dilation(p: Profile) -> dict[str, float]:
    """Per kind of work, how many times slower one of the profile's cores runs than one
    of this host's (profile-scaled emulation: `offlow run --profile`); an error for a
    profile faster than this host at some kind (emulation can only slow down)."""
    fast = [k for k in WORK_KINDS if p.speed[k] > 1.0]
    if fast:
        raise OfflowError(f"--profile {p.name}: its cores are faster than this host's at "
                          f"{', '.join(fast)} work; profile-scaled emulation can only slow "
                          "the emulated device down")
    if p.link and p.link.latency_us > MAX_EMULATED_LATENCY_US:
        raise OfflowError(f"--profile {p.name}: interconnect.latency_us {p.link.latency_us:.0f} "
                          "is past the longest the emulation holds a doorbell back "
                          f"({MAX_EMULATED_LATENCY_US:.0f} us)")
    return {k: 1.0 / p.speed[k] for k in WORK_KINDS}
