"""Bad input a user types is one clear error before any process starts: `offlow run`
exits with status 2 and one `offlow: error:` line naming what is wrong (no traceback,
no device process's failure, no table of zeros), and leaves no process, window or run
folder behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from offlow.elements.kvs import MEMCACHED_CACHE
from offlow.paths import DATA
from tests.ctools import build_c
from tests.e2e import EXAMPLE, TLS

ROOT = Path(__file__).resolve().parents[1]
KVS_CACHE = ROOT / "examples" / "kvs_cache.py"
ROUTER = ROOT / "examples" / "router.py"


def offlow_run(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    """`offlow ARGS` as a user runs it, in a folder of its own for temporary files;
    returns the exit status, stdout and stderr, after checking it left nothing."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    p = subprocess.Popen([sys.executable, "-m", "offlow.cli", *args], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "TMPDIR": str(tmp)})
    out, err = p.communicate(timeout=300)
    # what a run creates carries the offlow process's pid: its window, its processes'
    # command lines (--window); its run folder lives in TMPDIR
    tag = f"-{p.pid}-"
    assert not [w for w in os.listdir("/dev/shm") if w.startswith("offlow-") and tag in w]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        assert tag.encode() not in cmdline or b"/dev/shm/offlow-" not in cmdline, cmdline
    assert not [x for x in tmp.iterdir() if x.name.startswith("offlow-run-")]
    return p.returncode, out, err


def bad_program(tmp_path: Path) -> Path:
    path = tmp_path / "typo.py"
    path.write_text("from offlow import Program, Sink, Source\n\n\n"
                    "def program() -> Program:\n"
                    "    p = Program('typo')\n"
                    "    src, out = Source('rx'), Sink('tx')\n"
                    "    src >> outt\n"
                    "    return p\n")
    return path


def copy_of_tls(tmp_path: Path) -> Path:
    path = tmp_path / "tls.pcap"
    path.write_bytes(TLS.read_bytes())
    return path


CASES = {
    "not-a-capture": (lambda t: ["run", str(EXAMPLE), "--input", str(ROOT / "README.md")],
                      "--input: " + str(ROOT / "README.md") + " is not a readable capture"),
    "no-capture": (lambda t: ["run", str(EXAMPLE), "--input", str(t / "none.pcap")],
                   "no such file"),
    "output-folder-missing": (lambda t: ["run", str(EXAMPLE), "--input", str(TLS), "--output",
                                         str(t / "nowhere" / "out.pcap")],
                              "no such directory"),
    # (on a copy: were the check gone, the run would overwrite its input)
    "output-is-input": (lambda t: ["run", str(EXAMPLE), "--input", str(copy_of_tls(t)),
                                   "--output", str(t / "tls.pcap")], "is the input capture"),
    "negative-duration": (lambda t: ["run", str(EXAMPLE), "--duration", "-1"],
                          "--duration -1: must be a number of seconds above 0"),
    "zero-loops": (lambda t: ["run", str(EXAMPLE), "--loops", "0"], "--loops 0"),
    "bad-sizes": (lambda t: ["run", str(EXAMPLE), "--sizes", "64:7,huge"],
                  "--sizes: bad size mix"),
    "missing-prefixes": (lambda t: ["run", str(EXAMPLE), "--prefixes", str(t / "none.txt")],
                         "--prefixes"),
    "cache-value-max": (lambda t: ["run", str(KVS_CACHE), "--set", "cache.value_max=5000"],
                        "value_max 5000 is not within 1..1024"),
    "unknown-opt": (lambda t: ["run", str(EXAMPLE), "--opt", "nosuch.path=x"],
                    "no source, sink or table named `nosuch`"),
    # an element reads no options: before, this ran with the option silently unread
    "element-opt": (lambda t: ["run", str(EXAMPLE), "--count", "10", "--opt", "ttl4.limit=5"],
                    "--opt `ttl4.limit=5`: `ttl4` is an element (DecTTL), which reads no "
                    "run-time options: its parameters are fixed when the program is made"),
    "table-file-missing": (lambda t: ["run", str(ROUTER), "--opt",
                                      f"routes4.path={t / 'none.txt'}"],
                           "table `routes4`: path="),
    "metrics-no-port": (lambda t: ["run", str(EXAMPLE), "--metrics", "9100"],
                        "--metrics '9100': expected HOST:PORT"),
    "metrics-bad-port": (lambda t: ["run", str(EXAMPLE), "--metrics", "127.0.0.1:99999"],
                         "port `99999` is not within 0..65535"),
    "metrics-host-name": (lambda t: ["run", str(EXAMPLE), "--metrics", "example.org:9100"],
                          "`example.org` is not an IP address or localhost"),
    "python-error": (lambda t: ["run", str(bad_program(t))],
                     "typo.py:7: NameError: name 'outt' is not defined"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_clear_error_before_anything_starts(case: str, tmp_path: Path) -> None:
    argv, message = CASES[case]
    rc, out, err = offlow_run(argv(tmp_path), tmp_path)
    assert rc == 2, (out, err)
    assert message in err, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("offlow: error: "), err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("cmd", [["run", str(EXAMPLE)], ["bench", "queue", "--quick"]])
def test_a_vector_level_that_is_none_is_one_clear_error(
        cmd: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OFFLOW_SIMD=avx1024 would be ignored by the C kernels (the CPU's widest path)."""
    monkeypatch.setenv("OFFLOW_SIMD", "avx1024")
    rc, out, err = offlow_run(cmd, tmp_path)
    assert rc == 2 and out == "", (out, err)
    assert err.strip() == ("offlow: error: OFFLOW_SIMD=avx1024 names no vector level "
                           "(scalar, avx2, avx512)"), err


def test_the_cache_limits_are_the_c_sides(tmp_path: Path) -> None:
    """MEMCACHED_CACHE.limits hold kvcache.h's bounds (one source, checked here)."""
    src = tmp_path / "limits.c"
    src.write_text('#include <stdio.h>\n#include "offlow/kvcache.h"\n'
                   'int main(void) { printf("%u %u %u", OFL_KVC_WAYS_MAX, OFL_KVC_ENTRIES_MAX,'
                   " OFL_KVC_VALUE_MAX); return 0; }\n")
    exe = build_c([src], "limits", ["kvs"])
    highs = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True,
                                            check=True).stdout.split()]
    assert {k: hi for k, _, hi in MEMCACHED_CACHE.limits} == dict(
        zip(("ways", "entries", "value_max"), highs, strict=True))


def test_a_good_run_still_starts(tmp_path: Path) -> None:
    """(The checks refuse only what is wrong.)"""
    rc, out, err = offlow_run(["run", str(EXAMPLE), "--input", str(TLS), "--output",
                               str(tmp_path / "out.pcap"), "--duration", "0.2"], tmp_path)
    assert rc == 0, err
    assert "sink tx:" in out
    assert DATA.exists()
