"""Where an element's C code is written: the file and the line its `body` (or
`helpers`) string starts on, for the compiler's messages and the generated C's #line
directives. Program files run with runpy, so `inspect` cannot find their classes; each
element class records where it was defined (Element.__init_subclass__) and the file's
Python syntax tree gives the string's line."""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType


def class_site(cls: type) -> tuple[str, int]:
    """The file and line of the `class` statement of `cls` ("", 0 if unknown)."""
    site = vars(cls).get("_ofl_site")
    return site if isinstance(site, tuple) else ("", 0)


def code_site(obj: object, attr: str) -> tuple[str, int]:
    """The file and the line of the first line of `obj.attr`, a C string written as a
    class attribute of `obj`'s class or one it inherits; line 0 when it was made at run
    time (set on the instance, or not a plain string literal)."""
    owner = next((c for c in type(obj).__mro__ if attr in vars(c)), type(obj))
    file, line = class_site(owner)
    if attr in vars(obj) or not file or not line:
        return class_site(type(obj))[0], 0
    try:
        text = Path(file).read_text()
    except OSError:
        return file, 0
    return file, _string_lines(file, text).get((line, owner.__name__, attr), 0)


@functools.lru_cache(maxsize=64)
def _string_lines(file: str, text: str) -> Mapping[tuple[int, str, str], int]:
    """Of Python source `text` (file `file`): (line of a `class` statement, class name,
    attribute) -> the line of the first line of the plain string literal assigned to it
    in the class body (the file's syntax tree, made once per text: a program's build
    asks for each element's bodies and helpers)."""
    try:
        tree = ast.parse(text, file)
    except (SyntaxError, ValueError):
        return MappingProxyType({})
    lines: dict[tuple[int, str, str], int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                for name in _names(stmt):
                    value = _assigned(stmt, name)
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        lines.setdefault((node.lineno, node.name, name), value.lineno)
    return MappingProxyType(lines)


def _names(stmt: ast.stmt) -> list[str]:
    """The plain names `stmt` assigns (`a = b = v`, `a: T = v`)."""
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def _assigned(stmt: ast.stmt, name: str) -> ast.expr | None:
    """The value of `name = value` (or `name: T = value`), else None."""
    if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
        return stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and (
            stmt.target.id == name):
        return stmt.value
    return None
