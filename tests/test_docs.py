"""What a new user reads stays true: the element reference is the element classes',
`offlow run --json` matches its documented schema key for key, every --help answers
without running anything, the commands in the examples' docstrings parse, and the
README's program runs."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from offlow import argtypes
from offlow.cli import main, parser
from offlow.elements import reference
from tests.e2e import EXAMPLE, TLS, read_frames

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "docs" / "run-result.schema.json").read_text())


def test_the_element_reference_is_generated_from_the_classes() -> None:
    """Regenerate with: python -m offlow.elements.reference > docs/element-reference.md"""
    assert (ROOT / "docs" / "element-reference.md").read_text() == reference.reference()


def test_every_field_and_drop_reason_of_the_library_is_described() -> None:
    undocumented = [(cls.__name__, f) for cls in reference.library() for f in cls.fields
                    if not cls.field_docs.get(f)]
    assert undocumented == []
    assert all(d for cls in reference.library() for d in cls.drops.values())
    text = reference.reference()
    assert "`src4` (uint32_t): the source address, host byte order" in text
    assert "`past_payload`: the UDP length or the TCP data offset runs past" in text


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_run_json_matches_its_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from offlow.testing import write_malformed_pcap

    capture = tmp_path / "bad.pcap"
    write_malformed_pcap(capture)
    runs = [
        run_json(["run", str(EXAMPLE), "--input", str(capture), "--output",
                  str(tmp_path / "out.pcap")], capsys),
        run_json(["run", str(ROOT / "tests" / "programs" / "tee.py"), "--input", str(TLS)],
                 capsys),
        run_json(["run", str(ROOT / "tests" / "programs" / "udp_echo.py"), "--udp", "0",
                  "--duration", "0.3"], capsys),
        # a table object's counters and the TCP server's
        run_json(["run", str(ROOT / "examples" / "kvs.py"), "--tcp", "0", "--duration", "0.3"],
                 capsys),
    ]
    assert isinstance(runs[-1]["tables"]["store"], dict) and "tcp" in runs[-1]
    for doc in runs:
        jsonschema.validate(doc, SCHEMA)
    # the schema is strict: a key it does not document fails it
    extra = dict(runs[0], surprise=1)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(extra, SCHEMA)
    seg = dict(runs[0]["segments"][0], surprise=1)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dict(runs[0], segments=[seg]), SCHEMA)
    # a segment's device: any target, or several (balanced, or spread over remote devices)
    for device in ("xdp", "remote:store1", "nic,host", "remote:a,remote:b"):
        seg = dict(runs[0]["segments"][0], device=device)
        jsonschema.validate(dict(runs[0], segments=[seg]), SCHEMA)
    for device in ("fpga", "remote:", "nic,", "remote:A"):
        seg = dict(runs[0]["segments"][0], device=device)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(dict(runs[0], segments=[seg]), SCHEMA)


@pytest.mark.parametrize("argv", [
    ["run", "--help"], ["explain", "--help"], ["kvs", "--help"], ["kvs", "interop", "--help"],
    ["kvs", "quick", "--help"], ["pcsa", "--help"], ["bench", "--help"],
    ["router", "check", "--help"], ["plan", "--help"], ["stats", "--help"], ["tsp", "--help"],
    ["cache", "--help"], ["cache", "prune", "--help"],
])
def test_every_help_answers_without_running_anything(
        argv: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import offlow.kvs.interop
    import offlow.kvs.quick

    def ran(*a: object, **k: object) -> None:
        raise AssertionError("--help ran the tool")

    monkeypatch.setattr(offlow.kvs.interop, "main", ran)
    monkeypatch.setattr(offlow.kvs.quick, "run", ran)
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: offlow {' '.join(argv[:-1])}"), out[:200]


def test_run_help_says_what_each_option_does_and_its_default() -> None:
    text = parser().parse_known_args(["run", str(ROOT / "README.md")])[0]  # (it builds)
    assert text.seed == 1
    res = subprocess.run([sys.executable, "-m", "offlow.cli", "run", "--help"],
                         capture_output=True, text=True, cwd=ROOT)
    out = " ".join(res.stdout.split())
    assert "--seed SEED seed of the synthetic traffic" in out and "(default: 1)" in out
    assert "(default: 64:7,576:4,1500:1)" in out
    assert "mtu: the largest frame in bytes, Ethernet header included" in out


def docstring_commands() -> list[str]:
    out = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        doc = (path.read_text().split('"""')[1:2] or [""])[0]
        out += [line.strip() for line in doc.splitlines() if line.strip().startswith("offlow ")]
    return out


@pytest.mark.parametrize("command", docstring_commands())
def test_the_examples_docstring_commands_parse(command: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    words = [w for w in shlex.split(command)[1:] if w != "..."]
    # (the files they read are the reader's: their names parse, wherever they are)
    monkeypatch.setattr(argtypes.File, "__call__", lambda self, text: Path(text))
    parser().parse_args(words)  # argparse exits (failing the test) on a bad command


def test_the_readme_program_runs(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    prog = tmp_path / "tls_count.py"
    prog.write_text(code)
    out = tmp_path / "out.pcap"
    res = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(prog), "--input",
                          str(TLS), "--output", str(out)], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    assert len(read_frames(out)) == len(read_frames(TLS))


def test_every_bench_the_readme_lists_is_one_offlow_bench_runs() -> None:
    import re

    import benchmarks

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    listed = set(re.findall(r"^\| `offlow bench ([a-z]+)", readme, re.M))
    assert {"seeds", "balance"} <= listed
    assert listed <= set(benchmarks.NAMES), listed - set(benchmarks.NAMES)
