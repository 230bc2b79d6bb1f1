"""Program files: a Python file that defines `program() -> offlow.Program`, loaded into
a program value (what `offlow run FILE`, `offlow explain FILE` and the benchmarks
compile)."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from offlow.dsl.program import Program
from offlow.errors import OfflowError


def load_program(path: str | os.PathLike[str], settings: Sequence[str] = ()) -> Program:
    """Run a program file (a path, as a string or a Path) in a fresh namespace (its
    folder on the import path meanwhile: it may import modules beside it) and call
    its `program()` function, then apply `settings` (`SEG.device=host`, ... each a
    string of a list). An error raised there (a Python one, or an offlow one about the
    wiring) is an OfflowError naming the file and the line of the program that raised
    it."""
    path = Path(path)
    if isinstance(settings, str):
        raise OfflowError(f"load_program({str(path)!r}, {settings!r}): settings are a list "
                          f"of strings: [{settings!r}]")
    if not path.exists():
        raise OfflowError(f"no such program file: {path}")
    if not path.is_file():
        raise OfflowError(f"{path} is not a program file (a folder?): give the .py file "
                          "that defines `def program() -> offlow.Program`")
    # (its folder first on the import path while it loads, as `python FILE` has it: a
    # program may import its own modules beside it)
    folder = str(path.resolve().parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        namespace = runpy.run_path(str(path), run_name="offlow_program")
        factory = namespace.get("program")
        if not callable(factory):
            raise OfflowError(f"{path} must define `def program() -> offlow.Program`")
        prog = factory()
    except (Exception, SystemExit) as err:  # any error of the user's code is reported so
        raise OfflowError(_program_error(path, err)) from None
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    if not isinstance(prog, Program):
        raise OfflowError(f"{path}: program() returned {type(prog).__name__}, not a Program")
    for s in settings:
        prog.apply_setting(s)
    return prog


def _program_error(path: Path, err: Exception | SystemExit) -> str:
    """`FILE:LINE: message` for an error raised while running program file `path`: the
    line is the deepest one of the file in the traceback (or a syntax error's). A
    sys.exit() there (the file's own argparse, say) is one too: offlow would otherwise
    end with its status and not a word."""
    if isinstance(err, SyntaxError) and err.filename and err.lineno:
        return f"{err.filename}:{err.lineno}: {type(err).__name__}: {err.msg}"
    here = str(path)
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if Path(f.filename).resolve() == path.resolve()]
    what = (str(err) if isinstance(err, OfflowError)
            else f"it called sys.exit({err.code!r}) as offlow loaded it (a program file "
                 "defines program(); it does not parse a command line or exit)"
            if isinstance(err, SystemExit) else f"{type(err).__name__}: {err}")
    if not frames or str(err).startswith(here):
        return what
    return f"{here}:{frames[-1].lineno}: {what}"
