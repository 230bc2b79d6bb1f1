"""benchmarks.common.output: a benchmark's result written as JSON and drawn, each only
where a path is given."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.common import output


def test_save_writes_the_json_and_draws_the_plot_at_the_paths_given(tmp_path: Path) -> None:
    drawn: list[tuple[dict, Path]] = []
    res = {"benchmark": "x", "rows": [1, 2]}
    output.save(res, str(tmp_path / "r.json"), tmp_path / "r.png",
                lambda r, p: drawn.append((r, p)))
    text = (tmp_path / "r.json").read_text()
    assert json.loads(text) == res and text.endswith("}\n")
    assert drawn == [(res, tmp_path / "r.png")]


def test_save_without_paths_writes_and_draws_nothing(tmp_path: Path) -> None:
    drawn: list[Path] = []
    output.save({"benchmark": "x"}, None, "", lambda r, p: drawn.append(p))
    assert drawn == [] and list(tmp_path.iterdir()) == []
