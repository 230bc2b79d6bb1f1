"""A program the kernel's verifier refuses when the run loads it (runtime/tools/xdp_run.c)
is the run's one error, in the program's terms: the segment and its elements, the
verifier's reason and the user's source line it was at, and the path of a file beside
the object that keeps the verifier's whole log; nothing of the log on stderr.

The build loads every program once (offlow/targets/xdp.py: a refusal there is a compile
error, tests/test_xdp.py), so the run meets a refusal only when the object it loads
was not the one checked, or the kernel changed since (a build kept in the cache, run
after an upgrade): here the host side of an accepted program runs the object of the
same program with one line changed. Until 2026-11-28 the run's error was "the kernel
refused the XDP program: Permission denied", beside libbpf's raw dump of the log (a
few hundred lines of instructions) on stderr."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from offlow import Element, Port, Program, Sink, Source
from offlow.build import Build, build, generate, plan_program
from offlow.errors import OfflowError
from offlow.runner import RunOptions, run
from offlow.targets import xdp

WHY_NOT = xdp.TARGET.unusable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")


class ReadOption(Element):
    """A user's element: drops frames whose option byte (at an offset the frame's own
    header gives) is 7; the offset masked, so the verifier can bound it."""

    inputs = (Port("inp", "eth"),)
    outputs = (Port("out", "eth"),)
    body = r"""
    /* where the option sits, as the header says (masked: at most 1023) */
    uint32_t at = ofl_get_be32(pkt->data + 14) & 1023u;
    if (pkt->data[at] == 7) DROP();   // a marked frame goes no further
    EMIT(out);
    """


class ReadOptionUnmasked(ReadOption):
    """The same with the mask forgotten: a 32-bit offset the verifier cannot bound."""

    body = r"""
    /* where the option sits, as the header says */
    uint32_t at = ofl_get_be32(pkt->data + 14);
    if (pkt->data[at] == 7) DROP();   // a marked frame goes no further
    EMIT(out);
    """


def options_program(reader: type[ReadOption]) -> Program:
    p = Program("options")
    wire, look, back = Source("wire"), reader("look_opt"), Sink("back")
    wire >> look >> back
    p.segment("edge", [wire, look, back], device="xdp", cores=[0])
    return p


def test_the_verifier_refusing_the_program_at_the_run_is_one_error_with_its_log(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    ok = build(options_program(ReadOption))
    unmasked = generate(plan_program(options_program(ReadOptionUnmasked)))
    assert unmasked["xdp.c"] == ok.sources["xdp.c"]  # (one host side for both)
    for name, text in unmasked.items():
        (tmp_path / name).write_text(text)
    xdp.compile_bpf(tmp_path / "xdp.bpf.c", tmp_path / "xdp.bpf.o", "the unmasked program",
                    local_headers=[tmp_path / "common.h"])
    shutil.copy(ok.binaries["xdp"], tmp_path / "xdp")  # (start() loads the object beside it)
    capfd.readouterr()
    res = run(Build(ok.plan, ok.sources, tmp_path, {"xdp": tmp_path / "xdp"}),
              RunOptions(count=5, timeout=60))
    stderr = capfd.readouterr().err

    src = Path(__file__).read_text().splitlines()
    said = "if (pkt->data[at] == 7) DROP();   // a marked frame goes no further"
    line = [k for k, t in enumerate(src, 1) if t.strip() == said][-1]  # (ReadOptionUnmasked's)
    log = tmp_path / "xdp.bpf.verifier.log"
    assert not res.ok and res.errors == [
        "the kernel's verifier refused the XDP program of segment `edge` (wire, look_opt, "
        "back): R9 unbounded memory access, make sure to bounds check any such access, at "
        f"{Path(__file__).name}:{line}: `{said}` (full log: {log})"], (res.errors, stderr)
    text = log.read_text()  # the whole log: the instructions walked, the reason, the summary
    assert text.startswith("0: R1=ctx() R10=fp0\n"), text[:200]
    assert "\nR9 unbounded memory access, make sure to bounds check any such access\n" \
        "processed " in text
    assert f"; {said} @ {Path(__file__).name}:{line}\n" in text
    # none of it on stderr, nor libbpf's own lines of the failed load: one error
    assert "processed " not in stderr and "PROG LOAD LOG" not in stderr, stderr
    assert "libbpf" not in stderr, stderr
    assert not [t for t in stderr.splitlines() if t[:1].isdigit() or t.startswith(";")], stderr


def test_a_refusal_at_the_build_names_the_file_that_keeps_the_whole_log() -> None:
    """The build's check (the common case: the build refuses what the verifier
    refuses) keeps the log beside the object too and names it at the error's end (before:
    the error alone; the log was nowhere)."""
    with pytest.raises(OfflowError) as err:
        build(options_program(ReadOptionUnmasked))
    msg, _, kept = str(err.value).rpartition(" (full log: ")
    assert msg.startswith("element `look_opt` (ReadOptionUnmasked), body line 3 (") and \
        msg.endswith("or place the segment on another device"), msg
    assert kept.endswith("/xdp.bpf.verifier.log)"), kept
    text = Path(kept.removesuffix(")")).read_text()
    assert "\nR9 unbounded memory access, make sure to bounds check any such access\n" \
        "processed " in text


def test_a_load_refused_before_the_verifier_is_one_error_with_libbpfs_reason(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A failure of the load that is not the verifier's (here a map the kernel will not
    create: one of 0 entries) is the run's one error, with libbpf's lines, which say which
    map, in it; none beside it (before: its three lines on stderr and an error saying
    only "Invalid argument")."""
    ok = build(options_program(ReadOption))
    for name, text in ok.sources.items():
        (tmp_path / name).write_text(text)
    bpf = tmp_path / "xdp.bpf.c"
    made = "    __uint(max_entries, OFL_NCOUNTERS);\n"
    assert made in bpf.read_text()  # (the generated per-CPU array of the run's counters)
    bpf.write_text(bpf.read_text().replace(made, "    __uint(max_entries, 0);\n"))
    xdp.compile_bpf(bpf, tmp_path / "xdp.bpf.o", "the program with an empty map",
                    local_headers=[tmp_path / "common.h"])
    shutil.copy(ok.binaries["xdp"], tmp_path / "xdp")
    capfd.readouterr()
    res = run(Build(ok.plan, ok.sources, tmp_path, {"xdp": tmp_path / "xdp"}),
              RunOptions(count=5, timeout=60))
    stderr = capfd.readouterr().err
    assert not res.ok and len(res.errors) == 1, (res.errors, stderr)
    assert res.errors[0].startswith("the kernel refused the XDP program: Invalid argument "
                                    "(libbpf: "), res.errors
    assert "; map 'ofl_counts': failed to create: Invalid argument" in res.errors[0]
    assert "libbpf" not in stderr, stderr
