"""Device targets: where a segment can run (`device=NAME`). Each target is a module of
its own implementing offlow.targets.base.Target; this is the list of them, by name, in
the order `offlow targets` prints them. A target's module is imported the first time
the target is asked for (its code generators import a C parser, numpy, OpenCL's), so
that naming and checking devices costs nothing."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from offlow.errors import OfflowError
from offlow.targets.base import missing_package, no_device

if TYPE_CHECKING:
    from offlow.targets.base import Target

# Target name -> the module whose TARGET it is.
TARGETS: dict[str, str] = {
    "host": "offlow.targets.host", "nic": "offlow.targets.nic", "xdp": "offlow.targets.xdp",
    "gpu": "offlow.targets.gpu", "remote": "offlow.targets.remote"}
REMOTE = "remote"  # (placed as `remote:NAME`, a remote device of that name)


def names() -> tuple[str, ...]:
    """The names segments may be placed on (`device=`)."""
    return tuple(f"{n}:NAME" if n == REMOTE else n for n in TARGETS)


def _target(name: str) -> Target:
    """The target of the list named `name`, its module imported."""
    t: Target = importlib.import_module(TARGETS[name]).TARGET
    return t


def get(name: str) -> Target:
    """The target of device `name`: a target's name, or `remote:NAME` (a remote device
    of that name)."""
    if name.startswith(f"{REMOTE}:"):
        importlib.import_module(TARGETS[REMOTE]).device_name(name)  # a malformed one: why
        return _target(REMOTE)
    if name not in TARGETS:
        raise OfflowError(f"unknown device `{name}`; devices: {', '.join(names())}")
    return _target(name)


def known(name: str) -> bool:
    """Whether segments may be placed on device `name` (a remote device by its name);
    only a remote device's name imports its target (which knows the names it takes)."""
    if not name.startswith(f"{REMOTE}:"):
        return name in TARGETS and name != REMOTE
    try:
        get(name)
    except OfflowError:
        return False
    return True


def listing() -> list[dict[str, str | bool]]:
    """Every target: its name, whether it is usable here and why not, what runs where
    and over which interconnect (`offlow targets`)."""
    rows: list[dict[str, str | bool]] = []
    for name in TARGETS:
        t = _target(name)
        why = t.unusable()
        rows.append({"name": t.name, "usable": why is None, "why_not": why or "",
                     "runs": t.runs, "interconnect": t.interconnect})
    return rows


def format_listing(rows: list[dict[str, str | bool]]) -> str:
    """The listing as `offlow targets` prints it: one paragraph per target."""
    out = []
    for r in rows:
        state = "usable here" if r["usable"] else f"not usable here: {r['why_not']}"
        out.append(f"{r['name']}: {state}\n  runs: {r['runs']}\n"
                   f"  interconnect: {r['interconnect']}")
    out.append("(a target that cannot run here says why: " + missing_package(
        "PACKAGE", "what it is for") + ", or " + no_device("what is missing") + ")")
    return "\n".join(out)


def usable(name: str) -> Target:
    """The target named `name`, when it can run here; else an error saying why not."""
    t = get(name)
    why = t.unusable()
    if why:
        raise OfflowError(f"target `{name}` cannot run on this machine: {why}")
    return t
