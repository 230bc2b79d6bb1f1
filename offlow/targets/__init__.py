"""Device targets: where a segment can run (`device=NAME`). Each target is a module of
its own implementing offlow.targets.base.Target; this is the list of them, in the
order `offlow targets` prints them."""

from __future__ import annotations

from offlow.errors import OfflowError
from offlow.targets import gpu, host, nic, remote, xdp
from offlow.targets.base import Target, missing_package, no_device

TARGETS: tuple[Target, ...] = (host.TARGET, nic.TARGET, xdp.TARGET, gpu.TARGET, remote.TARGET)


def names() -> tuple[str, ...]:
    """The names segments may be placed on (`device=`)."""
    return tuple(f"{t.name}:NAME" if t is remote.TARGET else t.name for t in TARGETS)


def get(name: str) -> Target:
    """The target of device `name`: a target's name, or `remote:NAME` (a remote device
    of that name)."""
    if name.startswith(f"{remote.TARGET.name}:"):
        remote.device_name(name)  # a clear error for a malformed one
        return remote.TARGET
    for t in TARGETS:
        if t.name == name:
            return t
    raise OfflowError(f"unknown device `{name}`; devices: {', '.join(names())}")


def known(name: str) -> bool:
    """Whether segments may be placed on device `name` (a remote device by its name)."""
    if name == remote.TARGET.name:
        return False
    try:
        get(name)
    except OfflowError:
        return False
    return True


def listing() -> list[dict[str, str | bool]]:
    """Every target: its name, whether it is usable here and why not, what runs where
    and over which interconnect (`offlow targets`)."""
    rows: list[dict[str, str | bool]] = []
    for t in TARGETS:
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
