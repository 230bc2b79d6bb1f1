"""A user's option for a table (`offlow run --opt TABLE.KEY=VALUE`) that the table never
reads, in any process of the run, is the run's one error: said before anything starts
for a table that declares its keys (offlow.optkeys: tests/test_opt_keys.py), else by
the process that holds the table before the first packet, naming the keys it takes:
the keys its sender read (a table read on the host and sent to the device) count as
read (gen.h: ofl_table_send passes them on). An option for a shared array or a map, which
read none, is one error before any process starts. Until 2026-11-28 every one of these
ran with the option silently unread (`--opt routes4.nprts=3` ran with 16 ports).

A prefix file's lines that are not prefixes, skipped, are in the run's report: how
many and the first one's line (they were counted but never shown)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offlow.paths import DATA

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ROUTER = EXAMPLES / "router.py"
KROA100 = DATA / "kroA100.tsp"
CLIMBERS_SENT = ROOT / "tests" / "programs" / "climbers_sent.py"


def offlow_run(program: Path, *args: str) -> tuple[int, dict, str]:
    """`offlow run PROGRAM ARGS --json`: its status, summary and stderr."""
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(program), *args,
                        "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=os.environ)
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else {}, p.stderr


@pytest.fixture(scope="module")
def prefixes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small prefix file of both families, every line a prefix."""
    p = tmp_path_factory.mktemp("routes") / "small.txt"
    p.write_text("10.0.0.0/8\n192.0.2.0/24\n2001:db8::/32\n")
    return p


def router(path: Path, where: str) -> list[str]:
    """The router on prefix file `path`, its tables on `where` (nic: read and sent by the
    host; host: read there)."""
    place = ["--set", "route.device=host"] if where == "host" else []
    return ["--count", "50", "--opt", f"routes4.path={path}", "--opt",
            f"routes6.path={path}", *place]


@pytest.mark.parametrize("where", ["nic", "host"])
def test_a_misspelt_lpm_table_key_is_one_error_before_anything_starts(
        where: str, prefixes: Path) -> None:
    # (each kind's misspelt key, and that the keys declared are those its process reads
    # wherever it is: tests/test_opt_keys.py)
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(ROUTER),
                        *router(prefixes, where), "--opt", "routes4.nprts=3", "--json"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=os.environ)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr == ("offlow: error: --opt `routes4.nprts=3`: table `routes4` reads no "
                        "option `nprts` (did you mean `nports`?); it reads nports, path\n")


def test_keys_read_only_by_the_lpm_tables_sender_are_not_refused(prefixes: Path) -> None:
    # on the nic the tables are built from the host's blob: only the host reads path=
    # and nports=, and the nic, which holds them, refuses what neither read
    rc, s, err = offlow_run(ROUTER, *router(prefixes, "nic"), "--opt", "routes4.nports=3",
                            "--opt", "routes6.nports=5")
    assert rc == 0 and not s["errors"], (s["errors"], err)
    assert s["sources"]["rx"]["packets"] == 50


def test_keys_read_on_either_side_of_a_sent_table_are_not_refused() -> None:
    # path= is read by the host only (which sends the cities), climbers= by the nic only
    rc, s, err = offlow_run(CLIMBERS_SENT, "--count", "20", "--opt", f"cities.path={KROA100}",
                            "--opt", "cities.climbers=2")
    assert rc == 0 and not s["errors"], (s["errors"], err)
    assert s["sources"]["rx"]["packets"] == 20


def test_the_documented_table_options_of_the_examples_run(prefixes: Path) -> None:
    # docs/element-reference.md: store.tcp_threads= (read only with --tcp before)
    runs = [(EXAMPLES / "kvs.py", ["--opt", "store.value_max=2048", "--opt",
                                    "store.tcp_threads=2", "--opt", "store.capacity=1000"]),
            (EXAMPLES / "crypto.py", ["--opt", f"keys.path={EXAMPLES / 'crypto_keys.txt'}"]),
            (EXAMPLES / "tsp.py", ["--opt", f"cities.path={KROA100}", "--opt",
                                   "cities.climbers=2"]),
            (ROUTER, [*router(prefixes, "host"), "--opt", "routes4.nports=3"])]
    for program, args in runs:
        rc, s, err = offlow_run(program, "--count", "20", *args)
        assert rc == 0 and not s["errors"], (program, s["errors"], err)


@pytest.mark.parametrize(("program", "opt", "want"), [
    (EXAMPLES / "ttl_pipeline.py", "class_counts.size=3",
     "table `class_counts` is a shared array (Shared), which reads no run-time options"),
    (ROOT / "tests" / "programs" / "flow_counts.py", "flows.entries=3",
     "table `flows` is a hash map (SharedMap), which reads no run-time options"),
])
def test_an_option_for_an_array_or_a_map_is_one_error_before_anything_starts(
        program: Path, opt: str, want: str) -> None:
    p = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(program), "--count",
                        "10", "--opt", opt], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env=os.environ)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert len(lines) == 1 and lines[0].startswith(f"offlow: error: --opt `{opt}`: {want}"), \
        p.stderr
    assert "options name a source, sink or table object:" in lines[0]
    assert "class_counts," not in lines[0] and "flows," not in lines[0]


@pytest.mark.parametrize("where", ["nic", "host"])
def test_a_prefix_files_lines_that_are_not_prefixes_are_reported(
        where: str, tmp_path: Path) -> None:
    path = tmp_path / "routes.txt"
    path.write_text("10.0.0.0/8 1\nbogus line\n# a comment\n2001:db8::/32\nalso bogus\n")
    rc, s, err = offlow_run(ROUTER, *router(path, where))
    assert rc == 0 and not s["errors"], (s["errors"], err)
    want = {"kind": "lpm", "path": str(path), "lines": 5, "not_prefixes": 2,
            "first_not_prefix": 2}
    assert s["tables"] == {"routes4": want, "routes6": want}
    text = subprocess.run([sys.executable, "-m", "offlow.cli", "run", str(ROUTER),
                           *router(path, where)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=os.environ)
    assert text.returncode == 0, text.stderr
    assert (f"table routes4: 2 of 5 lines in {path} are not prefixes, skipped (first: "
            "line 2)") in text.stdout


def test_a_clean_prefix_file_says_nothing(prefixes: Path) -> None:
    rc, s, err = offlow_run(ROUTER, *router(prefixes, "nic"))
    assert rc == 0 and s["tables"] == {}, (s["tables"], err)
