"""The C compiler's warnings about the program's own lines: a body's, its helpers' or
its batch body's, which the generated C's #line directives map back to the program's
file. The compiler's other warnings (of generated code, of the runtime's headers) are
not the user's to act on and are not shown.

This reads the compiler's diagnostics (gcc's and clang's text format, `FILE:LINE:COL:
warning: TEXT [-Wflag]`), never C: a line is the program's when it begins with one of
the program's own file names, as the #line directives spell them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from offlow.buildcache import temporary

if TYPE_CHECKING:
    from offlow.ir import Graph, Node

SUFFIX = ".warnings"  # the file beside a build's product that keeps its warnings
# in the record of a product built with its warnings kept: one built before they were
# is built again (its warnings unknown)
KEPT = "warnings kept"


@dataclass(frozen=True)
class Diagnostic:
    """One warning of the compiler at a line of the program's own files."""

    file: str
    line: int
    col: int  # 0: the compiler gave none
    text: str  # the compiler's words, its [-Wflag] included


def _nodes(g: Graph) -> list[Node]:
    """The nodes whose C code the program wrote: elements, sources, sinks, handlers."""
    return [*g.nodes, *(c.handler for c in g.channels)]


def own_files(g: Graph) -> frozenset[str]:
    """The files the program's bodies and helpers come from (as #line names them)."""
    return frozenset(n.origin for n in _nodes(g) if n.origin)


def _parse_line(line: str, files: Iterable[str]) -> Diagnostic | None:
    """`line` as a warning at one of `files`, else None (another file, an error, a
    note, a context line)."""
    for f in sorted(files, key=len, reverse=True):  # (the longest name that fits)
        if not line.startswith(f + ":"):
            continue
        parts = line[len(f) + 1:].split(":", 3)
        if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit():
            num, col, kind, text = parts
        elif len(parts) >= 3 and parts[0].isdigit():  # (no column: -fno-show-column)
            num, col, kind, text = parts[0], "0", parts[1], ":".join(parts[2:])
        else:
            return None
        if kind.strip() != "warning":
            return None
        return Diagnostic(f, int(num), int(col), text.strip())
    return None


def own_warnings(stderr: str, files: Iterable[str]) -> list[str]:
    """The lines of the compiler's output `stderr` that are warnings at `files`, each
    once, in order (the first line of each; its excerpt and notes left out)."""
    files = tuple(files)
    kept = [line for line in stderr.splitlines() if _parse_line(line, files)]
    return list(dict.fromkeys(kept))


def keep(product: Path, lines: Iterable[str]) -> None:
    """Write `lines` (own_warnings) beside build product `product` (PRODUCT.warnings),
    whole or not at all: a later build from the cache reads them again (kept)."""
    path = product.with_name(product.name + SUFFIX)
    tmp = temporary(path)
    tmp.write_text("".join(f"{x}\n" for x in lines))
    tmp.replace(path)


def kept_beside(product: Path) -> list[str]:
    """The warnings `keep` wrote beside build product `product` (none: no file)."""
    try:
        return product.with_name(product.name + SUFFIX).read_text(
            errors="replace").splitlines()
    except OSError:
        return []


def kept(folder: Path) -> list[str]:
    """The warnings `keep` wrote beside the products in `folder` (a program's build
    folder: its devices' executables, a target's objects); a damaged file's lines that
    are not warnings are left out by `describe`."""
    out = []
    for f in sorted(folder.glob(f"*{SUFFIX}")):
        try:
            out += f.read_text(errors="replace").splitlines()
        except OSError:  # (removed meanwhile: a --no-cache build replacing it)
            continue
    return out


def _holders(g: Graph, d: Diagnostic) -> list[str]:
    """The names of the nodes whose body, batch body or helpers holds `d`'s line (two
    instances of one class share their code)."""
    names = []
    for n in _nodes(g):
        if n.origin != d.file:
            continue
        for start, text in ((n.body_line, n.body), (n.batch_line, n.batch_body),
                            (n.helpers_line, n.helpers)):
            if start and text and start <= d.line <= start + text.count("\n"):
                names.append(n.name)
                break
    return list(dict.fromkeys(names))


def describe(g: Graph, lines: Iterable[str]) -> list[str]:
    """The warnings `lines` (own_warnings of any of `g`'s builds) for a person, each
    once (the same body compiled for two devices warns once), in the order of their
    lines: `FILE:LINE:COL: element `NAME`: TEXT` (`elements `A`, `B``: instances of
    one class), the element left out when no body's lines hold it."""
    files = own_files(g)
    found = (_parse_line(line, files) for line in lines)
    out = []
    for d in sorted({d for d in found if d}, key=lambda d: (d.file, d.line, d.col, d.text)):
        names = _holders(g, d)
        who = (f"element `{names[0]}`: " if len(names) == 1 else
               "elements " + ", ".join(f"`{n}`" for n in names) + ": " if names else "")
        where = f"{d.file}:{d.line}:{d.col}" if d.col else f"{d.file}:{d.line}"
        out.append(f"{where}: {who}{d.text}")
    return list(dict.fromkeys(out))
