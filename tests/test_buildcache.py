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

from offlow import buildcache, cbuild, cli, runner
from offlow.build import build
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.runner import RunOptions, run
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

    def counted(cc: str, args: list[str], what: str) -> str:
        calls.append(what)
        return real(cc, args, what)  # (its warnings: the build keeps them)

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


def _names(cache: Path) -> list[str]:
    """The names of the cache's entries (not its marker and its own records)."""
    return sorted(p.name for p in cache.iterdir()
                  if p.name != buildcache.TAG and not p.name.startswith(".offlow-"))


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
    assert _names(cache) == []


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
    assert _names(cache) == [exe.name, f"{exe.name}.sum"]


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
    whole = host.read_bytes()
    host.write_bytes(whole[:1000])
    (first.directory / "host.c").write_text("cut sh")
    build(prog)
    # taken again, whole, from the device's own entry (what it is made of is unchanged)
    assert compiles[n:] == [] and host.read_bytes() == whole
    assert (first.directory / "host.c").read_text() == first.sources["host.c"]
    # that entry damaged too: compiled again
    (stored,) = buildcache.cache_dir().glob("ttl_pipeline.host-*/host")
    stored.write_bytes(whole[:1000])
    host.write_bytes(whole[:1000])
    build(prog)
    assert compiles[n:] == ["generated host.c of `ttl_pipeline`"]


def test_run_no_cache_builds_with_the_cache_bypassed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`offlow run --no-cache` builds with OFFLOW_NO_CACHE set (what the build does
    then: test_no_cache_builds_again_and_replaces_the_entry); without it, as given."""
    monkeypatch.setenv(buildcache.NO_CACHE, "0")  # (restored after: the run sets it)
    seen: list[bool] = []

    def build_for(*_: object) -> None:
        seen.append(buildcache.bypassed())
        raise OfflowError("built")

    monkeypatch.setattr(runner, "build_for", build_for)
    run = ["run", str(EXAMPLE), "--input", str(TLS)]
    assert cli.main(run) == 2 and cli.main([*run, "--no-cache"]) == 2
    assert seen == [False, True]
    assert capsys.readouterr().err.count("offlow: error: built") == 2


# Bounding the cache: the least recently used entries removed down to the limit.

def _entry(cache: Path, name: str, size: int, age_s: float) -> Path:
    """Entry `name` of `size` bytes published (as a builder does) and last used `age_s`
    seconds ago."""
    cache.mkdir(exist_ok=True)  # (made by cache_dir: marked offlow's)
    entry = buildcache.cache_dir() / name
    tmp = buildcache.temporary(entry)
    tmp.write_bytes(b"x" * size)
    buildcache.publish(tmp, entry)
    _age(entry, age_s)
    return entry


def _age(entry: Path, age_s: float) -> None:
    t = time.time() - age_s
    for p in (entry, entry.with_name(entry.name + ".sum")):
        os.utime(p, (t, t), follow_symlinks=False)


def _size(entry: Path) -> int:
    return entry.stat().st_size + entry.with_name(entry.name + ".sum").stat().st_size


def test_prune_removes_the_least_recently_used_down_to_the_limit(cache: Path) -> None:
    hour = 3600
    old = _entry(cache, "old-1", 5000, 5 * hour)
    mid = _entry(cache, "mid-1", 3000, 3 * hour)
    new = _entry(cache, "new-1", 4000, 2 * hour)
    now = _entry(cache, "now-1", 2000, 0)  # (in the grace period: maybe in use)
    kept = [mid, new, now]
    old_size = _size(old)
    r = buildcache.prune(sum(map(_size, kept)))
    assert (r.removed, r.freed, r.kept) == (1, old_size, 3)
    assert _names(cache) == sorted(n for e in kept for n in (e.name, e.name + ".sum"))
    assert buildcache.prune(sum(map(_size, kept)) - 1).removed == 1  # mid, the oldest left
    assert not mid.exists() and new.exists()
    r = buildcache.prune(0)  # (clear) keeps what may be in use
    assert (r.removed, r.busy) == (1, 1) and _names(cache) == [now.name, now.name + ".sum"]


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item for each scan of the cache's folder."""
    seen: list[int] = []
    real = buildcache._entries

    def counted(root: Path, now: float):  # type: ignore[no-untyped-def]
        seen.append(1)
        return real(root, now)

    monkeypatch.setattr(buildcache, "_entries", counted)
    return seen


def test_a_build_past_the_limit_prunes_without_a_scan_below_it(
        cache: Path, scans: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(buildcache.MAX, "0")  # (none: no scan)
    first = _entry(cache, "a-1", 1000, 3 * 3600)
    second = _entry(cache, "a-2", 2800, 2 * 3600)
    _entry(cache, "a-3", 2800, 3600)
    assert scans == []
    monkeypatch.setenv(buildcache.MAX, "10k")
    _entry(cache, "a-4", 1000, 0)  # (no scan yet: one now; 7.6 kB and the records: kept)
    assert len(scans) == 1 and len(_names(cache)) == 8
    for i in (5, 6):
        _entry(cache, f"a-{i}", 1000, 0)
    assert len(scans) == 1  # 9.6 kB and the records: under 10 kB by the estimate
    _entry(cache, "a-7", 1000, 0)  # 10.6 kB and the records: over
    # down to 9 kB, room till the next scan: the two oldest
    assert len(scans) == 2 and not first.exists() and not second.exists()
    assert _names(cache) == [f"a-{i}{s}" for i in range(3, 8) for s in ("", ".sum")]


def test_entries_in_use_past_the_limit_do_not_make_every_build_scan(
        cache: Path, scans: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(buildcache.MAX, "3k")
    for i in range(6):
        _entry(cache, f"b-{i}", 2000, 0)  # (each over the limit with the others: in use)
    assert len(_names(cache)) == 12  # none removed
    # the first build's and the first over the limit's: then not again before the
    # entries may no longer be in use (RETRY_S)
    assert len(scans) == 2


def test_a_hit_makes_an_entry_the_most_recently_used(
        cache: Path, tmp_path: Path, compiles: list[str]) -> None:
    seven, eight = _exe(_sources(tmp_path / "a", 7)), _exe(_sources(tmp_path / "b", 8))
    _age(seven, 7200)
    _age(eight, 5400)
    assert _exe(_sources(tmp_path / "a", 7)) == seven and len(compiles) == 2  # a hit
    buildcache.prune(_size(seven))
    assert seven.exists() and _status(seven) == 7 and not eight.exists()


def test_an_entry_pruned_away_is_built_again(
        cache: Path, tmp_path: Path, compiles: list[str]) -> None:
    exe = _exe(_sources(tmp_path / "src"))
    _age(exe, 7200)
    assert buildcache.prune(0).removed == 1 and not exe.exists()
    assert _exe(tmp_path / "src" / "main.c") == exe and _status(exe) == 7
    assert compiles == ["answer", "answer"]


@pytest.mark.parametrize("value", ["2x", "-1", "G", "1.5.2G", "2 GiBs"])
def test_a_bad_cache_max_is_one_error_before_anything_is_built(
        value: str, cache: Path, tmp_path: Path, compiles: list[str],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(buildcache.MAX, value)
    with pytest.raises(OfflowError, match=f"OFFLOW_CACHE_MAX={value!r}: not a size"):
        _exe(_sources(tmp_path / "src"))
    assert compiles == [] and not cache.exists()
    assert cli.main(["cache", "info"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "OFFLOW_CACHE_MAX" in err


@pytest.mark.parametrize("value,size", [("0", 0), ("1024", 1024), ("500M", 500 * 10**6),
                                        ("2G", 2 * 10**9), ("1.5GiB", 3 << 29),
                                        (" 64 kib ", 64 << 10), ("", 2 << 30)])
def test_cache_max_takes_a_size_with_units(value: str, size: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(buildcache.MAX, value)
    assert buildcache.max_size() == size


def test_any_cache_max_text_is_a_size_or_one_error() -> None:
    """Random texts from the size's alphabet and beyond (a seeded fuzz)."""
    import random

    rng = random.Random(7)
    alphabet = "0123456789.kKmMgGtTiIbB -+eE_x\u00b5\u0663\n"
    sizes = 0
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(8)))
        try:
            n = buildcache.parse_size(text)
        except OfflowError as e:
            assert str(e).startswith(f"{buildcache.MAX}={text!r}: not a size")
        else:
            assert isinstance(n, int) and n >= 0
            sizes += 1
    assert sizes > 100  # (some were sizes)


PRUNER = """
import sys, time
from offlow import buildcache
buildcache.GRACE_S = float(sys.argv[1])
while True:
    buildcache.prune(0)
"""


@pytest.mark.parametrize("grace", [buildcache.GRACE_S, 0])
def test_a_build_during_prunes_still_succeeds(grace: float, cache: Path, tmp_path: Path,
                                              compiles: list[str]) -> None:
    """Another process prunes to 0 over and over while this one builds and hits:
    with the grace period nothing in use is removed; with none (entries removed just
    as they are hit or published) every build still ends with its entry, built again
    when it was gone."""
    src = _sources(tmp_path / "src")
    for i in range(20):
        _entry(cache, f"old-{i}", 1000, 7200)
    pruner = subprocess.Popen([sys.executable, "-c", PRUNER, str(grace)],
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        builds, deadline = 0, time.monotonic() + 120  # (the pruner starting: a while)
        while builds < 10 or time.monotonic() < deadline and (
                any(n.startswith("old-") for n in _names(cache))
                or grace == 0 and len(compiles) < 3):  # (removed under it twice)
            builds += 1
            exe = _exe(src)
            assert exe.name.startswith("answer-")
            if grace:
                assert _status(exe) == 7
    finally:
        pruner.kill()
        pruner.wait()
    assert not any(n.startswith("old-") for n in _names(cache))
    assert len(compiles) >= 3 if grace == 0 else compiles == ["answer"]


def test_a_dangerous_cache_folder_is_refused(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home" / "me"
    monkeypatch.setenv("HOME", str(home))
    for folder in ("/", str(home), str(home.parent), f"{home}/../me/"):
        monkeypatch.setenv("OFFLOW_CACHE", folder)
        with pytest.raises(OfflowError, match="holds the home folder"):
            buildcache.cache_dir()


def test_a_folder_not_offlows_is_never_pruned(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    os.utime(mine / "thesis.tex", (0, 0))
    monkeypatch.setenv("OFFLOW_CACHE", str(mine))
    with pytest.raises(OfflowError, match="not offlow's build cache"):
        buildcache.prune(0)
    assert cli.main(["cache", "clear"]) == 2
    assert (mine / "thesis.tex").read_text() == "years of work"
    tmp = buildcache.temporary(mine / "built")  # a build there: no automatic prune
    tmp.write_text("x")
    buildcache.publish(tmp, mine / "built")
    assert (mine / "thesis.tex").exists()


def test_the_default_folder_is_marked_offlows_one_of_a_users_only_when_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OFFLOW_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "offlow").mkdir(parents=True)
    (tmp_path / "xdg" / "offlow" / "answer-1").write_text("built before the marker")
    assert buildcache.offlows(buildcache.cache_dir())
    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path / "new"))
    assert buildcache.offlows(buildcache.cache_dir())
    monkeypatch.setenv("OFFLOW_CACHE", str(tmp_path / "xdg"))  # (holds `offlow`)
    assert not buildcache.offlows(buildcache.cache_dir())


def test_a_link_in_the_cache_is_removed_not_what_it_points_to(
        cache: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    _entry(cache, "e-1", 10, 7200)
    (cache / "link").symlink_to(outside)
    os.utime(cache / "link", (0, 0), follow_symlinks=False)
    assert buildcache.prune(0).removed == 2
    assert _names(cache) == [] and (outside / "keep").read_text() == "keep"


def test_cache_verbs(cache: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _entry(cache, "a-1", 3000, 7200), _entry(cache, "b-1", 1000, 5400)
    assert cli.main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"folder   {cache}\n" in out and "entries  2\n" in out
    assert f"size     {buildcache.format_size(_size(a) + _size(b))}\n" in out
    assert "limit    2.0 GiB" in out
    assert cli.main(["cache", "prune", "--max", "2k"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert not a.exists() and b.exists()
    assert cli.main(["cache", "prune", "--max", "lots"]) == 2
    assert "--max='lots': not a size" in capsys.readouterr().err
    monkeypatch.setenv(buildcache.MAX, "0")
    assert cli.main(["cache", "prune"]) == 0 and b.exists()  # (0: no limit)
    assert cli.main(["cache", "info"]) == 0 and "limit    none" in capsys.readouterr().out
    assert cli.main(["cache", "clear"]) == 0 and _names(cache) == []


def test_no_compile_begins_after_one_failed() -> None:
    """cbuild.each_in_parallel: once a call fails, no other begins (those under way
    end). A free thread used to take the next call before the caller could cancel it:
    under load, five of a build's compiles began where the first failed at its third
    (test_cli's Ctrl-C test, 2026-11-28). Here the first call fails at once while a
    second runs: whichever thread is free, no third begins."""
    begun: list[int] = []

    def call(k: int) -> None:
        begun.append(k)
        if k == 0:
            raise OfflowError("the first compile failed")
        if k == 1:
            time.sleep(0.3)  # under way when the first fails

    for _ in range(20):
        begun.clear()
        with pytest.raises(OfflowError, match="the first compile failed"):
            cbuild.each_in_parallel(call, [(k,) for k in range(8)])
        assert sorted(begun)[:1] == [0] and set(begun) <= {0, 1}, begun


# a user's program over two devices: the NIC counts and marks, the host stamps; each
# test below edits one side of it
TWO_SIDES = '''\
from offlow import Element, Port, Program, Shared, Sink, Source


class Count(Element):
    """Counts what the wire gives (NIC)."""
    inputs, outputs, tables = (Port("inp"),), (Port("out"),), ("seen",)
    fields = {"mark": "uint8_t"}
    body = r"""
    int spare;                     // never read: the compiler warns of it
    seen[0]++;
    state->mark = (uint8_t)(pkt->len & 0xffu);
    """


class Stamp(Element):
    """Writes the mark into the frame's last byte (host)."""
    inputs, outputs = (Port("inp"),), (Port("out"),)
    body = r"""
    pkt->data[pkt->len - 1] = state->mark;   /* HOST */
    """


def program():
    p = Program("two_sides")
    src, c, s, out = Source("rx"), Count("count", seen=Shared("seen", "uint64_t", 1)), \\
        Stamp("stamp"), Sink("tx")
    src >> c >> s >> out
    p.segment("edge", [src, c], device="nic")
    p.segment("app", [s, out], device="host")
    return p
'''


def _two_sides(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "two_sides.py"
    path.write_text(source)
    return path


def test_a_change_to_one_devices_code_compiles_that_device_only(
        cache: Path, tmp_path: Path, compiles: list[str]) -> None:
    """An edit of the host's element leaves the NIC's executable as it was: it comes
    from the cache (with its warning), not the compiler; one the layout sees (a new
    per-packet field: common.h changes) compiles both."""
    first = build(load_program(_two_sides(tmp_path, TWO_SIDES)))
    assert sorted(w for w in compiles if w.startswith("generated")) == [
        "generated host.c of `two_sides`", "generated nic.c of `two_sides`"]
    compiles.clear()
    host_edit = TWO_SIDES.replace("/* HOST */", "/* HOST, edited */ (void)0;")
    second = build(load_program(_two_sides(tmp_path, host_edit)))
    assert second.directory != first.directory  # (another program: its own folder)
    assert [w for w in compiles if w.startswith("generated")] == [
        "generated host.c of `two_sides`"]
    assert any("unused variable 'spare'" in w for w in second.warnings), second.warnings
    res = run(second, RunOptions(count=20, timeout=60))
    assert res.ok and res.stats["nic"]["tables"]["seen"] == [20], res.errors
    compiles.clear()
    layout_edit = host_edit.replace('fields = {"mark": "uint8_t"}',
                                    'fields = {"mark": "uint8_t", "more": "uint32_t"}')
    build(load_program(_two_sides(tmp_path, layout_edit)))
    assert sorted(w for w in compiles if w.startswith("generated")) == [
        "generated host.c of `two_sides`", "generated nic.c of `two_sides`"]


def test_builds_with_and_without_werror_share_an_executable_that_compiled_quietly(
        with_core: Path, compiles: list[str]) -> None:
    """The werror set changes no code: a program built by a test (werror=True) and by
    `offlow run` (without) is compiled once, whichever comes first, and both run."""
    for settings, first, second in (([], False, True), (["rx.device=host"], True, False)):
        prog = load_program(EXAMPLE, settings)
        compiles.clear()
        one = build(prog, werror=first)
        assert len([w for w in compiles if w.startswith("generated")]) == len(one.binaries)
        compiles.clear()
        other = build(prog, werror=second)
        assert other.directory != one.directory  # (another set of flags: its own folder)
        assert [w for w in compiles if w.startswith("generated")] == [], settings
        for b in (one, other):
            res = run(b, RunOptions(input=str(TLS), timeout=60))
            assert res.ok, res.errors


def test_a_werror_build_still_fails_on_the_warning_a_build_without_it_kept(
        with_core: Path, tmp_path: Path, compiles: list[str]) -> None:
    """The NIC's body warns: the build without -Werror keeps its executable (and the
    warning); one with it compiles again and fails, as it did before they shared."""
    prog = load_program(_two_sides(tmp_path, TWO_SIDES))
    plain = build(prog)
    assert any("unused variable 'spare'" in w for w in plain.warnings), plain.warnings
    compiles.clear()
    with pytest.raises(OfflowError, match="nic.c of `two_sides`"):
        build(prog, werror=True)
    assert "generated nic.c of `two_sides`" in compiles
    compiles.clear()
    again = build(prog)  # (the failure took nothing away)
    assert compiles == [] and again.binaries == plain.binaries
    assert any("unused variable 'spare'" in w for w in again.warnings), again.warnings
