"""Which shared arrays a C body only adds to: every use of the array's local is a
statement that adds to (or subtracts from) one of its elements and whose value nobody
reads: `t[i] += v;`, `t[i]--;`, `*t -= v;`, `__sync_fetch_and_add(&t[i], v);`,
`__atomic_add_fetch(&t[i], v, order);` and the like. An array every user only adds to
may be kept as one copy per CPU and summed when read (the xdp target's per-CPU array
maps: offlow/codegen/bpf.py); any other use (a read, a plain store, an address taken,
an add whose result is used, a local of the same name) keeps it one shared copy.

It also lists the arrays the body updates with a plain read-modify-write (`t[i] += v`,
`t[i]++`, `t[i] |= m`, in any place): two cores running such an update at once lose
one of them (offlow/races.py warns), where an add builtin does not. It follows the
body's local pointers into an array or a map's value (`uint64_t *p = &t[i];`, `e =
(struct ent *)(t + i);`, `n = ofl_map_lookup(t, &k);`, a copy of such a pointer) to
their updates (`*p += v`, `p[1]++`, `e->hits++`; a pointer's type may be a typedef
of one, the helpers' or the body's in scope), in the order the body runs: after both
arms of an `if` a pointer is one into the table when either arm left it so; one given
another value is no longer followed; a local of an inner block (or a `for`'s init)
hides an outer one of its name until the block ends. A pointer into a table (or the
table) given to a function the element's helpers define is followed into the function's
body (and the helpers it calls), once for each way its parameters point; one given
to a function pointer (a body's local, or a helper's parameter it calls) is listed as
a call not seen into.

Works on pycparser's tree of the body (cbody.py parses it); never on the text."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from offlow.ir.types import ADD_BUILTINS

_STEPS = ("++", "--", "p++", "p--")  # pycparser's ops of ++x, --x, x++, x--


@dataclass(frozen=True)
class TableUse:
    """`adds_only`: the table locals every use of which adds to an element; `other`:
    those used otherwise; `atomic_adds`: each add builtin the body calls, with the
    table local it adds to ("" for anything else); `plain_updates`: the table locals
    an element of which the body updates with a plain read-modify-write; `plain_via`:
    (table local, pointer local, helper) for each of those updates made through a
    pointer: a local of the body ("" helper: one it updates through or gives to a
    helper that does), or a helper function's parameter or local;
    `plain_at`: (table local, where, helper) for each of those updates: where as `place`
    says, the helper function it is written in ("" for the body); `unseen`: (table
    local, where and the function) for each pointer into a table given to a function
    whose body is not seen (called through a function pointer)."""

    adds_only: frozenset[str]
    other: frozenset[str]
    atomic_adds: frozenset[tuple[str, str]]
    plain_updates: frozenset[str] = frozenset()
    plain_via: frozenset[tuple[str, str, str]] = frozenset()
    plain_at: frozenset[tuple[str, str, str]] = frozenset()
    unseen: frozenset[tuple[str, str]] = frozenset()


def table_use(stmts: Sequence[c_ast.Node], tables: Iterable[str],
              helpers: Sequence[c_ast.Node] = (),
              place: Callable[[c_ast.Node], str] = lambda n: "") -> TableUse:
    """How the body's statements `stmts` use the shared arrays named `tables`; a pointer
    into one given to a function the element's `helpers` define is followed into it.
    `place(node)`: where a node is written, for `plain_at`."""
    funcs = {f.decl.name: f for f in helpers if isinstance(f, c_ast.FuncDef)}
    types = {t.name: t.type for t in helpers if isinstance(t, c_ast.Typedef)}
    w = _Uses(frozenset(tables), _Helpers(funcs, place, types))
    for s in stmts:
        w.statement(s)
    return TableUse(frozenset(w.added - w.other), frozenset(w.other), frozenset(w.atomics),
                    frozenset(w.plain), frozenset(w.via), frozenset(w.at),
                    frozenset(w.unseen))


@dataclass
class _Helpers:
    """The element's helper functions, by name, where a node is written, the types its
    helpers name (typedefs: name -> type), and the calls
    already followed: (function, its pointer parameters -> tables) -> the updates
    found there, as (table, where, helper), and the pointers they are made through, as
    (table, pointer, helper)."""

    funcs: Mapping[str, c_ast.FuncDef]
    place: Callable[[c_ast.Node], str]
    typedefs: Mapping[str, c_ast.Node]
    followed: dict[tuple[str, frozenset[tuple[str, str]]],
                   tuple[frozenset[tuple[str, str, str]], frozenset[tuple[str, str, str]]]] \
        = field(default_factory=dict)


class _Uses(c_ast.NodeVisitor):
    """Walks a body: statements (values discarded) through `statement`, expressions
    through `visit`; a table named anywhere but as an add's target is `other`."""

    def __init__(self, tables: frozenset[str], helpers: _Helpers, within: str = "") -> None:
        self.tables, self.helpers = tables, helpers
        self.within = within  # the helper function walked ("": the body)
        self.at: set[tuple[str, str, str]] = set()  # (table, where, helper) of plain updates
        self.unseen: set[tuple[str, str]] = set()  # (table, where `f`): calls not seen into
        self.added: set[str] = set()
        self.other: set[str] = set()
        self.atomics: set[tuple[str, str]] = set()
        self.plain: set[str] = set()
        self.via: set[tuple[str, str, str]] = set()  # (table, pointer, helper) of those
        self.pointers: set[str] = set()  # the body's locals declared as pointers
        self.typedefs: dict[str, c_ast.Node] = dict(helpers.typedefs)  # and those in scope
        self.params: frozenset[str] = frozenset()  # the helper's parameters (walked: a helper)
        self.into: dict[str, str] = {}  # pointer local -> the array it may point into
        # per block: each name a local of the block hides, as it was outside it
        # (whether a pointer local, the array it pointed into)
        self.hidden: list[dict[str, tuple[bool, str | None]]] = [{}]
        # (loop, pointers before it) -> pointers after it, for each loop walked
        self.walked: dict[tuple[int, frozenset[tuple[str, str]]], dict[str, str]] = {}

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
                self._update(node, t)
                self.visit(node.rvalue)
        elif isinstance(node, c_ast.UnaryOp) and node.op in _STEPS:
            t = self._element(node.expr)
            if t is not None:
                self._update(node, t)
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
        self._block(*(node.block_items or []))

    def _block(self, *stmts: c_ast.Node | None) -> None:
        """Statements in a scope of their own (its typedefs end with it too)."""
        self.hidden.append({})
        types = dict(self.typedefs)
        for s in stmts:
            self.statement(s)
        self._leave()
        self.typedefs = types

    def _leave(self) -> None:
        """The end of a scope: the outer locals its locals hid are as they were."""
        for name, (pointer, table) in self.hidden.pop().items():
            self.pointers.discard(name)
            self.into.pop(name, None)
            if pointer:
                self.pointers.add(name)
            if table is not None:
                self.into[name] = table

    def visit_If(self, node: c_ast.If) -> None:
        self.visit(node.cond)
        before = dict(self.into)
        self.statement(node.iftrue)
        after_true, self.into = self.into, before
        self.statement(node.iffalse)
        self.into = {**self.into, **after_true}  # (either arm's pointers)

    def visit_For(self, node: c_ast.For) -> None:
        self.hidden.append({})  # (its init's locals end with the loop)
        self.statement(node.init)
        self._loop(node, node.cond, node.stmt, node.next)
        self._leave()

    def visit_While(self, node: c_ast.While) -> None:
        self._loop(node, node.cond, node.stmt)

    def _loop(self, node: c_ast.Node, cond: c_ast.Node | None, *stmts: c_ast.Node | None) -> None:
        """A loop's body twice: a pointer set late in one turn is used early in the
        next; the pointers after it are those before it or after a turn. A loop met
        again with the same pointers is not walked again (what it records is recorded),
        so loops nested deep take time in proportion, not 2^depth."""
        key = (id(node), frozenset(self.into.items()))
        if key in self.walked:
            self.into = dict(self.walked[key])
            return
        before = dict(self.into)
        for _ in range(2):
            if cond is not None:
                self.visit(cond)
            for s in stmts:
                self.statement(s)
        self.into = {**self.into, **before}
        self.walked[key] = dict(self.into)

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
        if node.op == "=" and isinstance(node.lvalue, c_ast.ID):
            self._point(node.lvalue.name, node.rvalue)

    def visit_UnaryOp(self, node: c_ast.UnaryOp) -> None:
        if node.op in _STEPS:
            self._plain(node.expr)
        self.generic_visit(node)

    def _plain(self, lv: c_ast.Node) -> None:
        """Record a read-modify-write of `lv` when it is (a part of) a table's element,
        named through the table or through a pointer into it."""
        name, derefs = _base(lv)
        if name is None or not derefs:  # (`p++` moves the pointer, not the element)
            return
        if name in self.tables:
            self._update(lv, name)
        elif name in self.into:
            self._update(lv, self.into[name], name)

    def _update(self, node: c_ast.Node, table: str, pointer: str = "") -> None:
        """A plain read-modify-write of `table` at `node` (through `pointer`)."""
        self.plain.add(table)
        self.at.add((table, self.helpers.place(node), self.within))
        if pointer:
            self.via.add((table, pointer, self.within))

    def _point(self, name: str, value: c_ast.Node | None) -> None:
        """The pointer local `name` now holds `value`: follow it when that points into a
        table; forget it otherwise."""
        self.into.pop(name, None)
        if name in self.pointers and value is not None:
            table = self._points_into(value)
            if table is not None:
                self.into[name] = table

    def _points_into(self, e: c_ast.Node) -> str | None:
        """The table a pointer value `e` points into (`&t[i]`, `t + i`, `t`, `&p[1]`, a
        pointer into it, a map's value: `ofl_map_lookup(t, &k)`), else None."""
        if (isinstance(e, c_ast.FuncCall) and isinstance(e.name, c_ast.ID)
                and e.name.name == "ofl_map_lookup" and e.args is not None
                and isinstance(e.args.exprs[0], c_ast.ID) and e.args.exprs[0].name in self.tables):
            return e.args.exprs[0].name
        if isinstance(e, c_ast.Cast):
            return self._points_into(e.expr)
        if isinstance(e, c_ast.TernaryOp):
            return self._points_into(e.iftrue) or self._points_into(e.iffalse)
        if isinstance(e, c_ast.BinaryOp) and e.op in ("+", "-"):
            return self._points_into(e.left) or (
                self._points_into(e.right) if e.op == "+" else None)
        name: str | None = None
        if isinstance(e, c_ast.UnaryOp) and e.op == "&":
            name, _ = _base(e.expr)
        elif isinstance(e, c_ast.ID):  # the table itself, or a pointer into it
            name = e.name
        if name in self.tables:
            return name
        return self.into.get(name) if name is not None else None

    def visit_ID(self, node: c_ast.ID) -> None:
        if node.name in self.tables:
            self.other.add(node.name)

    def visit_Decl(self, node: c_ast.Decl) -> None:
        if node.name in self.tables:  # a local hiding the table: not followed
            self.other.add(node.name)
        self.generic_visit(node)
        if node.name is not None:
            self.hidden[-1].setdefault(node.name, (node.name in self.pointers,
                                                   self.into.get(node.name)))
            if _pointer(node.type, self.typedefs):
                self.pointers.add(node.name)
            else:
                self.pointers.discard(node.name)  # (an inner local of the same name)
            self._point(node.name, node.init)

    def visit_Typedef(self, node: c_ast.Typedef) -> None:
        self.typedefs[node.name] = node.type  # (a type the body names, to its block's end)
        self.generic_visit(node)

    def visit_FuncCall(self, node: c_ast.FuncCall) -> None:
        if isinstance(node.name, c_ast.ID) and node.name.name in ADD_BUILTINS:
            self.atomics.add((node.name.name, ""))  # (an add nothing proves per-CPU)
        self.generic_visit(node)
        f = self.helpers.funcs.get(node.name.name) if isinstance(node.name, c_ast.ID) else None
        if f is not None and node.args is not None:
            self._call(f, node.args.exprs)
        elif node.args is not None and (not isinstance(node.name, c_ast.ID)
                                        or node.name.name in self.pointers | self.params):
            # (a function pointer: a helper's parameter called is one, whatever its type
            # is spelled as)
            called = c_generator.CGenerator().visit(node.name)
            for a in node.args.exprs:
                table = self._points_into(a)
                if table is not None:
                    inside = f" in `{self.within}`" if self.within else ""
                    self.unseen.add((table, f"{self.helpers.place(node)}{inside} `{called}`"))

    def _call(self, f: c_ast.FuncDef, args: Sequence[c_ast.Node]) -> None:
        """A call of the helper `f`: its pointer parameters given a pointer into a table
        (or the table) are followed into its body, whose plain updates through them
        are this body's, told at the helper's line and through the argument given."""
        params = f.decl.type.args.params if f.decl.type.args is not None else []
        given: dict[str, tuple[str, str]] = {}  # parameter -> (table, argument's name)
        for p, a in zip(params, args, strict=False):
            table = self._points_into(a)
            if table is not None and isinstance(p, c_ast.Decl) and p.name \
                    and _pointer(p.type, self.helpers.typedefs):
                given[p.name] = (table, _base(a)[0] or "")
        if not given:
            return
        key = (f.decl.name, frozenset((p, t) for p, (t, _) in given.items()))
        if key not in self.helpers.followed:
            self.helpers.followed[key] = frozenset(), frozenset()  # (a call of itself)
            inner = _Uses(frozenset(), self.helpers, f.decl.name)
            inner.pointers = set(given)
            inner.params = frozenset(p.name for p in params
                                     if isinstance(p, c_ast.Decl) and p.name)
            inner.into = {p: t for p, (t, _) in given.items()}
            inner.statement(f.body)
            self.helpers.followed[key] = frozenset(inner.at), frozenset(inner.via)
            self.unseen |= inner.unseen
        passed = {t: a for t, a in given.values()}  # table -> the argument that gave it
        at, via = self.helpers.followed[key]
        self.via |= via  # (the helper's own pointers: named too, so each can be found)
        for table, where, helper in at:
            self.plain.add(table)
            self.at.add((table, where, helper))
            if passed.get(table) in self.into:  # (a pointer local of this body)
                self.via.add((table, passed[table], self.within))


def _pointer(t: c_ast.Node, typedefs: Mapping[str, c_ast.Node], depth: int = 0) -> bool:
    """Whether a declared type `t` is a pointer (`uint64_t *`, `void (*)(int)`), also
    through the `typedefs` in scope (`typedef uint64_t *ctr_p;`)."""
    if isinstance(t, c_ast.PtrDecl):
        return True
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType) \
            and len(t.type.names) == 1 and t.type.names[0] in typedefs and depth < 16:
        return _pointer(typedefs[t.type.names[0]], typedefs, depth + 1)
    return False


def _base(lv: c_ast.Node) -> tuple[str | None, int]:
    """The variable an lvalue is a part of and how many dereferences reach it:
    `t[i]` (t, 1), `p->n` (p, 1), `*(p + 1)` (p, 1), `t[i][j]` (t, 2), `p` (p, 0)."""
    derefs = 0
    while True:
        if isinstance(lv, c_ast.ID):
            return lv.name, derefs
        if isinstance(lv, c_ast.ArrayRef):
            lv, derefs = lv.name, derefs + 1
        elif isinstance(lv, c_ast.StructRef):
            lv, derefs = lv.name, derefs + (lv.type == "->")
        elif isinstance(lv, c_ast.UnaryOp) and lv.op == "*":
            lv, derefs = lv.expr, derefs + 1
        elif isinstance(lv, c_ast.Cast):
            lv = lv.expr
        elif isinstance(lv, c_ast.BinaryOp) and lv.op in ("+", "-"):
            lv = lv.left  # (pointer arithmetic: `*(p + i)`)
        else:
            return None, derefs
