"""A table's declared type is what every target allocates and what bodies use: a shared
array of arrays (which the runtime allocated as that many scalars, overrun by a body
indexing its rows) is one error naming the table and what to write instead, before any
process starts; the flat array it suggests counts as Python does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from offlow import OfflowError, Shared
from offlow.build import build
from offlow.report import summarize
from offlow.runner import RunOptions, run
from tests.e2e import ROOT, TLS, read_frames
from tests.programs.bucket_rows import BUCKETS, WORDS, flat_program
from tests.test_errors_before_start import offlow_run

ROWS = ROOT / "tests" / "programs" / "bucket_rows.py"


@pytest.mark.parametrize("device", ["host", "nic"])
def test_an_array_of_arrays_is_one_error_before_any_process_starts(
        device: str, tmp_path: Path) -> None:
    """On the old code the run started and its process died of SIGSEGV (the body's rows
    written past the 13 words allocated)."""
    rc, out, err = offlow_run(["run", str(ROWS), "--set", f"edge.device={device}"], tmp_path)
    assert (rc, out) == (2, ""), (out, err)
    assert err == (
        f"offlow: error: {ROWS}:33: shared table `bucket_rows`: element type `uint32_t[3]` "
        "is an array, and a shared table's elements are scalars (bodies get a `uint32_t *`): "
        'declare its 13 rows of 3 as Shared("bucket_rows", "uint32_t", 39) and index row '
        "i's element j as `[3 * i + j]`\n")


def test_the_flat_rows_it_suggests_count_as_python_does(tmp_path: Path) -> None:
    b = build(flat_program())
    res = run(b, RunOptions(input=TLS, output=tmp_path / "out.pcap", timeout=60))
    assert res.ok, res.errors
    want = [0] * (BUCKETS * WORDS)
    frames = read_frames(tmp_path / "out.pcap")
    assert frames == [f for f in read_frames(TLS) if len(f) <= summarize(b.plan, res.stats)["mtu"]]
    for f in frames:
        row = len(f) % BUCKETS * WORDS
        want[row] += 1
        want[row + 1] += len(f)
        want[row + 2] = len(f)
    assert summarize(b.plan, res.stats)["tables"]["bucket_rows"] == want


@pytest.mark.parametrize(("args", "error"), [
    (("t", "uint8_t[16]", 4), r"^shared table `t`: element type `uint8_t\[16\]` is an array, "
                              r".* declare its 4 rows of 16 as Shared\(\"t\", \"uint8_t\", 64\)"),
    (("t", "struct row", 4), r"^shared table `t`: element type 'struct row' is not one of "
                             r"uint8_t, int8_t, bool, char, "),
    (("t", "uint32_t[0]", 4), r"^shared table `t`: element type 'uint32_t\[0\]' is not one of "),
    (("t", "uint32_t", 0), r"^shared table `t`: length=0; a shared table holds 1 or more "),
    (("t", "uint32_t", -3), r"^shared table `t`: length=-3; "),
    (("t", "uint32_t", "8"), r"^shared table `t`: length='8'; "),
    (("t", "uint32_t", True), r"^shared table `t`: length=True; "),
], ids=["array", "struct", "empty-array", "zero", "negative", "string", "bool"])
def test_a_bad_shared_declaration_is_one_error(args: tuple[Any, ...], error: str) -> None:
    with pytest.raises(OfflowError, match=error):
        Shared(*args)
