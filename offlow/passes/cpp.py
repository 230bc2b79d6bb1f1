"""The real C preprocessor (gcc -E) in front of the body parser: it removes comments,
runs a body's #define / #if, and keeps line markers, so the parser's positions are the
program file's lines. It also reports the macros the body defines: the generated C
undefines them after the body, so each body's macros stay its own.

Only for analysis, some GNU spellings the parser does not know are spelled as standard
C (attributes dropped; cbody.py's prelude reads `__typeof__(x)` as a type name); the C
compiler sees the body as written."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from offlow import cbuild


class CppError(Exception):
    """The preprocessor refused the code (an unterminated comment, #error, an #include
    ...); the message is its first error, with the file and line."""


_FIRST_LINE = '# 1 "<stdin>"'  # gcc's line marker before the first line of its input


@dataclass(frozen=True)
class Preprocessed:
    text: str  # the code, with line markers
    macros: tuple[str, ...]  # macros defined after `start` and not undefined there


def command() -> tuple[str, ...]:
    """The preprocessor's command line: the compiler and runtime/build.toml's flag set
    `preprocess` (it says why each flag)."""
    d = cbuild.description()
    return (d.compiler(), *d.flags("preprocess"))


def preprocess(code: str, start: str, cmd: tuple[str, ...] | None = None) -> Preprocessed:
    """Run `code` through gcc -E (`cmd`, else command()); `start` is the line of `code`
    after which the macros it defines are reported (the line that opens a body's
    function)."""
    cmd = cmd or command()
    if shutil.which(cmd[0]) is None:
        raise CppError("no C compiler: install gcc (the README's setup command does)")
    res = subprocess.run(list(cmd), input=code,
                         capture_output=True, text=True, env=cbuild.c_locale())
    if res.returncode != 0:
        errors = [x for x in res.stderr.splitlines() if "error" in x] or [res.stderr.strip()]
        raise CppError(errors[0].replace("<stdin>", "body"))
    lines: list[str] = []
    macros: dict[str, None] = {}
    started = False
    for line in res.stdout.splitlines():
        started = started or line == start
        if line.startswith(("#define ", "#undef ")):
            directive, _, rest = line.partition(" ")
            name = rest.split("(", 1)[0].split(" ", 1)[0]
            if started and directive == "#define":
                macros[name] = None
            elif started:
                macros.pop(name, None)
            lines.append("")  # what plain -E leaves for a directive: keeps the lines
            continue
        lines.append(line)
    # What comes before the code's own first line is gcc's ~380 built-in macros, each
    # after a line marker of its own (-dD): blank for the parser, but ~85% of its work.
    # The marker kept names the code's line 1, so every later position is unchanged.
    first = next((i for i, x in enumerate(lines) if x == _FIRST_LINE), 0)
    return Preprocessed("\n".join(lines[first:]) + "\n", tuple(macros))
