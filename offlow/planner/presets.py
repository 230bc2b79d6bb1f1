"""Where the device profiles' presets are, and their names: what `offlow plan --help`
lists, without loading the profiles' model (offlow.planner.profile)."""

from __future__ import annotations

from pathlib import Path

PRESETS = Path(__file__).parent / "profiles"


def names() -> list[str]:
    """The presets' names."""
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))
