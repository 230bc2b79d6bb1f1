"""Analyse one element's C body with pycparser: which per-packet state fields it reads,
writes and kills, which output ports it names, and whether it can fall through. A
batch body (Element.batch_body) names the state and packet of packet i as `states[i]`
and `pkts[i]` and decides per packet with EMIT_AT(i, port), DROP_AT(i),
DROP_WHY_AT(i, reason), CONSUME_AT(i) and FAIL_AT(i, text, ...).

The body is wrapped in a synthetic translation unit (a prelude of typedefs, the
element's helpers, then ``void __ofl_body(void) { <body> }``), run through the real C
preprocessor (comments, #define, #if: see cpp.py) and parsed with pycparser; line
markers make every position in a message the program file's line.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pycparser import c_ast, c_parser

from offlow.passes import cpp
from offlow.passes.cpp import CppError, preprocess
from offlow.passes.gnuc import GnuCParser
from offlow.passes.mapvalue import UNKNOWN, MapLocal, map_value_error
from offlow.passes.tableuse import table_use

_STD_TYPES = (
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
    "size_t", "ssize_t", "uintptr_t", "intptr_t",
)


class BodyError(Exception):
    """A user error in an element's C body; the message names element, line and fix."""


@dataclass(frozen=True)
class BodyInfo:
    reads: frozenset[str]
    writes: frozenset[str]
    kills: frozenset[str]
    emits: frozenset[str]
    drops: bool
    uses_pkt: bool
    may_fall_through: bool
    end_at: str = ""  # where its last statement is written (`prog.py:25`); "": no statement
    uses_whole_state: bool = False
    reads_ts: bool = False  # names pkt->ts_ns, or hands `pkt` itself to other code
    macros: tuple[str, ...] = ()  # macros the body #defines (and does not #undef)
    makes: frozenset[str] = frozenset()  # ports it sends packets it built on (MAKE)
    sends: bool = False  # SEND: it may send a packet on several ports (copies)
    fails: bool = False  # FAIL or FAIL_AT: it may fail its core
    adds_only: frozenset[str] = frozenset()  # shared arrays it only adds to (tableuse.py)
    table_other: frozenset[str] = frozenset()  # shared arrays it uses otherwise
    atomic_adds: frozenset[tuple[str, str]] = frozenset()  # (add builtin, array or "")
    plain_updates: frozenset[str] = frozenset()  # arrays it read-modify-writes (tableuse.py)
    plain_via: frozenset[tuple[str, str, str]] = frozenset()  # (table, pointer, helper) of
    # those updates made through a pointer (helper "": a local of the body)
    plain_at: frozenset[tuple[str, str, str]] = frozenset()  # (table, where, helper) of those
    unseen_calls: frozenset[tuple[str, str]] = frozenset()  # (table, where `f`): not seen into
    unseen_stores: frozenset[tuple[str, str]] = frozenset()  # (table, where `x`): not followed


def _hint(name: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(options), n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


class _Walker(c_ast.NodeVisitor):
    """Collects facts about one subtree; `line(coord)` maps to body-relative lines."""

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.emits: set[str] = set()
        self.makes: set[str] = set()
        self.drops = self.exits = self.uses_pkt = self.whole_state = self.jumps = False
        self.reads_ts = self.sends = self.fails = False

    def state_field(self, node: c_ast.StructRef) -> str | None:
        """The field name if `node` is `state->NAME` (a batch body's `states[i].NAME`),
        checked against the declared fields."""
        if not _member_of(node, *(("states", ".") if self.ctx.vector else ("state", "->"))):
            return None
        field = node.field.name
        if field not in self.ctx.fields:
            declared = ", ".join(self.ctx.fields) or "(none)"
            what = "states[i]." if self.ctx.vector else "state->"
            raise BodyError(
                f"{self.ctx.where(node)}: `{what}{field}` is not a per-packet state field; "
                f"declared fields: {declared}. Declare it in the element's `fields` or fix the "
                f"name{_hint(field, self.ctx.fields)}"
            )
        return field

    def visit_ID(self, node: c_ast.ID) -> None:
        pkt, state = ("pkts", "states") if self.ctx.vector else ("pkt", "state")
        if node.name == pkt:  # bare `pkt` (not `pkt->data`): code it goes to may read
            self.uses_pkt = self.reads_ts = True  # its timestamp too
        elif node.name == state:  # bare `state` (not `state->f`): may touch every field
            self.whole_state = True

    def visit_StructRef(self, node: c_ast.StructRef) -> None:
        field = self.state_field(node)
        if field is not None:
            self.reads.add(field)
            self._subscript(node)
        elif _member_of(node, *(("pkts", ".") if self.ctx.vector else ("pkt", "->"))):
            self.uses_pkt = True
            self.reads_ts = self.reads_ts or node.field.name == "ts_ns"
            self._subscript(node)
        else:
            self.visit(node.name)  # node.field is a member name, not a variable

    def _subscript(self, node: c_ast.StructRef) -> None:
        """The index of a batch body's `states[i]` or `pkts[i]` is an expression too."""
        if isinstance(node.name, c_ast.ArrayRef):
            self.visit(node.name.subscript)

    def _target(self, node: c_ast.Node, read_too: bool) -> None:
        """Visit an assigned lvalue: `state->f`, `state->f.x`, `state->f[i]` write f."""
        if isinstance(node, c_ast.StructRef):
            field = self.state_field(node)
            if field is not None:
                self.writes.add(field)
                if read_too:
                    self.reads.add(field)
                self._subscript(node)
            elif node.type == ".":
                self._target(node.name, read_too)
            else:
                self.visit_StructRef(node)  # pkt->member, or any other pointer's
        elif isinstance(node, c_ast.ArrayRef):
            self.visit(node.subscript)
            self._target(node.name, read_too)
        else:
            self.visit(node)

    def visit_Assignment(self, node: c_ast.Assignment) -> None:
        self._target(node.lvalue, read_too=node.op != "=")
        self.visit(node.rvalue)

    def visit_UnaryOp(self, node: c_ast.UnaryOp) -> None:
        if node.op in ("++", "--", "p++", "p--"):
            self._target(node.expr, read_too=True)
        elif node.op == "&" and _is_state_lvalue(node.expr, self.ctx.vector):
            self.whole_state = True
            self.visit(node.expr)
        else:
            self.visit(node.expr)

    def visit_FuncCall(self, node: c_ast.FuncCall) -> None:
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        args = node.args.exprs if node.args is not None else []
        if name in _PER_PACKET + _PER_INDEX:
            self._mode(node, name)
        if name in _PER_INDEX:
            self._per_index(node, name, args)
        elif name in ("DROP", "CONSUME"):
            if args:
                raise BodyError(f"{self.ctx.where(node)}: {name}() takes no arguments; "
                                f"write {name}()")
            self.drops = True  # either way the packet goes no further
        elif name == "DROP_WHY":
            self.reason(node, name, args[0] if len(args) == 1 else None)
        elif name == "FAIL":
            self._fail_text(node, name, args)
            self.drops = self.fails = True
        elif name in ("EMIT", "SEND"):
            if len(args) != 1 or not isinstance(args[0], c_ast.ID):
                raise BodyError(
                    f"{self.ctx.where(node)}: {name}() takes exactly one output port name, "
                    f"e.g. {name}({self.ctx.outputs[0] if self.ctx.outputs else 'out'}); "
                    f"outputs are: {', '.join(self.ctx.outputs) or '(none)'}"
                )
            self.emits.add(self.port(node, name, args[0].name))
            self.exits = self.exits or name == "EMIT"
            self.sends = self.sends or name == "SEND"
        elif name == "MAKE":
            if len(args) != 2 or not isinstance(args[0], c_ast.ID):
                raise BodyError(
                    f"{self.ctx.where(node)}: MAKE() takes an output port name and a packet "
                    f"(a struct ofl_pkt *), e.g. MAKE("
                    f"{self.ctx.outputs[0] if self.ctx.outputs else 'out'}, &piece); "
                    f"outputs are: {', '.join(self.ctx.outputs) or '(none)'}"
                )
            port = self.port(node, name, args[0].name)
            self.emits.add(port)
            self.makes.add(port)
            self.visit(args[1])
        else:
            self.generic_visit(node)

    def _mode(self, node: c_ast.Node, name: str) -> None:
        """Per-packet macros in a per-packet body, per-index ones in a batch body."""
        if self.ctx.vector and name in _PER_PACKET:
            instead = {"EMIT": "EMIT_AT(i, port)", "DROP": "DROP_AT(i)", "CONSUME":
                       "CONSUME_AT(i)", "DROP_WHY": "DROP_WHY_AT(i, reason)",
                       "FAIL": "FAIL_AT(i, text, ...)"}.get(name)
            how = (f"say which packet: {instead}" if instead else
                   f"it has no {name}(): give the element a per-packet body for that")
            raise BodyError(f"{self.ctx.where(node)}: {name}() is for a per-packet body; in a "
                            f"batch body {how}")
        if not self.ctx.vector and name in _PER_INDEX:
            raise BodyError(f"{self.ctx.where(node)}: {name}() is for a batch body "
                            f"(batch_body); a per-packet body writes {name[:-3]}(...)")

    def _per_index(self, node: c_ast.Node, name: str, args: list[c_ast.Node]) -> None:
        """EMIT_AT(i, port), DROP_AT(i), DROP_WHY_AT(i, reason), CONSUME_AT(i)."""
        usage = {"EMIT_AT": "the packet's index and an output port: EMIT_AT(i, out)",
                 "DROP_WHY_AT": "the packet's index and a drop reason: DROP_WHY_AT(i, why)",
                 "DROP_AT": "the packet's index: DROP_AT(i)",
                 "CONSUME_AT": "the packet's index: CONSUME_AT(i)",
                 "FAIL_AT": "the packet's index and a text: FAIL_AT(i, \"why %d\", x)"}[name]
        if name == "FAIL_AT":
            if len(args) < 2:
                raise BodyError(f"{self.ctx.where(node)}: FAIL_AT() takes {usage}")
            self.visit(args[0])
            self._fail_text(node, name, args[1:])
            self.drops = self.fails = True
            return
        if len(args) != (2 if name in ("EMIT_AT", "DROP_WHY_AT") else 1):
            raise BodyError(f"{self.ctx.where(node)}: {name}() takes {usage}")
        self.visit(args[0])
        if name == "EMIT_AT":
            if not isinstance(args[1], c_ast.ID):
                raise BodyError(f"{self.ctx.where(node)}: EMIT_AT() takes an output port name "
                                f"second; outputs are: {', '.join(self.ctx.outputs) or '(none)'}")
            self.emits.add(self.port(node, name, args[1].name))
        elif name == "DROP_WHY_AT":
            self.reason(node, name, args[1])
        else:
            self.drops = True

    def _fail_text(self, node: c_ast.Node, macro: str, args: list[c_ast.Node]) -> None:
        """FAIL's (FAIL_AT's) text: a string literal (printf's format), then its
        arguments."""
        if not args or not (isinstance(args[0], c_ast.Constant) and args[0].type == "string"):
            raise BodyError(f"{self.ctx.where(node)}: {macro}() takes a text first, a string "
                            f"in quotes (printf's format): {macro}("
                            f"{'i, ' if macro == 'FAIL_AT' else ''}\"no room for %u\", n)")
        for a in args[1:]:
            self.visit(a)

    def reason(self, node: c_ast.Node, macro: str, arg: c_ast.Node | None) -> None:
        """DROP_WHY's (DROP_WHY_AT's) reason, checked to be one of the element's."""
        why = arg.name if isinstance(arg, c_ast.ID) else None
        if why not in self.ctx.reasons:
            raise BodyError(
                f"{self.ctx.where(node)}: {macro}() takes one of the element's drop "
                f"reasons (its `drops`): {', '.join(self.ctx.reasons) or '(none declared)'}"
                f"{_hint(why or '', self.ctx.reasons)}")
        self.drops = True

    def port(self, node: c_ast.Node, macro: str, port: str) -> str:
        """`port`, checked to be one of the element's outputs."""
        if port not in self.ctx.outputs:
            raise BodyError(
                f"{self.ctx.where(node)}: {macro}(`{port}`): no output port `{port}`; "
                f"outputs are: {', '.join(self.ctx.outputs) or '(none)'}"
                f"{_hint(port, self.ctx.outputs)}"
            )
        return port

    def visit_Return(self, node: c_ast.Return) -> None:
        if node.expr is not None:
            raise BodyError(
                f"{self.ctx.where(node)}: use EMIT(port) or DROP() instead of `return value`"
            )
        self.exits = True

    def visit_Goto(self, node: c_ast.Goto) -> None:  # a jump may skip an assignment
        self.jumps = True


# The outcome macros of a per-packet body, and those of a batch body (per index).
_PER_PACKET = ("EMIT", "SEND", "DROP", "DROP_WHY", "CONSUME", "MAKE", "FAIL")
_PER_INDEX = ("EMIT_AT", "DROP_AT", "DROP_WHY_AT", "CONSUME_AT", "FAIL_AT")


def _member_of(node: c_ast.StructRef, name: str, op: str) -> bool:
    """True for `name->member` (op "->") or, for a vector, `name[i].member` (op ".")."""
    if node.type != op:
        return False
    base = node.name.name if op == "." and isinstance(node.name, c_ast.ArrayRef) else node.name
    return isinstance(base, c_ast.ID) and base.name == name


def _is_state_lvalue(node: c_ast.Node, vector: bool = False) -> bool:
    """True for `state`, `state->f`, `state->f.x`, `state->f[i]` and the like (a batch
    body's `states[i]`, `states[i].f`...)."""
    while isinstance(node, c_ast.StructRef | c_ast.ArrayRef):
        node = node.name
    return isinstance(node, c_ast.ID) and node.name == ("states" if vector else "state")


@dataclass(frozen=True)
class Site:
    """Where a C string is written: a file and the line its first line is on (line 0:
    unknown, a string made at run time; messages then count lines within it)."""

    file: str = ""
    line: int = 0


_END = "<end of the body>"  # the file the line markers give the closing brace we add
_OPEN = "void __ofl_body(void) {"


@dataclass
class _Context:
    element: str
    outputs: Sequence[str]
    fields: Sequence[str]
    reasons: Sequence[str] = ()
    vector: bool = False  # a batch body

    def where(self, node: c_ast.Node | None) -> str:
        coord = getattr(node, "coord", None)
        return _place(self.element, getattr(coord, "file", "") or "",
                      getattr(coord, "line", None) or 1)

    @staticmethod
    def line(node: c_ast.Node | None) -> str:
        """Where `node` is written: `prog.py:25`, or `body line 3` for a body made at
        run time."""
        coord = getattr(node, "coord", None)
        return _line(getattr(coord, "file", "") or "", getattr(coord, "line", None) or 1)


def _line(file: str, line: int) -> str:
    for what in ("body", "batch body", "helpers"):
        if file.startswith(f"<{what} of "):
            return f"{what} line {line}"
    return f"{file}:{line}"


def _place(element: str, file: str, line: int) -> str:
    """`prog.py:25: element `x`` (the body's file and line), or `element `x`, body line
    3` for a body made at run time."""
    at = _line(file, line)
    return f"{at}: element `{element}`" if ":" in at else f"element `{element}`, {at}"


def _marker(site: Site, what: str, element: str) -> str:
    """A #line directive for a body or helpers string at `site`."""
    if site.file and site.line:
        return f'#line {site.line} "{site.file}"'
    return f'#line 1 "<{what} of {element}>"'


def _ends_flow(stmt: c_ast.Node | None) -> bool:
    """Structurally, does `stmt` always end in EMIT(...), DROP(), CONSUME() or FAIL()?"""
    if isinstance(stmt, c_ast.FuncCall) and isinstance(stmt.name, c_ast.ID):
        return stmt.name.name in ("EMIT", "DROP", "DROP_WHY", "CONSUME", "FAIL")
    if isinstance(stmt, c_ast.Compound):
        return bool(stmt.block_items) and _ends_flow(stmt.block_items[-1])
    if isinstance(stmt, c_ast.If):
        return _ends_flow(stmt.iftrue) and _ends_flow(stmt.iffalse)
    return False


def _parse(body: str, element: str, typedefs: Iterable[str], site: Site, helpers: str,
           helpers_site: Site, what: str, cpp_cmd: tuple[str, ...]
           ) -> tuple[list[c_ast.Node], tuple[str, ...], list[c_ast.Node]]:
    """The body's statements, parsed after the real preprocessor, its macros and what
    its helpers define (types, structs, functions)."""
    names = [*_STD_TYPES, *typedefs, UNKNOWN]
    code = ("typedef _Bool bool;\n" + "".join(f"typedef int {n};\n" for n in names)
            + "".join(f"#define {t}(x) {UNKNOWN}\n" for t in ("__typeof__", "__typeof",
                                                               "typeof")))
    if helpers:
        code += _marker(helpers_site, "helpers", element) + "\n" + helpers + "\n"
    code += f"{_OPEN}\n{_marker(site, what, element)}\n{body}\n#line 1 \"{_END}\"\n}}\n"
    try:
        pre = preprocess(code, _OPEN, cpp_cmd)
    except CppError as err:
        raise BodyError(f"element `{element}`: {err}") from None
    parser = GnuCParser()
    try:
        ast = parser.parse(pre.text, filename="<offlow>")
    except c_parser.ParseError as err:
        raise BodyError(_parse_error(str(err), parser, element)) from None
    func = ast.ext[-1]
    helper_defs = [x for x in ast.ext[:-1]
                   if not (isinstance(x, c_ast.Typedef) and x.name in {"bool", *names})]
    return list(func.body.block_items or []), pre.macros, helper_defs


def _parse_error(msg: str, parser: c_parser.CParser, element: str) -> str:
    """A parse error as `FILE:LINE: element `x`: C does not parse: DETAIL`."""
    head, _, detail = msg.partition(": ")
    file, _, rest = head.partition(":")
    line = rest.split(":")[0]
    if not line.isdigit():  # some pycparser errors carry no position: the next token's
        tok = getattr(getattr(parser, "_tokens", None), "peek", lambda: None)()
        line = str(getattr(tok, "lineno", "") or "")
    if file == _END or not line:  # failed on the closing brace we added
        return (f"element `{element}`: C body does not parse: unexpected end of the body "
                "(missing `;` or `}`?)")
    # (pycparser's `before: TOKEN`: the token it stopped at, often after a missing `;`)
    hint = "; check the statement before it" if detail.startswith("before:") else ""
    return f"{_place(element, file, int(line))}: C does not parse: {detail or msg}{hint}"


def analyze_body(
    body: str, *, element: str, outputs: Sequence[str], fields: Mapping[str, str],
    names: Iterable[str] = (), typedefs: Iterable[str] = (), site: Site = Site(),
    helpers: str = "", helpers_site: Site = Site(), reasons: Sequence[str] = (),
    vector: bool = False, tables: Sequence[str] = (), maps: Mapping[str, MapLocal] | None = None,
) -> BodyInfo:
    """Analyse one element body, written at `site`, after its `helpers` (file-scope C);
    `reasons` are its drop reasons (DROP_WHY). `names` (parameters, tables) are plain
    identifiers in scope; they need no declaration for parsing and are accepted for the
    caller's record. `vector`: a batch body (its fields are read and written in loops,
    so none is killed). `tables`: the locals of its shared arrays (which of them it
    only adds to: tableuse.py); `maps`: its shared maps by local name (the type it takes
    each one's values as: mapvalue.py).

    The result is a function of these arguments and the preprocessor's command line
    only, so a body analysed before in this process with the same ones is not parsed
    again (every build of a program analyses each of its bodies: a test or tool building
    the same elements again paid ~35 ms of parsing a body each time); a refusal
    (BodyError) is raised each time."""
    return _analyze(body, element, tuple(outputs), tuple(fields.items()), tuple(names),
                    tuple(typedefs), site, helpers, helpers_site, tuple(reasons), vector,
                    tuple(tables), tuple((maps or {}).items()), cpp.command())


@functools.lru_cache(maxsize=1024)
def _analyze(body: str, element: str, outputs: tuple[str, ...],
             field_types: tuple[tuple[str, str], ...], names: tuple[str, ...],
             typedefs: tuple[str, ...], site: Site, helpers: str, helpers_site: Site,
             reasons: tuple[str, ...], vector: bool, tables: tuple[str, ...],
             map_items: tuple[tuple[str, MapLocal], ...], cpp_cmd: tuple[str, ...]
             ) -> BodyInfo:
    """analyze_body, its arguments hashable (kept per process: see there)."""
    fields, maps = dict(field_types), dict(map_items)
    stmts, macros, helper_defs = _parse(body, element, typedefs, site, helpers, helpers_site,
                                        "batch body" if vector else "body", cpp_cmd)
    ctx = _Context(element, list(outputs), list(fields), list(reasons), vector)
    wrong = map_value_error(stmts, maps, helper_defs, ctx.where, fields, vector)
    if wrong is not None:
        raise BodyError(wrong)
    whole = _Walker(ctx)
    kills: set[str] = set()
    read_before: set[str] = set()
    kills_possible = True  # False once an earlier statement may EMIT/return/goto
    for stmt in stmts:
        w = _Walker(ctx)
        w.visit(stmt)
        lv = stmt.lvalue if isinstance(stmt, c_ast.Assignment) and stmt.op == "=" else None
        field = w.state_field(lv) if kills_possible and isinstance(lv, c_ast.StructRef) else None
        if field and not w.whole_state and field not in w.reads | read_before:
            kills.add(field)
        read_before |= set(fields) if w.whole_state else w.reads
        kills_possible = kills_possible and not (w.exits or w.jumps)
        whole.visit(stmt)
    use = table_use(stmts, tables, helper_defs, ctx.line)
    if whole.whole_state:
        whole.reads |= set(fields)
        whole.writes |= set(fields)
    return BodyInfo(
        reads=frozenset(whole.reads),
        writes=frozenset(whole.writes),
        kills=frozenset() if whole.jumps or vector else frozenset(kills),
        emits=frozenset(whole.emits),
        drops=whole.drops,
        uses_pkt=whole.uses_pkt,
        may_fall_through=not stmts or not _ends_flow(stmts[-1]),
        end_at=ctx.line(stmts[-1]) if stmts else "",
        uses_whole_state=whole.whole_state,
        reads_ts=whole.reads_ts,
        macros=macros,
        makes=frozenset(whole.makes),
        sends=whole.sends,
        fails=whole.fails,
        adds_only=use.adds_only,
        table_other=use.other,
        atomic_adds=use.atomic_adds,
        plain_updates=use.plain_updates,
        plain_via=use.plain_via,
        plain_at=use.plain_at,
        unseen_calls=use.unseen,
        unseen_stores=use.stored,
    )
