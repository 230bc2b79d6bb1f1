"""Which shared arrays a C body only adds to: every use of the array's local is a
statement that adds to (or subtracts from) one of its elements and whose value nobody
reads: `t[i] += v;`, `t[i]--;`, `*t -= v;`, `__sync_fetch_and_add(&t[i], v);`,
`__atomic_add_fetch(&t[i], v, order);` and the like. An array every user only adds to
may be kept as one copy per CPU and summed when read (the xdp target's per-CPU array
maps: offlow/codegen/bpf.py); any other use (a read, a plain store, an address taken,
an add whose result is used, a local of the same name) keeps it one shared copy.

It also lists the arrays the body updates with a plain read-modify-write (`t[i] += v`,
`t[i]++`, `t[i] |= m`, in any place): two cores running such an update at once lose
one of them (offlow/races.py warns), where an add builtin does not.

Works on pycparser's tree of the body (cbody.py parses it); never on the text."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pycparser import c_ast

from offlow.ir.types import ADD_BUILTINS

_STEPS = ("++", "--", "p++", "p--")  # pycparser's ops of ++x, --x, x++, x--


@dataclass(frozen=True)
class TableUse:
    """`adds_only`: the table locals every use of which adds to an element; `other`:
    those used otherwise; `atomic_adds`: each add builtin the body calls, with the
    table local it adds to ("" for anything else); `plain_updates`: the table locals
    an element of which the body updates with a plain read-modify-write."""

    adds_only: frozenset[str]
    other: frozenset[str]
    atomic_adds: frozenset[tuple[str, str]]
    plain_updates: frozenset[str] = frozenset()


def table_use(stmts: Sequence[c_ast.Node], tables: Iterable[str]) -> TableUse:
    """How the body's statements `stmts` use the shared arrays named `tables`."""
    w = _Uses(frozenset(tables))
    for s in stmts:
        w.statement(s)
    return TableUse(frozenset(w.added - w.other), frozenset(w.other), frozenset(w.atomics),
                    frozenset(w.plain))


class _Uses(c_ast.NodeVisitor):
    """Walks a body: statements (values discarded) through `statement`, expressions
    through `visit`; a table named anywhere but as an add's target is `other`."""

    def __init__(self, tables: frozenset[str]) -> None:
        self.tables = tables
        self.added: set[str] = set()
        self.other: set[str] = set()
        self.atomics: set[tuple[str, str]] = set()
        self.plain: set[str] = set()

    def statement(self, node: c_ast.Node | None) -> None:
        """A node in a place where its value is discarded."""
        if node is None or self._add(node):
            return
        if isinstance(node, c_ast.ExprList):  # `a += 1, b += 1;`
            for x in node.exprs:
                self.statement(x)
        else:
            self.visit(node)

    def _element(self, lv: c_ast.Node) -> str | None:
        """The table whose element `lv` is (`t[i]`, `*t`), its index visited; else None."""
        if (isinstance(lv, c_ast.ArrayRef) and isinstance(lv.name, c_ast.ID)
                and lv.name.name in self.tables):
            self.visit(lv.subscript)
            return lv.name.name
        if (isinstance(lv, c_ast.UnaryOp) and lv.op == "*" and isinstance(lv.expr, c_ast.ID)
                and lv.expr.name in self.tables):
            return lv.expr.name
        return None

    def _add(self, node: c_ast.Node) -> bool:
        """Record `node` when it adds to a table's element; False when it does not."""
        t: str | None = None
        if isinstance(node, c_ast.Assignment) and node.op in ("+=", "-="):
            t = self._element(node.lvalue)
            if t is not None:
                self.plain.add(t)
                self.visit(node.rvalue)
        elif isinstance(node, c_ast.UnaryOp) and node.op in _STEPS:
            t = self._element(node.expr)
            if t is not None:
                self.plain.add(t)
        elif (isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID)
              and node.name.name in ADD_BUILTINS and node.args is not None
              and len(node.args.exprs) >= 2):
            first = node.args.exprs[0]
            if isinstance(first, c_ast.UnaryOp) and first.op == "&":
                t = self._element(first.expr)
            if t is not None:
                self.atomics.add((node.name.name, t))
                for x in node.args.exprs[1:]:
                    self.visit(x)
        if t is None:
            return False
        self.added.add(t)
        return True

    # Statements: where a child's value is discarded.
    def visit_Compound(self, node: c_ast.Compound) -> None:
        for s in node.block_items or []:
            self.statement(s)

    def visit_If(self, node: c_ast.If) -> None:
        self.visit(node.cond)
        self.statement(node.iftrue)
        self.statement(node.iffalse)

    def visit_For(self, node: c_ast.For) -> None:
        self.statement(node.init)
        if node.cond is not None:
            self.visit(node.cond)
        self.statement(node.next)
        self.statement(node.stmt)

    def visit_While(self, node: c_ast.While) -> None:
        self.visit(node.cond)
        self.statement(node.stmt)

    visit_DoWhile = visit_While
    visit_Switch = visit_While

    def visit_Case(self, node: c_ast.Case) -> None:
        self.visit(node.expr)
        for s in node.stmts or []:
            self.statement(s)

    def visit_Default(self, node: c_ast.Default) -> None:
        for s in node.stmts or []:
            self.statement(s)

    def visit_Label(self, node: c_ast.Label) -> None:
        self.statement(node.stmt)

    # Expressions: a table named here is used otherwise than added to.
    def visit_Assignment(self, node: c_ast.Assignment) -> None:
        if node.op != "=":
            self._plain(node.lvalue)
        self.generic_visit(node)

    def visit_UnaryOp(self, node: c_ast.UnaryOp) -> None:
        if node.op in _STEPS:
            self._plain(node.expr)
        self.generic_visit(node)

    def _plain(self, lv: c_ast.Node) -> None:
        """Record a read-modify-write of `lv` when it is a table's element."""
        if isinstance(lv, c_ast.ArrayRef) and isinstance(lv.name, c_ast.ID):
            name = lv.name.name
        elif isinstance(lv, c_ast.UnaryOp) and lv.op == "*" and isinstance(lv.expr, c_ast.ID):
            name = lv.expr.name
        else:
            return
        if name in self.tables:
            self.plain.add(name)

    def visit_ID(self, node: c_ast.ID) -> None:
        if node.name in self.tables:
            self.other.add(node.name)

    def visit_Decl(self, node: c_ast.Decl) -> None:
        if node.name in self.tables:  # a local hiding the table: not followed
            self.other.add(node.name)
        self.generic_visit(node)

    def visit_FuncCall(self, node: c_ast.FuncCall) -> None:
        if isinstance(node.name, c_ast.ID) and node.name.name in ADD_BUILTINS:
            self.atomics.add((node.name.name, ""))  # (an add nothing proves per-CPU)
        self.generic_visit(node)
