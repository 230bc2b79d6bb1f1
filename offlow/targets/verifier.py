"""The kernel verifier's refusal of an XDP program, said in terms of the program: the
element whose body line the failing instruction came from (the verifier's log names
each source line it walks, `; TEXT @ FILE:LINE`, from the BTF line info that the
generated code's #line directives point into the program's file), and the
verifier's reason (the log's last line before its summary)."""

from __future__ import annotations

import re
from pathlib import Path

from offlow.ir import Graph, Node

_SOURCE = re.compile(r"^; (?P<text>.*) @ (?P<file>.+):(?P<line>\d+)$")
# clang's error for a call of a function no header declares (the words of clang 14, 16)
_UNDECLARED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):\d+: error: (?:implicit "
                         r"declaration of|call to undeclared) function '(?P<fn>\w+)'", re.M)

# clang's BPF back end expands memcpy/memmove/memset/memcmp only for a size it knows at
# compile time; any other is this error, whose note names the body's line (#line)
_NO_BUILTIN = re.compile(r"error: A call to built-in function '(?P<fn>\w+)' is not "
                         r"supported\.(?:.*\n)*?.*note: could not determine the original "
                         r"source location for (?P<file>[^:\n]+):(?P<line>\d+):\d+")


def _owner(g: Graph, segment: str, file: str, line: int) -> tuple[Node, str, int] | None:
    """The element of `segment` whose body (or helpers) holds `file`:`line` (the log
    names the file without its folder): the element, "body" or "helpers", and the
    line's number within that text (1: its first line that is not blank)."""
    for n in g.nodes:
        if n.segment != segment or not n.origin or Path(n.origin).name != Path(file).name:
            continue
        for part, start, text in (("body", n.body_line, n.body),
                                  ("helpers", n.helpers_line, n.helpers)):
            lines = text.split("\n")
            k = line - start
            if start and 0 <= k < len(lines) and lines[k].strip():
                blank = len(text) - len(text.lstrip("\n"))  # lines before its first
                return n, part, k - blank + 1
    return None


def _reason(log: list[str]) -> str:
    """The verifier's words for what it refused: the last line before its
    `processed N insns` summary, or libbpf's last line when there is none."""
    for k, line in enumerate(log):
        if line.startswith("processed ") or line.startswith("verification time"):
            for before in reversed(log[:k]):
                if before.strip() and not before.startswith(";") and ": R" not in before[:8]:
                    return before.strip()
    return next((x.strip() for x in reversed(log) if x.strip()), "no reason given")


def explain_rejection(g: Graph, segment: str, log_text: str, kept: Path | None = None) -> str:
    """An error a person can act on, from the loader's output `log_text`; `kept`: the
    file that keeps the verifier's whole log, named at the error's end."""
    full = f" (full log: {kept})" if kept else ""
    log = log_text.splitlines()
    reason = _reason(log)
    where = None
    last = ""  # the last source line the log names, whoever's
    for line in log:
        m = _SOURCE.match(line.strip())
        if m:
            last = f"{m['file']}:{m['line']}" + (f": `{m['text'].strip()}`"
                                                 if m["text"].strip() else "")
            found = _owner(g, segment, m["file"], int(m["line"]))
            if found:
                where = (found, m["text"].strip(), m["file"], int(m["line"]))
    if where is None:
        # (clang takes the lines' text and file from the program's file as it is on disk
        # when it compiles: a file changed since the program was loaded maps nowhere)
        return (f"segment `{segment}`: the kernel's verifier refused its XDP program: {reason}"
                + (f" (at {last})" if last else "") + "; no line of an element's body or "
                "helpers: if the program's file changed since it was loaded, run again, else "
                "please report it" + full)
    (node, part, k), text, _, line = where
    return (f"element `{node.name}` ({node.cls}), {part} line {k} ({node.origin}:{line}: "
            f"`{text}`): "
            f"the kernel's verifier refused segment `{segment}`'s XDP program: {reason}; "
            "bound every packet offset the line uses (a 16-bit value or a compare with a "
            "constant) and every table index (a mask: `i & 511` on a table of 512 "
            "entries; clang turns `i % N`, and a compare it proves redundant after it, "
            "into arithmetic the verifier cannot bound) or place the segment on another "
            "device" + full)


def explain_undeclared(g: Graph, segment: str, compiler_text: str) -> str | None:
    """An error a person can act on when clang's output `compiler_text` says element
    code on xdp calls a function with no eBPF form (none of the headers an XDP program
    sees declares it): the element, its line and the function; None for other errors."""
    why = {
        _UNDECLARED: lambda fn: (
            f"it calls `{fn}`, which has no eBPF form: code in XDP can call the kernel's "
            "BPF helpers and the offlow functions that have one "
            "(runtime/core/include/offlow/bpf.h); place the element on a nic or host "
            "segment"),
        _NO_BUILTIN: lambda fn: (
            f"it calls `{fn}` with a size not known at compile time: BPF has no `{fn}`, "
            "clang expands it into loads and stores only for a constant size; give it a "
            "constant size (or copy the bytes in a loop) or place the element on a nic or "
            "host segment"),
    }
    for pattern, says in why.items():
        for m in pattern.finditer(compiler_text):
            found = _owner(g, segment, m["file"], int(m["line"]))
            if found is None:
                continue
            node, part, k = found
            return (f"element `{node.name}` ({node.cls}), {part} line {k} ({node.origin}:"
                    f"{m['line']}): " + says(m["fn"]))
    return None
