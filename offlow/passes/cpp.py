"""The real C preprocessor (gcc -E) in front of the body parser: it removes comments,
runs a body's #define / #if, and keeps line markers, so the parser's positions are the
program file's lines. It also reports the macros the body defines: the generated C
undefines them after the body, so each body's macros stay its own.

Only for analysis, some GNU spellings the parser does not know are spelled as standard
C (`__typeof__(x)` as `int`, attributes dropped); the C compiler sees the body as
written."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

# GNU C the parser lacks, for analysis only: a type expression read as `int` reads
# nothing (typeof does not evaluate its operand), attributes and `__extension__` mean
# nothing to which fields a body touches.
_GNU_AS_STANDARD = (
    "-D__typeof__(x)=int", "-D__typeof(x)=int", "-Dtypeof(x)=int",
    "-D__attribute__(x)=", "-D__extension__=", "-D__inline__=inline", "-D__inline=inline",
    "-D__restrict__=restrict", "-D__restrict=restrict", "-D__volatile__=volatile",
    "-D__const__=const", "-D__signed__=signed",
)


class CppError(Exception):
    """The preprocessor refused the code (an unterminated comment, #error, an #include
    ...); the message is its first error, with the file and line."""


@dataclass(frozen=True)
class Preprocessed:
    text: str  # the code, with line markers
    macros: tuple[str, ...]  # macros defined after `start` and not undefined there


def preprocess(code: str, start: str) -> Preprocessed:
    """Run `code` through gcc -E; `start` is the line of `code` after which the macros
    it defines are reported (the line that opens a body's function)."""
    if shutil.which("gcc") is None:
        raise CppError("no C compiler: install gcc (the README's setup command does)")
    # -dD keeps #define lines in place (so the body's macros are known); -nostdinc:
    # an #include in a body would paste a header inside a function
    res = subprocess.run(["gcc", "-E", "-dD", "-nostdinc", "-std=gnu11", *_GNU_AS_STANDARD,
                          "-x", "c", "-"], input=code, capture_output=True, text=True)
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
    return Preprocessed("\n".join(lines) + "\n", tuple(macros))
