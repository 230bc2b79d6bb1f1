"""Where a benchmark's result goes once measured: its JSON file and its plot."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

PathArg = str | os.PathLike[str] | None


def save(res: dict, out_json: PathArg, out_png: PathArg,
         plot: Callable[[dict, Path], None]) -> None:
    """Write `res` as indented JSON to out_json and draw it with `plot` to out_png; each
    only when its path is given."""
    if out_json:
        Path(out_json).write_text(json.dumps(res, indent=2) + "\n")
    if out_png:
        plot(res, Path(out_png))
