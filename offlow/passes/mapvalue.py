"""A shared map's value as a body takes it: `ofl_map_lookup(t, &k)` gives a `void *`
to the value, which C lets a body turn into any pointer, so a `uint64_t *` for a map of
`uint32_t` values wrote 8 bytes into a 4-byte slot on host and nic. Where the lookup's
result becomes a pointer of a type (a declaration `T *p = ofl_map_lookup(...)`, an
assignment to such a local, a cast `(T *)ofl_map_lookup(...)`; through casts to
`void *`, the arms of `?:` and a pointer local that holds the value: `(T *)n`; a
parameter `T *` of a function the helpers declare, given the value), T must be the
value's type (any spelling of it: `unsigned int` for `uint32_t`, a typedef of it in the
helpers or the body, a block's own until the block ends; `const` or not), `void` or a
character type (a byte view, as C allows for any object). A map whose value is a record
(`struct NAME_value`) takes a pointer to that struct (or a typedef of it): a `uint64_t *`
to a record is as wrong as to a `uint32_t`. `ofl_map_update(t, &k, &v)`
copies the value's size from `&v`: `v` (a local, a state field `state->f` or a batch
body's `states[i].f`, a struct's member `e->n`, `s.n`) must be of the value's type, a
pointer local `v` point to it (or be a `void *` or a byte view). What the check cannot
know (a type `__typeof__` names, a pointer it did not see made) it lets be.

Works on pycparser's tree of the body (cbody.py parses it); never on the text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pycparser import c_ast, c_generator

from offlow.ir.types import ADDRESS_TYPES, KEY_TYPES, MAP_TYPES, SCALARS

# The map calls that read a key from their second argument.
_KEYED = frozenset({"ofl_map_lookup", "ofl_map_update", "ofl_map_delete"})
# What a type is: (size in bytes, signed) for an integer; "void"; "byte" (a character
# type: any object may be read through one); "unknown" (a `__typeof__`); None: else.
_Kind = tuple[int, bool] | str | None

_STD = {"size_t": (8, False), "uintptr_t": (8, False), "ssize_t": (8, True),
        "intptr_t": (8, True), **{t: (n, t.startswith("int")) for t, n in SCALARS.items()
                                  if t.startswith(("int", "uint")) and n > 1}}
_BYTES = {"char", "uint8_t", "int8_t"}
_WIDTHS = {"short": 2, "int": 4, "long": 8}  # LP64: host, nic and BPF alike
# Where a packet holds an address of each type (its source), for the hint of an error.
_WHERE = {"ipv4": "pkt->data + state->l3_off + 12", "ipv6": "pkt->data + state->l3_off + 8",
          "mac": "pkt->data + 6"}
# The type name the analysis reads `__typeof__(x)` as (cbody.py's prelude): a type this
# check cannot know, so it lets it be.
UNKNOWN = "ofl_typeof_"


@dataclass(frozen=True)
class MapLocal:
    """A map as a body names it: its table's name, its value's C type (an integer type,
    or `struct TABLE_value` for a record), its key's fields (name, type: an integer type
    or an address, ADDRESS_TYPES) and a record value's fields (empty else)."""

    table: str
    value: str
    key: tuple[tuple[str, str], ...] = ()
    record: tuple[tuple[str, str], ...] = ()

    @property
    def size(self) -> int:
        """The bytes of its value."""
        if self.record:
            return sum(KEY_TYPES[t] for _, t in self.record)
        return SCALARS[self.value]

    @property
    def want(self) -> _Kind:
        """What its value's type is (_Kind); "record" for a record (no other type is)."""
        return "record" if self.record else _STD.get(self.value, "byte")


def map_value_error(stmts: Sequence[c_ast.Node], maps: Mapping[str, MapLocal],
                    helpers: Sequence[c_ast.Node], where: Callable[[c_ast.Node], str],
                    fields: Mapping[str, str] | None = None, vector: bool = False
                    ) -> str | None:
    """The first place the body's statements take a map's value (`maps`: by the body's
    local name) as a pointer of another type, as a message starting `where(node)`; None
    when there is none. `helpers`: the element's file-scope C (its typedefs and structs);
    `fields`: the per-packet state's fields and their types; `vector`: a batch body
    (packet i's state is `states[i]`)."""
    if not maps:
        return None
    w = _Walker(maps, helpers, where, fields or {}, vector)
    try:
        for s in stmts:
            w.visit(s)
    except _Found as found:
        return str(found)
    return None


class _Found(Exception):
    """The first wrong use, its message."""


class _Walker(c_ast.NodeVisitor):
    def __init__(self, maps: Mapping[str, MapLocal], helpers: Sequence[c_ast.Node],
                 where: Callable[[c_ast.Node], str], fields: Mapping[str, str],
                 vector: bool = False) -> None:
        self.maps, self.where, self.fields, self.vector = maps, where, fields, vector
        self.typedefs = {x.name: x for x in helpers if isinstance(x, c_ast.Typedef)}
        self.structs: dict[str, c_ast.Struct] = {}  # struct definitions, by name
        self.pointers: dict[str, c_ast.PtrDecl] = {}  # the body's pointer locals
        self.scalars: dict[str, c_ast.TypeDecl] = {}  # and its other plain locals
        self.holds: dict[str, str] = {}  # pointer local -> the map whose value it holds
        self.shadowed: list[dict[str, str | None]] = [{}]  # per block: outer `holds`
        self.funcs: dict[str, c_ast.FuncDecl] = {}  # the helpers' functions, by name
        for x in helpers:
            self.structs.update(_structs(x))
            d = x.decl if isinstance(x, c_ast.FuncDef) else x
            if isinstance(d, c_ast.Decl) and isinstance(d.type, c_ast.FuncDecl) and d.name:
                self.funcs[d.name] = d.type

    def visit_Compound(self, node: c_ast.Compound) -> None:
        outer = dict(self.pointers), dict(self.scalars), dict(self.structs), dict(self.typedefs)
        self.shadowed.append({})
        self.generic_visit(node)
        # (the block's own locals, structs and typedefs end with it)
        self.pointers, self.scalars, self.structs, self.typedefs = outer
        for name, held in self.shadowed.pop().items():  # an outer pointer is as it was
            self._hold(name, held)

    def _hold(self, name: str, local: str | None) -> None:
        """The pointer local `name` now holds map `local`'s value (None: not a value)."""
        self.holds.pop(name, None)
        if local is not None:
            self.holds[name] = local

    def visit_Decl(self, node: c_ast.Decl) -> None:
        self.generic_visit(node)
        if isinstance(node.type, c_ast.TypeDecl) and isinstance(node.init, c_ast.InitList):
            self._check_key_init(node.type, node.init)
        name = node.name or ""
        self.pointers.pop(name, None)  # (an outer local of the same name)
        self.scalars.pop(name, None)
        self.shadowed[-1].setdefault(name, self.holds.get(name))
        self.holds.pop(name, None)
        if isinstance(node.type, c_ast.TypeDecl) and name:
            self.scalars[name] = node.type
        if not isinstance(node.type, c_ast.PtrDecl):
            return
        if name:
            self.pointers[name] = node.type
        self._check(node, node.type, node.init)
        self._hold(name, self._lookup(node.init))

    def visit_Typedef(self, node: c_ast.Typedef) -> None:
        self.typedefs[node.name] = node  # (a type the body defines)
        self.generic_visit(node)

    def visit_FuncCall(self, node: c_ast.FuncCall) -> None:
        """`ofl_map_update(t, &k, &v)` copies the value's size from `&v`: `v` (a local, or
        what a pointer local points to) must be the value's type. Every call reads the
        key's size from `&k`: `k` must be the map's `struct NAME_key`."""
        self.generic_visit(node)
        args = node.args.exprs if node.args is not None else []
        call = node.name.name if isinstance(node.name, c_ast.ID) else ""
        f = self.funcs.get(call)
        params = f.args.params if f is not None and f.args is not None else []
        for param, arg in zip(params, args, strict=False):  # a helper's pointer parameter
            if isinstance(param, c_ast.Decl) and isinstance(param.type, c_ast.PtrDecl):
                self._check(node, param.type, arg, f"given to `{call}`'s `{param.name}`")
        if (call in _KEYED and len(args) >= 2 and isinstance(args[0], c_ast.ID)
                and args[0].name in self.maps):
            self._check_key(node, call, args[0].name, args[1])
        if not (call == "ofl_map_update" and len(args) == 3 and isinstance(args[0], c_ast.ID)
                and args[0].name in self.maps):
            return
        m, v = self.maps[args[0].name], args[2]
        want = m.want
        obj = self._object(v.expr) if isinstance(v, c_ast.UnaryOp) and v.op == "&" else None
        if isinstance(obj, c_ast.TypeDecl):  # `&v`, `&state->f`, `&e->n`, `&s.n`
            t: c_ast.Node = obj
            ok: tuple[_Kind, ...] = ("unknown", want)
        elif isinstance(v, c_ast.ID) and v.name in self.pointers:
            t, ok = self.pointers[v.name], ("void", "byte", "unknown", want)
        else:
            return
        got = self._kind(t.type if isinstance(t, c_ast.PtrDecl) else t)
        if got in ok or self._is_record(t.type if isinstance(t, c_ast.PtrDecl) else t, m):
            return
        size = f" ({got[0]} bytes)" if isinstance(got, tuple) else ""
        raise _Found(f"{self._holds(node, m)}passes ofl_map_update({args[0].name}, ..., "
                     f"{c_generator.CGenerator().visit(v)}) a `{_spelling(t)}`{size}; pass "
                     f"the address of a `{m.value}`")

    def _check_key(self, node: c_ast.FuncCall, call: str, local: str, k: c_ast.Node) -> None:
        """The key `k` of `call` on map `local`: a local the map's key struct (by its
        address) or a pointer to one (or `void *`, a byte view, a `__typeof__`)."""
        want = f"{self.maps[local].table}_key"
        if (isinstance(k, c_ast.UnaryOp) and k.op == "&" and isinstance(k.expr, c_ast.ID)
                and k.expr.name in self.scalars):
            t: c_ast.Node = self.scalars[k.expr.name]
            fine = self._is_struct(t, want) or self._kind(t) == "unknown"
        elif isinstance(k, c_ast.ID) and k.name in self.pointers:
            t = self.pointers[k.name]
            fine = self._is_struct(t.type, want) or self._kind(t.type) in (
                "void", "byte", "unknown")
        else:
            return
        if not fine:
            raise _Found(f"{self.where(node)}: {call}({local}, "
                         f"{c_generator.CGenerator().visit(k)}, ...) passes a "
                         f"`{_spelling(t)}` as the key of map `{self.maps[local].table}`, "
                         f"which reads a `struct {want}` there; declare the key as "
                         f"`struct {want} k;` and fill its fields")

    def visit_CompoundLiteral(self, node: c_ast.CompoundLiteral) -> None:
        self.generic_visit(node)
        if isinstance(node.type.type, c_ast.TypeDecl) and isinstance(node.init, c_ast.InitList):
            self._check_key_init(node.type.type, node.init)

    def _check_key_init(self, t: c_ast.TypeDecl, init: c_ast.InitList) -> None:
        """A map's key struct (or record value struct) given its fields in braces: an
        address field (a byte array) given one number, `{ .src = state->src4 }`, has C
        set its first byte alone, silently (the address's other bytes zero)."""
        st = t.type
        if not isinstance(st, c_ast.Struct):
            return
        found = next(((m, fields, what) for m in self.maps.values()
                      for fields, what in ((m.key, "key"), (m.record, "value"))
                      if st.name == f"{m.table}_{what}"), None)
        if found is None or not found[1]:
            return
        m, fields, what = found
        at = 0  # the field a positional initializer sets
        for e in init.exprs:
            if isinstance(e, c_ast.NamedInitializer):
                names = [n.name for n in e.name if isinstance(n, c_ast.ID)]
                if len(e.name) != 1 or len(names) != 1:
                    return  # (`.src[1] = ...`: one byte, as written)
                at = next((i for i, (f, _) in enumerate(fields) if f == names[0]), len(fields))
                value = e.expr
            else:
                value = e
            if at >= len(fields):
                return
            field, ftype = fields[at]
            if ftype in ADDRESS_TYPES and not isinstance(value, c_ast.InitList | c_ast.Constant):
                size = ADDRESS_TYPES[ftype]
                raise _Found(
                    f"{self.where(value)}: `{c_generator.CGenerator().visit(value)}` sets "
                    f"field `{field}` of map `{m.table}`'s {what}, an `{ftype}` address (its "
                    f"{size} bytes as on the wire, a `uint8_t {field}[{size}]`), from one "
                    f"number: C sets its first byte alone. Copy the address's bytes, "
                    f"`memcpy({what[0]}.{field}, {_WHERE[ftype]}, {size})`, or declare the "
                    f"field an integer type to {'key by' if what == 'key' else 'hold'} a "
                    "number")
            at += 1

    def _object(self, x: c_ast.Node) -> c_ast.Node | None:
        """The declared type of the object `x` names (a local, a state field, a member
        of a struct local or of what a pointer local points at), else None."""
        if isinstance(x, c_ast.ID):
            return self.scalars.get(x.name) or self.pointers.get(x.name)
        if not isinstance(x, c_ast.StructRef):
            return None
        if self._is_state(x):
            ctype = self.fields.get(x.field.name, "")
            return c_ast.TypeDecl(None, [], None, c_ast.IdentifierType([ctype])) \
                if ctype in SCALARS else None
        base = self._object(x.name)
        if x.type == "->":
            base = base.type if isinstance(base, c_ast.PtrDecl) else None
        for d in self._members(base):
            if d.name == x.field.name:
                return d.type
        return None

    def _is_state(self, x: c_ast.StructRef) -> bool:
        """Whether `x` is a per-packet state field: `state->f`, or in a batch body
        `states[i].f` (the name not a local of the body)."""
        if self.vector:
            base = x.name.name if isinstance(x.name, c_ast.ArrayRef) else None
            name, op = "states", "."
        else:
            base, name, op = x.name, "state", "->"
        return (x.type == op and isinstance(base, c_ast.ID) and base.name == name
                and name not in self.scalars and name not in self.pointers)

    def _members(self, t: c_ast.Node | None, depth: int = 0) -> list[c_ast.Decl]:
        """The members of the struct type `t` (a TypeDecl), through typedefs; [] else."""
        inner = t.type if isinstance(t, c_ast.TypeDecl) else None
        if isinstance(inner, c_ast.IdentifierType) and len(inner.names) == 1 \
                and inner.names[0] in self.typedefs and depth < 16:
            return self._members(self.typedefs[inner.names[0]].type, depth + 1)
        if not isinstance(inner, c_ast.Struct):
            return []
        if inner.decls is None and inner.name in self.structs:
            inner = self.structs[inner.name]
        return list(inner.decls or [])

    def _is_record(self, t: c_ast.Node | None, m: MapLocal, depth: int = 0) -> bool:
        """Whether `t` is map `m`'s record value struct (through typedefs)."""
        if not m.record or not isinstance(t, c_ast.TypeDecl):
            return False
        inner = t.type
        if isinstance(inner, c_ast.IdentifierType) and len(inner.names) == 1 \
                and inner.names[0] in self.typedefs and depth < 16:
            return self._is_record(self.typedefs[inner.names[0]].type, m, depth + 1)
        return isinstance(inner, c_ast.Struct) and inner.name == f"{m.table}_value"

    @staticmethod
    def _is_struct(t: c_ast.Node, name: str) -> bool:
        return isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Struct) \
            and t.type.name == name

    def visit_Struct(self, node: c_ast.Struct) -> None:
        # `struct NAME_key` (and a record's `struct NAME_value`) is named after the map;
        # a body that names it after its own local for the map met a C compiler's
        # "storage size isn't known"
        for part, what in (("_key", "key"), ("_value", "value")):
            local = node.name.removesuffix(part) if node.name else ""
            m = self.maps.get(local) if node.name != local else None
            if m is not None and m.table != local and (what == "key" or m.record):
                raise _Found(f"{self.where(node)}: `struct {node.name}`: the {what} of map "
                             f"`{m.table}` (this body's `{local}`) is `struct "
                             f"{m.table}{part}`, named after the map")
        self.structs.update(_structs(node))
        self.generic_visit(node)

    def _holds(self, node: c_ast.Node, m: MapLocal) -> str:
        """The head of an error at `node` about map `m`."""
        return (f"{self.where(node)}: map `{m.table}` holds `{m.value}` values "
                f"({m.size} bytes), but the body ")

    def visit_Assignment(self, node: c_ast.Assignment) -> None:
        self.generic_visit(node)
        if node.op == "=" and isinstance(node.lvalue, c_ast.ID):
            ptr = self.pointers.get(node.lvalue.name)
            if ptr is not None:
                self._check(node, ptr, node.rvalue)
                self._hold(node.lvalue.name, self._lookup(node.rvalue))

    def visit_Cast(self, node: c_ast.Cast) -> None:
        self.generic_visit(node)
        ptr = node.to_type.type
        if isinstance(ptr, c_ast.PtrDecl) and self._kind(ptr.type) != "void":
            self._check(node, ptr, node.expr)

    def _lookup(self, e: c_ast.Node | None) -> str | None:
        """The map local whose lookup `e` gives (through `(void *)`, `?:`, a pointer
        local holding it, `&n[i]`, `&*n`, `n + i`), else None."""
        if isinstance(e, c_ast.ID):
            return self.holds.get(e.name)
        if isinstance(e, c_ast.UnaryOp) and e.op == "&" and isinstance(e.expr, c_ast.ArrayRef):
            return self._lookup(e.expr.name)  # `&n[0]`
        if isinstance(e, c_ast.UnaryOp) and e.op == "&" and isinstance(e.expr, c_ast.UnaryOp) \
                and e.expr.op == "*":
            return self._lookup(e.expr.expr)  # `&*n`
        if isinstance(e, c_ast.BinaryOp) and e.op in ("+", "-"):
            return self._lookup(e.left)  # `n + 0`
        if (isinstance(e, c_ast.FuncCall) and isinstance(e.name, c_ast.ID)
                and e.name.name == "ofl_map_lookup" and e.args is not None and e.args.exprs
                and isinstance(e.args.exprs[0], c_ast.ID) and e.args.exprs[0].name in self.maps):
            return e.args.exprs[0].name
        if isinstance(e, c_ast.Cast) and isinstance(e.to_type.type, c_ast.PtrDecl) \
                and self._kind(e.to_type.type.type) == "void":
            return self._lookup(e.expr)
        if isinstance(e, c_ast.TernaryOp):
            return self._lookup(e.iftrue) or self._lookup(e.iffalse)
        return None

    def _check(self, node: c_ast.Node, ptr: c_ast.PtrDecl, value: c_ast.Node | None,
               given: str = "") -> None:
        local = self._lookup(value)
        if local is None:
            return
        m = self.maps[local]
        got, want = self._kind(ptr.type), m.want
        if got in ("void", "byte", "unknown", want) or self._is_record(ptr.type, m):
            return
        written = _spelling(ptr)
        size = f" ({got[0]} bytes: writing through it reaches past the value)" if (
            isinstance(got, tuple) and isinstance(want, tuple) and got[0] > want[0]) else ""
        base = written.rstrip("* ").removeprefix("const ").removeprefix("volatile ")
        other = (f", or declare the map with value=\"{base}\"" if written.count("*") == 1
                 and base in MAP_TYPES and base != m.value and not m.record else "")
        held = _named(value)
        how = ", ".join(x for x in (f"held in `{held}`" if held in self.holds else "",
                                    given) if x)
        via = f" ({how})" if how else ""
        raise _Found(
            f"{self._holds(node, m)}takes ofl_map_lookup({local}, ...){via} as `{written}`"
            f"{size}; take it as `{m.value} *` (or `const {m.value} *`, `void *`){other}")

    def _kind(self, t: c_ast.Node | None, depth: int = 0) -> _Kind:
        """What the type `t` (a pointer's target, or a local's) is."""
        if not isinstance(t, c_ast.TypeDecl) or not isinstance(t.type, c_ast.IdentifierType):
            return None  # a pointer, struct, union, enum, function, array
        names = t.type.names
        if names == [UNKNOWN]:
            return "unknown"
        if len(names) == 1 and names[0] in self.typedefs and depth < 16:
            return self._kind(self.typedefs[names[0]].type, depth + 1)
        if len(names) == 1 and names[0] in _STD:
            return _STD[names[0]]
        if names == ["void"]:
            return "void"
        if set(names) <= {"char", "signed", "unsigned"} and "char" in names \
                or len(names) == 1 and names[0] in _BYTES:
            return "byte"
        width = [_WIDTHS[n] for n in names if n in _WIDTHS]
        if not width or not set(names) <= {*_WIDTHS, "signed", "unsigned"}:
            return None  # float, double, _Bool, ...
        return (max(width), "unsigned" not in names)


def _named(e: c_ast.Node | None) -> str | None:
    """The pointer local `e` is made from (through casts, `&n[i]`, `&*n`, `n + i`);
    else None."""
    while not isinstance(e, c_ast.ID):
        if isinstance(e, c_ast.Cast | c_ast.UnaryOp) and (
                not isinstance(e, c_ast.UnaryOp) or e.op in ("&", "*")):
            e = e.expr
        elif isinstance(e, c_ast.ArrayRef):
            e = e.name
        elif isinstance(e, c_ast.BinaryOp) and e.op in ("+", "-"):
            e = e.left
        else:
            return None
    return e.name


def _structs(node: c_ast.Node) -> dict[str, c_ast.Struct]:
    """The named struct definitions (with their members) in `node`."""
    defs = _StructDefs()
    defs.visit(node)
    return defs.found


class _StructDefs(c_ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: dict[str, c_ast.Struct] = {}

    def visit_Struct(self, node: c_ast.Struct) -> None:
        if node.name and node.decls is not None:
            self.found[node.name] = node
        self.generic_visit(node)


def _spelling(t: c_ast.Node) -> str:
    """A type as the body wrote it: `const uint64_t *`, `struct ent *`, `uint32_t`."""
    stars = ""
    while isinstance(t, c_ast.PtrDecl):
        t, stars = t.type, stars + "*"
    quals = " ".join(getattr(t, "quals", None) or [])
    inner = getattr(t, "type", None)
    if isinstance(inner, c_ast.IdentifierType):
        name = " ".join(inner.names)
    elif isinstance(inner, c_ast.Struct | c_ast.Union | c_ast.Enum):
        name = f"{type(inner).__name__.lower()} {inner.name or ''}".strip()
    else:
        name = "(a function or array)"
    return " ".join(x for x in (quals, name, stars) if x)
