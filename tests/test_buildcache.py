"""The build cache (offlow/buildcache.py): a build is reused only when everything that
went into it is the same (sources' and headers' contents, flags, the compiler's path and
version), an entry cut short or without its record is built again, concurrent builds
of one entry all end with a whole one, and OFFLOW_NO_CACHE / `--no-cache` trusts none."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offlow import buildcache, cbuild, cli
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from tests.e2e import EXAMPLE, ROOT, TLS

MAIN = '#include "answer.h"\nint main(void) { return ANSWER; }\n'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of the test's own, and no OFFLOW_NO_CACHE from outside."""
    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(buildcache.NO_CACHE, raising=False)
    return tmp_path / "cache"


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the compiler was run on, in order (it still runs)."""
    calls: list[str] = []
    real = cbuild.cc

    def counted(cc: str, args: list[str], what: str) -> None:
        calls.append(what)
        real(cc, args, what)

    monkeypatch.setattr(cbuild, "cc", counted)
    return calls


def _sources(folder: Path, answer: int = 7) -> Path:
    """A C program whose exit status is ANSWER from a header beside it."""
    folder.mkdir(exist_ok=True)
    (folder / "answer.h").write_text(f"#define ANSWER {answer}\n")
    (folder / "main.c").write_text(MAIN)
    return folder / "main.c"


def _exe(src: Path, extra: tuple[str, ...] = ()) -> Path:
    return cbuild.build_exe("answer", [src], libs=(), includes=[src.parent], extra=extra)


def _status(exe: Path) -> int:
    return subprocess.run([str(exe)]).returncode


def test_a_second_build_of_the_same_inputs_runs_no_compiler(
        cache: Path, tmp_path: Path, compiles: list[str]) -> None:
    src = _sources(tmp_path / "src")
    first = _exe(src)
    assert compiles == ["answer"] and _status(first) == 7
    assert first.parent == cache and (cache / f"{first.name}.sum").is_file()
    assert _exe(src) == first and compiles == ["answer"]


@pytest.mark.parametrize("change", ["source", "header", "flags", "compiler"])
def test_any_changed_input_is_a_miss(change: str, cache: Path, tmp_path: Path,
                                     compiles: list[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    src = _sources(tmp_path / "src")
    first = _exe(src)
    extra: tuple[str, ...] = ()
    if change == "source":
        src.write_text(MAIN.replace("ANSWER;", "ANSWER + 1;"))
    elif change == "header":
        _sources(src.parent, answer=9)
    elif change == "flags":
        extra = cbuild.flags("element_time")  # (a -D the program ignores)
    else:  # another gcc first on PATH (a newer version, say), same name
        wrapper = tmp_path / "bin" / "gcc"
        wrapper.parent.mkdir()
        wrapper.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "gcc (other) 99.1"; '
                           'exit 0; }\nexec /usr/bin/gcc "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    second = _exe(src, extra)
    assert second != first and compiles == ["answer", "answer"]
    assert _status(second) == {"source": 8, "header": 9}.get(change, 7)
    assert _status(first) == 7  # the first entry is still whole


def test_a_build_for_this_cpu_is_a_miss_on_another(
        cache: Path, tmp_path: Path, compiles: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    src = _sources(tmp_path / "src")
    native = cbuild.flags("native")
    plain, first = _exe(src), _exe(src, native)
    assert first != plain and _exe(src, native) == first and len(compiles) == 2
    monkeypatch.setattr(buildcache, "cpu_id", lambda: "model name : another CPU")
    assert _exe(src) == plain and len(compiles) == 2  # (no -march=native: the same)
    assert _exe(src, native) != first and len(compiles) == 3


@pytest.mark.parametrize("damage", ["cut short", "changed", "no record", "empty record"])
def test_a_damaged_entry_is_built_again(damage: str, cache: Path, tmp_path: Path,
                                        compiles: list[str]) -> None:
    src = _sources(tmp_path / "src")
    exe = _exe(src)
    data = exe.read_bytes()
    record = exe.with_name(exe.name + ".sum")
    if damage == "cut short":
        exe.write_bytes(data[:len(data) // 2])
    elif damage == "changed":
        exe.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif damage == "no record":
        record.unlink()
    else:
        record.write_text("")
    assert _exe(src) == exe and compiles == ["answer", "answer"]
    assert exe.read_bytes() == data and _status(exe) == 7
    assert _exe(src) == exe and len(compiles) == 2  # whole again: a hit


def test_a_failed_build_leaves_nothing_in_the_cache(cache: Path, tmp_path: Path) -> None:
    src = _sources(tmp_path / "src")
    src.write_text("int main(void) { return undeclared; }\n")
    with pytest.raises(Exception, match="undeclared"):
        _exe(src)
    assert list(cache.iterdir()) == []


def test_no_cache_builds_again_and_replaces_the_entry(
        cache: Path, tmp_path: Path, compiles: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    src = _sources(tmp_path / "src")
    exe = _exe(src)
    monkeypatch.setenv(buildcache.NO_CACHE, "1")
    assert _exe(src) == exe and compiles == ["answer", "answer"]
    monkeypatch.setenv(buildcache.NO_CACHE, "0")  # (0: the cache again)
    assert _exe(src) == exe and len(compiles) == 2


def test_the_cache_folder_is_offlow_cache_else_xdg_else_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OFFLOW_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert buildcache.cache_dir() == tmp_path / "home" / ".cache" / "offlow"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")  # (the XDG spec says so)
    assert buildcache.cache_dir() == tmp_path / "home" / ".cache" / "offlow"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert buildcache.cache_dir() == tmp_path / "xdg" / "offlow"
    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path / "mine"))
    assert buildcache.cache_dir() == tmp_path / "mine" and (tmp_path / "mine").is_dir()


BUILDER = """
import sys, time
from pathlib import Path
from offlow import cbuild
src, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
print(cbuild.build_exe("answer", [src], libs=(), includes=[src.parent]))
"""


def test_concurrent_builds_of_one_entry_all_end_with_a_whole_one(
        cache: Path, tmp_path: Path) -> None:
    src = _sources(tmp_path / "src")
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", BUILDER, str(src), str(go)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    time.sleep(0.5)  # all started and waiting (a late one still builds or hits)
    go.touch()
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0] * 4
    assert len(set(outs)) == 1
    exe = Path(outs[0])
    assert _status(exe) == 7 and buildcache.hit(exe)
    assert sorted(p.name for p in cache.iterdir()) == [exe.name, f"{exe.name}.sum"]


@pytest.fixture
def with_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of the test's own holding the runtime's core archive, taken from the
    suite's cache (where it is built once)."""
    monkeypatch.delenv(buildcache.NO_CACHE, raising=False)
    core = cbuild.build_library("core")
    cache = tmp_path / "cache"
    monkeypatch.setenv("OFFLOW_CACHE", str(cache))
    (cache / core.parent.name).mkdir(parents=True)
    for f in (core, core.with_name(core.name + ".sum")):
        shutil.copyfile(f, cache / core.parent.name / f.name)
    return cache


def test_a_program_is_compiled_once_and_again_when_its_executable_is_damaged(
        with_core: Path, compiles: list[str]) -> None:
    prog = load_program(EXAMPLE)
    first = build(prog)
    programs = [w for w in compiles if w.startswith("generated")]
    assert len(programs) == len(first.binaries) == 2  # host and nic
    n = len(compiles)
    again = build(prog)
    assert again.binaries == first.binaries and len(compiles) == n
    host = first.binaries["host"]
    host.write_bytes(host.read_bytes()[:1000])
    (first.directory / "host.c").write_text("cut sh")
    build(prog)
    assert compiles[n:] == ["generated host.c of `ttl_pipeline`"]
    assert (first.directory / "host.c").read_text() == first.sources["host.c"]


def test_run_no_cache_builds_with_the_cache_bypassed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`offlow run --no-cache` builds with OFFLOW_NO_CACHE set (what the build does
    then: test_no_cache_builds_again_and_replaces_the_entry); without it, as given."""
    monkeypatch.setenv(buildcache.NO_CACHE, "0")  # (restored after: the run sets it)
    seen: list[bool] = []

    def build_for(*_: object) -> None:
        seen.append(buildcache.bypassed())
        raise OfflowError("built")

    monkeypatch.setattr(cli, "build_for", build_for)
    run = ["run", str(EXAMPLE), "--input", str(TLS)]
    assert cli.main(run) == 2 and cli.main([*run, "--no-cache"]) == 2
    assert seen == [False, True]
    assert capsys.readouterr().err.count("offlow: error: built") == 2
