"""Which shared arrays a C body only adds to: every use of the array's local is a
statement that adds to (or subtracts from) one of its elements and whose value nobody
reads: `t[i] += v;`, `t[i]--;`, `*t -= v;`, `__sync_fetch_and_add(&t[i], v);`,
`__atomic_add_fetch(&t[i], v, order);` and the like. An array every user only adds to
may be kept as one copy per CPU and summed when read (the xdp target's per-CPU array
maps: offlow/codegen/bpf.py); any other use (a read, a plain store, an address taken,
also one kept in a struct, an array of pointers or given to a helper that returns it,
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
hides an outer one of its name until the block ends. Such a pointer may also be kept
in a member of a local struct (`struct cur c = { .p = &t[i] };`, `c.e = ...;`, a copy
`d = c`: `c.p[0]++`, `c.e->hits++`) or an element of a local array of pointers
(`uint64_t *ps[2] = { &t[a], &t[b] };`: `(*ps[k])++`, `ps[0][1] += 2`; an element
given by a variable index may be any of them, and stays one into the table until the
array ends), or be what a helper function returns (`return &t[i & 1023];`, a map
lookup's result it returns: `*slot(t, h) += 1`, `p = slot(t, h); (*p)++`). A pointer
into a table (or the table, a struct or array of the body that holds one, by value or
by address) given to a function the element's helpers define is followed into the
function's body (and the helpers it calls), once for each way its parameters point;
one given to a function pointer (a body's local, or a helper's parameter it calls) is
listed as a call not seen into. One kept where the walk cannot follow it (a global, a
state field, memory reached through a pointer, a helper's parameter's target, or a
local pointer to a struct or array of the body that holds one, `cp = &c`) is listed
as a store not followed.

Works on pycparser's tree of the body (cbody.py parses it); never on the text."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pycparser import c_ast, c_generator

from offlow.ir.types import ADD_BUILTINS

_STEPS = ("++", "--", "p++", "p--")  # pycparser's ops of ++x, --x, x++, x--

# Where a pointer may be kept: a local's name, then its parts: `.f` a member, `*` what a
# pointer points at (`p->f` is `*`, `.f`), `[2]` an element, `[?]` one of a variable
# index (any of them).
Path = tuple[str, ...]
_DEEPEST = 8  # parts a path may have (a helper given `&p` of its own `p` again ends)


@dataclass(frozen=True)
class TableUse:
    """`adds_only`: the table locals every use of which adds to an element; `other`:
    those used otherwise; `atomic_adds`: each add builtin the body calls, with the
    table local it adds to ("" for anything else); `plain_updates`: the table locals
    an element of which the body updates with a plain read-modify-write; `plain_via`:
    (table local, pointer, helper) for each of those updates made through a pointer:
    a local of the body or the C that gives it (`c.p`, `ps[k]`, `slot(t, h)`; ""
    helper: one it updates through or gives to a helper that does), or a helper
    function's parameter or local;
    `plain_at`: (table local, where, helper) for each of those updates: where as `place`
    says, the helper function it is written in ("" for the body); `unseen`: (table
    local, where and the function) for each pointer into a table given to a function
    whose body is not seen (called through a function pointer); `stored`: (table
    local, where and what it is stored in) for each pointer into a table kept where
    the walk cannot follow it."""

    adds_only: frozenset[str]
    other: frozenset[str]
    atomic_adds: frozenset[tuple[str, str]]
    plain_updates: frozenset[str] = frozenset()
    plain_via: frozenset[tuple[str, str, str]] = frozenset()
    plain_at: frozenset[tuple[str, str, str]] = frozenset()
    unseen: frozenset[tuple[str, str]] = frozenset()
    stored: frozenset[tuple[str, str]] = frozenset()


def table_use(stmts: Sequence[c_ast.Node], tables: Iterable[str],
              helpers: Sequence[c_ast.Node] = (),
              place: Callable[[c_ast.Node], str] = lambda n: "") -> TableUse:
    """How the body's statements `stmts` use the shared arrays named `tables`; a pointer
    into one given to a function the element's `helpers` define is followed into it.
    `place(node)`: where a node is written, for `plain_at`."""
    funcs = {f.decl.name: f for f in helpers if isinstance(f, c_ast.FuncDef)}
    types = {t.name: t.type for t in helpers if isinstance(t, c_ast.Typedef)}
    structs: dict[str, list[c_ast.Decl]] = {}
    for h in helpers:
        if not isinstance(h, c_ast.FuncDef):
            _Structs(structs).visit(h)
    w = _Uses(frozenset(tables), _Helpers(funcs, place, types, structs))
    for s in stmts:
        w.statement(s)
    return TableUse(frozenset(w.added - w.other), frozenset(w.other), frozenset(w.atomics),
                    frozenset(w.plain), frozenset(w.via), frozenset(w.at),
                    frozenset(w.unseen), frozenset(w.stored))


@dataclass(frozen=True)
class _Found:
    """What a helper's body does with the pointers it is given: its plain updates
    (table, where, helper), the pointers they are made through (table, pointer,
    helper), the tables a pointer it returns points into, its calls not seen into and
    its stores not followed (table, where)."""

    at: frozenset[tuple[str, str, str]] = frozenset()
    via: frozenset[tuple[str, str, str]] = frozenset()
    returns: frozenset[str] = frozenset()
    unseen: frozenset[tuple[str, str]] = frozenset()
    stored: frozenset[tuple[str, str]] = frozenset()


@dataclass
class _Helpers:
    """The element's helper functions, by name, where a node is written, the types its
    helpers name (typedefs: name -> type), the members of the structs they define (tag
    -> member declarations), and the calls already followed: (function, where its
    parameters point) -> what was found there."""

    funcs: Mapping[str, c_ast.FuncDef]
    place: Callable[[c_ast.Node], str]
    typedefs: Mapping[str, c_ast.Node]
    structs: Mapping[str, list[c_ast.Decl]] = field(default_factory=dict)
    followed: dict[tuple[str, frozenset[tuple[Path, str]]], _Found] = field(default_factory=dict)


class _Structs(c_ast.NodeVisitor):
    """Records the members of each struct (or union) defined with a tag in `into`."""

    def __init__(self, into: dict[str, list[c_ast.Decl]]) -> None:
        self.into = into

    def visit_Struct(self, node: c_ast.Struct) -> None:
        if node.name and node.decls is not None:
            self.into[node.name] = list(node.decls)
        self.generic_visit(node)

    visit_Union = visit_Struct


class _Uses(c_ast.NodeVisitor):
    """Walks a body: statements (values discarded) through `statement`, expressions
    through `visit`; a table named anywhere but as an add's target is `other`."""

    def __init__(self, tables: frozenset[str], helpers: _Helpers, within: str = "") -> None:
        self.tables, self.helpers = tables, helpers
        self.within = within  # the helper function walked ("": the body)
        self.at: set[tuple[str, str, str]] = set()  # (table, where, helper) of plain updates
        self.unseen: set[tuple[str, str]] = set()  # (table, where `f`): calls not seen into
        self.stored: set[tuple[str, str]] = set()  # (table, where `x`): stores not followed
        self.returns: set[str] = set()  # tables a pointer the helper returns points into
        self.added: set[str] = set()
        self.other: set[str] = set()
        self.atomics: set[tuple[str, str]] = set()
        self.plain: set[str] = set()
        self.via: set[tuple[str, str, str]] = set()  # (table, pointer, helper) of those
        self.locals: set[str] = set()  # the body's locals (a helper's: and its parameters)
        self.pointers: set[str] = set()  # those declared as pointers
        self.arrays: dict[str, int] = {}  # those declared as arrays (or given one): length,
        # 0 when not known
        self.typedefs: dict[str, c_ast.Node] = dict(helpers.typedefs)  # and those in scope
        self.structs: dict[str, list[c_ast.Decl]] = dict(helpers.structs)
        self.params: frozenset[str] = frozenset()  # the helper's parameters (walked: a helper)
        self.into: dict[Path, str] = {}  # where a pointer is kept -> the array it may point into
        # per block: each name a local of the block hides, as it was outside it (whether
        # a local, a pointer, an array, and where it and its parts pointed)
        self.hidden: list[dict[str, tuple[bool, bool, int | None, dict[Path, str]]]] = [{}]
        # (loop, pointers before it) -> pointers after it, for each loop walked
        self.walked: dict[tuple[int, frozenset[tuple[Path, str]]], dict[Path, str]] = {}

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
        for name, (local, pointer, length, paths) in self.hidden.pop().items():
            self._forget((name,))
            for names, was in ((self.locals, local), (self.pointers, pointer)):
                names.discard(name)
                if was:
                    names.add(name)
            self.arrays.pop(name, None)
            if length is not None:
                self.arrays[name] = length
            self.into.update(paths)

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

    def visit_Return(self, node: c_ast.Return) -> None:
        self.generic_visit(node)
        if self.within and node.expr is not None:  # (a helper's: its caller's value)
            table = self._points_into(node.expr)
            if table is not None:
                self.returns.add(table)

    # Expressions: a table named here is used otherwise than added to.
    def visit_Assignment(self, node: c_ast.Assignment) -> None:
        if node.op != "=":
            self._plain(node.lvalue)
        self.generic_visit(node)
        if node.op == "=":
            self._store(node.lvalue, node.rvalue, node)

    def visit_UnaryOp(self, node: c_ast.UnaryOp) -> None:
        if node.op in _STEPS:
            self._plain(node.expr)
        self.generic_visit(node)

    def _plain(self, lv: c_ast.Node) -> None:
        """Record a read-modify-write of `lv` when it is (a part of) a table's element,
        named through the table or through a pointer into it."""
        written = self._written(lv)
        if written is not None:
            self._update(lv, *written)

    def _written(self, lv: c_ast.Node) -> tuple[str, str] | None:
        """The table the object `lv` is (a part of) an element of, and the pointer it is
        reached through ("": the table itself), else None: the pointer its outermost
        `*`, `[]` or `->` goes through (`*slot(t, h)`, `c.p[0]`, `(*ps[k])`), else the
        variable it is a part of (`e->arr[1]`: `e`)."""
        e = lv
        while isinstance(e, c_ast.Cast) or (isinstance(e, c_ast.StructRef) and e.type == "."):
            e = e.expr if isinstance(e, c_ast.Cast) else e.name
        through: c_ast.Node | None = None
        if isinstance(e, (c_ast.ArrayRef, c_ast.StructRef)):
            through = e.name
        elif isinstance(e, c_ast.UnaryOp) and e.op == "*":
            through = e.expr
        if through is not None:
            table = self._points_into(through)
            if table is not None:
                return table, self._pointer_text(through)
        name, derefs = _base(lv)
        if name is None or not derefs:  # (`p++` moves the pointer, not the element)
            return None
        if name in self.tables:
            return name, ""
        table = self.into.get((name,))
        return (table, name) if table is not None else None

    def _pointer_text(self, e: c_ast.Node) -> str:
        """How the body names a pointer into a table it updates through: "" for the
        table itself (`t`, `t + i`, `&t[i]`), a local's name, else its C (`c.p`)."""
        while True:
            if isinstance(e, c_ast.Cast):
                e = e.expr
            elif isinstance(e, c_ast.BinaryOp) and e.op in ("+", "-"):
                e = e.left if self._points_into(e.left) is not None else e.right
            else:
                break
        if isinstance(e, c_ast.ID):
            return "" if e.name in self.tables else e.name
        if isinstance(e, c_ast.UnaryOp) and e.op == "&":
            return ""
        return str(c_generator.CGenerator().visit(e))

    def _update(self, node: c_ast.Node, table: str, pointer: str = "") -> None:
        """A plain read-modify-write of `table` at `node` (through `pointer`)."""
        self.plain.add(table)
        self.at.add((table, self.helpers.place(node), self.within))
        if pointer:
            self.via.add((table, pointer, self.within))

    # Where pointers are kept.
    def _key(self, e: c_ast.Node) -> Path | None:
        """Where `e` is kept, as a path from a variable (`c.p`: c, .p; `ps[1]`: ps, [1];
        `q->f`: q, *, .f), else None (an element of what is not an array of the body)."""
        if isinstance(e, c_ast.ID):
            return (e.name,)
        if isinstance(e, c_ast.StructRef):
            base = self._key(e.name)
            if base is None:
                return None
            return base + (("*",) if e.type == "->" else ()) + (f".{e.field.name}",)
        if isinstance(e, c_ast.UnaryOp) and e.op == "*":
            base = self._key(e.expr)
            return None if base is None else base + ("*",)
        if isinstance(e, c_ast.ArrayRef):
            base = self._key(e.name)
            if base is None or not self._is_array(base):
                return None
            return base + (_index(e.subscript),)
        return None

    def _is_array(self, path: Path) -> bool:
        """Whether `path` names an array the walk keeps pointers in: a local array (or a
        helper's parameter given one), or one of its elements' array member given so."""
        return (len(path) == 1 and path[0] in self.arrays) or any(
            len(k) > len(path) and k[len(path)].startswith("[") and _within(k, path)
            for k in self.into)

    def _followed(self, path: Path) -> bool:
        """Whether a store to `path` is one the walk follows: a local of the body (its
        member or element), a helper's parameter or local; not a global, not memory
        reached through a pointer, not what a helper's parameter holds (the caller's)."""
        return (path[0] in self.locals and "*" not in path
                and (len(path) == 1 or path[0] not in self.params))

    def _get(self, path: Path) -> str | None:
        """The table a pointer kept at `path` may point into (a variable index: any
        element), else None."""
        tables = sorted(t for k, t in self.into.items() if len(k) == len(path)
                        and _within(k, path))
        return tables[0] if tables else None

    def _contents(self, e: c_ast.Node) -> Iterator[tuple[Path, str]]:
        """The pointers into a table that the memory `e` gives holds, as (path from
        it, table): a struct or array of the body by value or address (`c`, `&c`,
        `ps`), the address of a pointer local (`&p`)."""
        while isinstance(e, c_ast.Cast):
            e = e.expr
        by_address = isinstance(e, c_ast.UnaryOp) and e.op == "&"
        key = self._key(e.expr if isinstance(e, c_ast.UnaryOp) and by_address else e)
        if key is None:
            return
        for k, t in sorted(self.into.items()):
            if len(k) >= len(key) + (not by_address) and _within(k[:len(key)], key) \
                    and len(k) - len(key) < _DEEPEST:
                yield (("*",) if by_address else ()) + k[len(key):], t

    def _forget(self, path: Path) -> None:
        """Nothing kept at `path` (or its parts) points into a table any more."""
        for k in [k for k in self.into if k[:len(path)] == path]:
            del self.into[k]

    def _store(self, lv: c_ast.Node, value: c_ast.Node | None, node: c_ast.Node,
               name: str = "") -> None:
        """`lv` (or the local declared `name`) now holds `value`: follow what it points
        into, where the walk follows such a store; forget what it held before (not
        for an element of a variable index: that may be another); else list a pointer
        into a table kept there as a store not followed."""
        what = name or str(c_generator.CGenerator().visit(lv))
        key = (name,) if name else self._key(lv)
        if key is None or not self._followed(key):
            self._lost(value, node, what)
            return
        if "[?]" not in key:
            self._forget(key)
        if isinstance(value, c_ast.InitList) and isinstance(node, c_ast.Decl):
            self._init(key, value, node.type, node, what)
        elif value is not None:
            length = self.arrays.get(key[0], 0) if key[1:] == ("[?]",) else 0
            # (an element of a variable index of an array of a known length: any one of
            # them, each of which a later store to it gives another value)
            for k in [key[:1] + (f"[{i}]",) for i in range(length)] or [key]:
                self._hold(k, value, node, what)

    def _hold(self, key: Path, value: c_ast.Node, node: c_ast.Node, what: str) -> None:
        """The place `key` (the walk follows it) holds `value`: a pointer into a table,
        or a struct's value whose members hold some (copied with it)."""
        table = self._points_into(value)
        if table is not None:
            if len(key) > 1 or key[0] in self.pointers:
                self.into[key] = table
            return
        source = self._key(value)
        if source is not None and not self._is_array(source) and source[0] not in self.pointers:
            for path, t in list(self._contents(value)):  # (a struct copied)
                self.into[key + path] = t
            return
        self._lost(value, node, what)  # (`cp = &c`: a pointer to what holds one)

    def _lost(self, value: c_ast.Node | None, node: c_ast.Node, what: str) -> None:
        """A pointer into a table that `value` is, or a struct or array that holds one
        (`&c`, `ps`), kept where the walk cannot follow it (`what` at `node`): listed."""
        if value is None:
            return
        inside = f" in `{self.within}`" if self.within else ""
        for table in self._pointed(value):
            self.stored.add((table, f"{self.helpers.place(node)}{inside} `{what}`"))

    def _pointed(self, value: c_ast.Node) -> list[str]:
        """The tables `value` points into, or holds pointers into (`&c`, `ps`, braces
        of such values)."""
        if isinstance(value, c_ast.NamedInitializer):
            value = value.expr
        if isinstance(value, c_ast.InitList):
            return sorted({t for x in value.exprs for t in self._pointed(x)})
        table = self._points_into(value)
        return [table] if table is not None else sorted({t for _, t in self._contents(value)})

    def _init(self, key: Path, init: c_ast.InitList, declared: c_ast.Node,
              node: c_ast.Node, what: str) -> None:
        """The local's part at `key`, of the type `declared`, initialised with the
        braces `init` (`{ .p = &t[i] }`, `{ &t[a], &t[b] }`): each member or element
        given a pointer into a table points there; one of a type the walk does not
        know (a struct with no definition here) is a store not followed."""
        t = self._resolve(declared)
        members = self._members(t)
        k = 0  # the next member or element
        for x in init.exprs:
            part: str | None = None
            if isinstance(x, c_ast.NamedInitializer):
                d = x.name[0] if len(x.name) == 1 else None
                x = x.expr
                if isinstance(d, c_ast.ID):  # (its name says the member, known or not)
                    part = f".{d.name}"
                    k = next((i for i, m in enumerate(members or []) if m.name == d.name), -1)
                elif d is not None and isinstance(t, c_ast.ArrayDecl):
                    part = _index(d)
                    k = int(part[1:-1]) if part != "[?]" else k
                else:
                    k = -1  # (`.a.b = ...`: not followed)
            sub: c_ast.Node | None = None
            if isinstance(t, c_ast.ArrayDecl) and k >= 0:
                part, sub = part or f"[{k}]", t.type
            elif members is not None and 0 <= k < len(members) and members[k].name:
                part, sub = part or f".{members[k].name}", members[k].type
            k = k + 1 if k >= 0 else k
            if part is None:
                self._lost(x, node, what)
            elif isinstance(x, c_ast.InitList):
                self._init(key + (part,), x, sub, node, what)
            else:
                self._hold(key + (part,), x, node, what)

    def _resolve(self, t: c_ast.Node | None) -> c_ast.Node | None:
        """A declared type with its typedefs' names resolved to what they name."""
        depth = 0
        while isinstance(t, c_ast.TypeDecl) and depth < 16:
            if isinstance(t.type, c_ast.IdentifierType) and len(t.type.names) == 1 \
                    and t.type.names[0] in self.typedefs:
                t, depth = self.typedefs[t.type.names[0]], depth + 1
            else:
                t = t.type
        return t

    def _members(self, t: c_ast.Node | None) -> list[c_ast.Decl] | None:
        """The members of a struct (or union) type, by its definition or its tag."""
        if isinstance(t, (c_ast.Struct, c_ast.Union)):
            if t.decls is not None:
                return list(t.decls)
            return self.structs.get(t.name) if t.name else None
        return None

    def _points_into(self, e: c_ast.Node) -> str | None:
        """The table a pointer value `e` points into (`&t[i]`, `t + i`, `t`, `&p[1]`, a
        pointer into it, kept in a local or a part of one, a map's value:
        `ofl_map_lookup(t, &k)`, what a helper returns), else None."""
        if isinstance(e, c_ast.FuncCall) and isinstance(e.name, c_ast.ID) and e.args is not None:
            if e.name.name == "ofl_map_lookup" and e.args.exprs:
                return self._points_into(e.args.exprs[0])
            f = self.helpers.funcs.get(e.name.name)
            found = self._follow(f, e.args.exprs)[0] if f is not None else None
            return min(found.returns) if found is not None and found.returns else None
        if isinstance(e, c_ast.Cast):
            return self._points_into(e.expr)
        if isinstance(e, c_ast.TernaryOp):
            return self._points_into(e.iftrue) or self._points_into(e.iffalse)
        if isinstance(e, c_ast.BinaryOp) and e.op in ("+", "-"):
            return self._points_into(e.left) or (
                self._points_into(e.right) if e.op == "+" else None)
        if isinstance(e, c_ast.UnaryOp) and e.op == "&":
            written = self._written(e.expr)
            if written is not None:
                return written[0]
            name, _ = _base(e.expr)
            return name if name in self.tables else None
        if isinstance(e, c_ast.ID):  # the table itself, or a pointer into it
            return e.name if e.name in self.tables else self.into.get((e.name,))
        key = self._key(e)  # (a member, an element, what a pointer given points at)
        return self._get(key) if key is not None else None

    def visit_ID(self, node: c_ast.ID) -> None:
        if node.name in self.tables:
            self.other.add(node.name)

    def visit_Struct(self, node: c_ast.Struct) -> None:
        """A struct's definition: its members are no locals (their types are walked)."""
        if node.name and node.decls is not None:
            self.structs[node.name] = list(node.decls)
        for d in node.decls or []:
            self.visit(d.type)

    visit_Union = visit_Struct

    def visit_FuncDecl(self, node: c_ast.FuncDecl) -> None:
        """A function's type: its parameters' names are no locals of the body."""
        self.visit(node.type)

    def visit_Decl(self, node: c_ast.Decl) -> None:
        if node.name in self.tables:  # a local hiding the table: not followed
            self.other.add(node.name)
        self.generic_visit(node)
        if node.name is not None:
            name = node.name
            self.hidden[-1].setdefault(name, (
                name in self.locals, name in self.pointers, self.arrays.get(name),
                {k: t for k, t in self.into.items() if k[0] == name}))
            self.locals.discard(name)
            if not {"static", "extern"} & set(node.storage):  # (those outlive the packet)
                self.locals.add(name)
            self.pointers.discard(name)  # (an inner local of the same name)
            self.arrays.pop(name, None)
            if _pointer(node.type, self.typedefs):
                self.pointers.add(name)
            t = self._resolve(node.type)
            if isinstance(t, c_ast.ArrayDecl):
                self.arrays[name] = _length(t.dim)
            self._forget((name,))
            if node.init is not None:
                self._store(node, node.init, node, name)

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
            inside = f" in `{self.within}`" if self.within else ""
            for a in node.args.exprs:
                for table in self._pointed(a):
                    self.unseen.add((table, f"{self.helpers.place(node)}{inside} `{called}`"))

    def _follow(self, f: c_ast.FuncDef, args: Sequence[c_ast.Node]
                ) -> tuple[_Found | None, dict[str, str]]:
        """What the helper `f` does given `args`: its pointer parameters given a pointer
        into a table (or the table), and those given a struct or array that holds one
        (by value or address), are followed into its body, once for each way they
        point; None when none is given one. Also: table -> the pointer given for it."""
        params = f.decl.type.args.params if f.decl.type.args is not None else []
        named = [p for p in params if isinstance(p, c_ast.Decl) and p.name]
        bound: dict[Path, str] = {}  # parameter (or its part) -> the table it points into
        arrays: set[str] = set()
        given: dict[str, str] = {}  # table -> the pointer given for it
        for p, a in zip(params, args, strict=False):
            if not (isinstance(p, c_ast.Decl) and p.name):
                continue
            table = self._points_into(a)
            if table is not None:  # (a map may be given as a struct: xdp's `(t).map`)
                bound[(p.name,)] = table
                given[table] = self._pointer_text(a)
                continue
            for path, t in self._contents(a):
                bound[(p.name,) + path] = t
                if path[0].startswith("["):  # (an array given: its elements are the caller's)
                    arrays.add(p.name)
        if not bound:
            return None, given
        key = (f.decl.name, frozenset(bound.items()))
        if key not in self.helpers.followed:
            self.helpers.followed[key] = _Found()  # (a call of itself)
            inner = _Uses(frozenset(), self.helpers, f.decl.name)
            inner.params = frozenset(str(p.name) for p in named)
            inner.locals = set(inner.params)
            inner.pointers = {str(p.name) for p in named
                              if _pointer(p.type, self.helpers.typedefs)}
            inner.arrays = dict.fromkeys(arrays, 0)
            inner.into = dict(bound)
            inner.statement(f.body)
            self.helpers.followed[key] = _Found(
                frozenset(inner.at), frozenset(inner.via), frozenset(inner.returns),
                frozenset(inner.unseen), frozenset(inner.stored))
        return self.helpers.followed[key], given

    def _call(self, f: c_ast.FuncDef, args: Sequence[c_ast.Node]) -> None:
        """A call of the helper `f`: what it does with the pointers into tables it is
        given is this body's: its plain updates told at the helper's line and through
        the pointer given, its calls not seen into and stores not followed."""
        found, given = self._follow(f, args)
        if found is None:
            return
        self.via |= found.via  # (the helper's own pointers: named too, so each can be found)
        self.unseen |= found.unseen
        self.stored |= found.stored
        for table, where, helper in found.at:
            self.plain.add(table)
            self.at.add((table, where, helper))
            if given.get(table):  # (a pointer of this body's, not the table itself)
                self.via.add((table, given[table], self.within))


def _within(path: Path, prefix: Path) -> bool:
    """Whether `path` starts with (the parts of) `prefix`, an element of a variable
    index being any element."""
    return len(path) >= len(prefix) and all(
        a == b or (a.startswith("[") and b.startswith("[") and "[?]" in (a, b))
        for a, b in zip(path, prefix, strict=False))


def _length(dim: c_ast.Node | None) -> int:
    """An array's length when its declaration says it (a constant up to 64), else 0."""
    index = _index(dim) if dim is not None else "[?]"
    return int(index[1:-1]) if index != "[?]" and 0 < int(index[1:-1]) <= 64 else 0


def _index(e: c_ast.Node) -> str:
    """A path's part for the index `e`: `[2]` for a constant, `[?]` for any other."""
    if isinstance(e, c_ast.Constant) and e.type in ("int", "unsigned int", "long int",
                                                    "unsigned long int", "long long int",
                                                    "unsigned long long int"):
        try:
            return f"[{int(e.value.rstrip('uUlL'), 0)}]"
        except ValueError:
            return "[?]"
    return "[?]"


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
