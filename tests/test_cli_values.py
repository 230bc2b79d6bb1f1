"""Every option of every subcommand that takes a value, given the values users get
wrong (0, -1, abc, nan, inf, 1e30, 2**64, an empty string, a path that does not exist,
a folder for a file, a file for a folder): one clear error naming the option, exit
status 1 or 2, no traceback, and no work started (no process spawned, back within a few
seconds). The options come from walking offlow's own parser, so a new option is covered
without editing this file: it needs a value type of offlow.argtypes (or choices), or
an entry in EXEMPT saying why its value cannot be judged here."""

from __future__ import annotations

import argparse
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from offlow import argtypes
from offlow.cli import main, parser

# (subcommand, option): why a bad value cannot be judged by its type, and what does judge it
EXEMPT = {
    **{(cmd, "--set"): "SEG.ATTR=VALUE, checked against the program once it is loaded "
                       "(tests/test_cli.py)" for cmd in ("explain", "run", "reload", "plan")},
    ("run", "--sizes"): "a size:weight mix, read with --prefixes by check_options before any "
                        "process (tests/test_errors_before_start.py)",
    ("run", "--opt"): "NAME.KEY=VALUE of the program's sources, sinks and tables, checked "
                      "against the program's plan before it is built (tests/test_opt_keys.py)",
    ("run", "--port"): "KIND:ARGS, parsed by offlow.ports before any process (test_ports)",
    ("run", "--iface"): "a network interface's name: whether it exists is known when "
                        "attaching (offlow.targets.xdp checks it before any process)",
    ("run", "--profile"): "a profile's name or YAML file, loaded by check_options",
    ("run", "--metrics"): "HOST:PORT, parsed by offlow.metrics before any process "
                          "(tests/test_errors_before_start.py)",
    ("run", "--remote"): "NAME=ADDR:PORT, parsed by offlow.remote.endpoints",
    ("serve-device", "--listen"): "ADDR:PORT, parsed by offlow.remote before it listens",
    ("ctl", "window"): "a run's window: attach says no such window / not an offlow window",
    ("stats", "window"): "a run's window (tests/test_metrics.py: no such window)",
    ("reload", "window"): "a run's window, attached to before anything is built",
    ("ctl table", "name"): "a table's name, known to the running program only",
    ("ctl table", "value"): "typed by the table's element type (offlow.control.parse_value)",
    ("ctl map", "name"): "a table's name, known to the running program only",
    ("ctl map", "key"): "FIELD=VALUE,... of the map's key type, known to the program only",
    ("ctl map", "value"): "an integer of the map's value type, known to the program only",
    ("ctl route", "prefix"): "a prefix, parsed by the route table (offlow.control)",
    ("ctl route", "--table"): "a table's name, known to the running program only",
    ("cache prune", "--max"): "a size with a unit, parsed by buildcache.parse_size",
    ("plan", "--device"): "a profile's name or YAML file, loaded before the calibration",
    ("plan", "--host"): "a profile's name or YAML file, loaded before the calibration",
    ("plan", "--workload"): "synthetic, kvs or a capture, read before the calibration "
                            "(tests/test_planner_calibrate.py)",
    ("plan", "--alt"): "lines of --set settings, checked against the program",
    ("plan", "--work"): "ELEMENT=KIND, checked against the program (parse_work)",
    ("bench", "--sweeps"): "router's sweep names, checked by router_sweeps.choose first",
    ("bench", "--designs"): "kvs designs, checked by name before anything is measured",
    ("bench", "--values"): "kvs workloads, checked by name before anything is measured",
}

INTS = ("abc", "", "nan", "inf", "1e30", str(2**64), "1.5")
FLOATS = ("abc", "", "nan", "inf", "-inf", "1e30", str(2**64))
# placeholders replaced in the test by paths under tmp_path
MISSING, FOLDER, FILE, NEW = "<missing>", "<folder>", "<file>", "<new>"


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def _takes_value(a: argparse.Action) -> bool:
    return a.nargs != 0 and not isinstance(a, argparse._SubParsersAction | argparse._HelpAction)


def _good(a: argparse.Action) -> str:
    """A value `a` accepts (so that the parse reaches the option tried)."""
    t = a.type
    if a.choices:
        return str(next(iter(a.choices)))
    if isinstance(t, argtypes.Whole):
        return str(t.lo)
    if isinstance(t, argtypes.Number):
        return str(t.hi)
    if isinstance(t, argtypes.Names):
        return t.allowed[0]
    return {argtypes.File: FILE, argtypes.Folder: FOLDER,
            argtypes.NewFile: NEW}.get(type(t), "x")


def _bad(a: argparse.Action) -> tuple[str, ...]:
    """The values `a` must refuse."""
    t = a.type
    if a.choices:
        return ("nosuch",)
    if isinstance(t, argtypes.Whole):
        return INTS + ("0",) * (t.lo > 0) + ("-1",) * (t.lo > -1)
    if isinstance(t, argtypes.Number):
        return FLOATS + ("0",) * (t.lo > 0 or t.above) + ("-1",) * (t.lo > -1)
    if isinstance(t, argtypes.File):
        return ("", MISSING, FOLDER)
    if isinstance(t, argtypes.Folder):
        return ("", MISSING, FILE)
    if isinstance(t, argtypes.NewFile):
        return ("", FOLDER, f"{MISSING}/out.x")
    if isinstance(t, argtypes.Names):
        return ("", "nosuch", f"{t.allowed[0]},nosuch")
    if isinstance(t, argtypes.Refused):
        return ("anything",)
    raise AssertionError(f"no bad values for type {t!r}")


def _name(a: argparse.Action) -> str:
    longs = [s for s in a.option_strings if s.startswith("--")]
    return (longs or a.option_strings or [str(a.metavar or a.dest)])[0]


def _argv(path: list[tuple[str, argparse.ArgumentParser]], target: argparse.Action,
          value: str) -> list[str]:
    """The command line of `path` (names and parsers, outermost first) with every
    positional and required option given a good value, `target` given `value`."""
    argv: list[str] = []
    for i, (name, p) in enumerate(path):
        if i:
            argv.append(name)
        opts: list[str] = []
        for a in p._actions:
            if not _takes_value(a) or (a.option_strings and not a.required and a is not target):
                continue
            v = value if a is target else _good(a)
            if a.option_strings:
                opts += [a.option_strings[0], v]
            else:
                argv.append(v)
        argv += opts
    return argv


def _cases() -> Iterator[tuple[str, str, list[str] | None]]:
    """(subcommand, option, argv) for every bad value of every option; argv None for
    an option that has no checked type and no exemption (a failure)."""
    def walk(path: list[tuple[str, argparse.ArgumentParser]]
             ) -> Iterator[tuple[str, str, list[str] | None]]:
        cmd = " ".join(n for n, _ in path[1:])
        for a in path[-1][1]._actions:
            if not _takes_value(a) or a.help == argparse.SUPPRESS and a.type is None:
                continue
            checked = a.choices or isinstance(a.type, argtypes.CHECKED)
            if (cmd, _name(a)) in EXEMPT and not checked:
                continue
            if not checked:
                yield cmd, _name(a), None
                continue
            for v in _bad(a):
                yield cmd, _name(a), _argv(path, a, v)
        for name, sp in _subparsers(path[-1][1]).items():
            yield from walk([*path, (name, sp)])
    return walk([("offlow", parser())])


CASES = list(_cases())


def test_every_option_that_takes_a_value_is_checked_or_exempt_with_its_reason() -> None:
    unchecked = sorted({f"offlow {c} {o}" for c, o, argv in CASES if argv is None})
    assert not unchecked, ("options with no offlow.argtypes type, no choices and no "
                           f"EXEMPT entry: {unchecked}")


def test_every_exemption_names_an_option_that_exists() -> None:
    names: set[tuple[str, str]] = set()

    def walk(cmd: str, p: argparse.ArgumentParser) -> None:
        names.update((cmd, _name(a)) for a in p._actions if _takes_value(a))
        for n, sp in _subparsers(p).items():
            walk(f"{cmd} {n}".strip(), sp)
    walk("", parser())
    assert not set(EXEMPT) - names, sorted(set(EXEMPT) - names)


class _WorkStarted(Exception):
    pass


@pytest.mark.parametrize("cmd,option,argv",
                         [c for c in CASES if c[2] is not None],
                         ids=[f"{c} {o} {argv[-1] if argv else ''}".strip()
                              for c, o, argv in CASES if argv is not None])
def test_a_bad_value_is_one_clear_error_before_any_work(
        cmd: str, option: str, argv: list[str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x\n")
    paths = {MISSING: str(tmp_path / "missing"), FOLDER: str(tmp_path / "folder"),
             FILE: str(tmp_path / "file"), NEW: str(tmp_path / "new.out")}
    argv = [paths.get(x.split("/")[0], x.split("/")[0]) + x[len(x.split("/")[0]):]
            if x.startswith("<") else x for x in argv]

    def started(*_a: object, **_k: object) -> None:
        raise _WorkStarted("a process was started")

    def late(_sig: int, _frame: FrameType | None) -> None:
        raise _WorkStarted("still working after 5 s")

    monkeypatch.setattr(subprocess.Popen, "__init__", started)
    old = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out, err = capsys.readouterr()
    assert rc in (1, 2), (argv, rc, out, err)
    assert "Traceback" not in err + out, err
    assert "offlow" in err and "error: " in err and option in err, (argv, err)


# an option that only applies with another: refused, never silently ignored
IGNORED = {
    "pcsa-distinct-with-input": (["pcsa", "--input", FILE, "--distinct", "5"], "--distinct"),
    "pcsa-more-distinct-than-packets": (["pcsa", "--distinct", "300000"], "--distinct 300,000"),
    "tsp-batch-on-host": (["tsp", "--device", "host", "--batch", "64"], "--batch 64"),
    "tsp-climbers-on-gpu": (["tsp", "--device", "gpu", "--climbers", "2"], "--climbers 2"),
    "plan-repeats-without-validate": (["plan", FILE, "--device", "host", "--repeats", "3"],
                                      "--repeats 3: goes with --validate"),
    "lso-dma-min-without-auto": (["lso", "run", "--input", FILE, "--dma-min", "512"],
                                 "--dma-min 512: goes with --move auto"),
    "lso-stream-without-from-stream": (["lso", "sends", "--output", NEW, "--from", "tls",
                                        "--stream", FILE], "goes with `--from stream`"),
    "tuples-port-with-csv": (["tuples", "generate", f"{NEW}.csv", "--port", "9000"],
                             "--port 9000: goes with a .pcap output"),
    "bench-png-of-queue": (["bench", "queue", "--png", NEW], "--png: `offlow bench queue`"),
    "bench-prefixes-of-xdp-e2e": (["bench", "xdp", "--e2e", "--prefixes", FILE],
                                  "--prefixes: `offlow bench xdp --e2e`"),
}


@pytest.mark.parametrize("case", list(IGNORED))
def test_an_option_that_would_be_ignored_is_refused(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    argv, says = IGNORED[case]
    (tmp_path / "file").write_text("x\n")
    paths = {FILE: str(tmp_path / "file"), NEW: str(tmp_path / "new.out")}
    argv = [paths.get(x, x) if not x.startswith(NEW) else str(tmp_path / "new") + x[len(NEW):]
            for x in argv]

    def started(*_a: object, **_k: object) -> None:
        raise _WorkStarted("a process was started")

    monkeypatch.setattr(subprocess.Popen, "__init__", started)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("offlow: error: ") and err.count("\n") == 1 and says in err, err


def _leaves() -> list[list[tuple[str, argparse.ArgumentParser]]]:
    """Every command that has no subcommands of its own, as a path of (name, parser)."""
    out = []

    def walk(path: list[tuple[str, argparse.ArgumentParser]]) -> None:
        subs = _subparsers(path[-1][1])
        if not subs:
            out.append(path)
        for name, sp in subs.items():
            walk([*path, (name, sp)])
    walk([("offlow", parser())])
    return out


LEAVES = _leaves()
NO_SUCH = argparse.Action(["--no-such"], "no_such")  # (an option no command has)


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """main(argv) with no process allowed to start: its status and stderr."""
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err
    return rc, err


@pytest.mark.parametrize("path", LEAVES, ids=[" ".join(n for n, _ in p[1:]) for p in LEAVES])
def test_an_option_a_command_lacks_is_one_error_naming_the_command(
        path: list[tuple[str, argparse.ArgumentParser]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """argparse left such an option to the top parser: `offlow`'s whole usage and
    "unrecognized arguments", naming no command."""
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse_start)
    paths = {MISSING: str(tmp_path / "missing"), FOLDER: str(tmp_path),
             FILE: __file__, NEW: str(tmp_path / "new.out")}
    argv = [paths.get(x, x) for x in _argv(path, NO_SUCH, "")]
    cmd = path[-1][1].prog  # (`offlow ctl window tables`: argparse names the positional)
    rc, err = _main([*argv, "--nosuch-option", "7"], capsys)
    assert rc == 2, (argv, err)
    assert err == (f"offlow: error: {cmd} has no option `--nosuch-option`; "
                   f"`{cmd} --help` lists its options\n"), (argv, err)


def _refuse_start(*_a: object, **_k: object) -> None:
    raise _WorkStarted("a process was started")


def test_a_misspelt_option_is_told_the_closest_one(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse_start)
    rc, err = _main(["run", __file__, "--coutn", "5"], capsys)
    assert (rc, err) == (2, "offlow: error: offlow run has no option `--coutn` (did you "
                            "mean `--count`?); `offlow run --help` lists its options\n")
    rc, err = _main(["router", "check", "--seeed", "--tabel=x"], capsys)
    assert (rc, err) == (2, "offlow: error: offlow router check has no option `--seeed`, "
                            "`--tabel` (did you mean `--seed`?); `offlow router check "
                            "--help` lists its options\n")


def test_an_argument_a_command_does_not_take_is_one_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse_start)
    rc, err = _main(["explain", __file__, "second.py"], capsys)
    assert (rc, err) == (2, "offlow: error: offlow explain takes no argument `second.py` "
                            "there; `offlow explain --help` says what it takes\n")
