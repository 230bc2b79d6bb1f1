"""The machine line every `offlow bench` prints (benchmarks/common/machine.py): the CPU
and the CPU features that chose its code paths, so that numbers from different machines
read side by side (issue 29, item 6)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import NAMES
from benchmarks.common.machine import FEATURES, machine_line

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_machine_line_names_the_features() -> None:
    m = {"cpu": "Xeon", "cpus": 16, "kernel": "6.1", "features": ["avx2", "avx512f"]}
    assert machine_line(m) == ("machine: Xeon, 16 CPUs, kernel 6.1; "
                               "CPU features: avx2 avx512f")
    assert machine_line(m, ["aes"]).endswith("CPU features: aes")
    assert machine_line({**m, "features": []}).endswith(
        "CPU features: none of " + "/".join(FEATURES))
    # A result written before machine() recorded them says so, not "none".
    del m["features"]
    assert machine_line(m).endswith("CPU features: unknown")


def test_every_bench_prints_its_machine_line_with_the_features() -> None:
    """Every bench builds its machine line with machine_line (so it carries the
    features), never by hand."""
    printing = []
    for p in sorted(BENCHMARKS.glob("*.py")):
        text = p.read_text()
        assert 'f"machine: ' not in text, f"{p.name} writes its own machine line"
        if "machine_line(" in text:
            printing.append(p.stem)
    assert set(NAMES) <= set(printing)
