"""C types of per-packet fields and shared tables: names, sizes, alignment."""

from __future__ import annotations

from dataclasses import dataclass

from offlow.errors import OfflowError

# C11's keywords (and the GNU ones a body may meet): no name offlow puts into C may be one
C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex
    _Generic _Imaginary _Noreturn _Static_assert _Thread_local asm typeof bool true false
    """.split())


def c_identifier(name: object) -> bool:
    """Whether `name` can name something in C: an ASCII identifier, not a keyword."""
    return (isinstance(name, str) and name.isascii() and name.isidentifier()
            and name not in C_KEYWORDS)


SCALARS: dict[str, int] = {
    "uint8_t": 1, "int8_t": 1, "bool": 1, "char": 1,
    "uint16_t": 2, "int16_t": 2,
    "uint32_t": 4, "int32_t": 4, "float": 4,
    "uint64_t": 8, "int64_t": 8, "double": 8,
}
# The integer types a shared map's key fields and value may have (dsl SharedMap).
MAP_TYPES = {t: n for t, n in SCALARS.items() if t.startswith(("int", "uint"))}
# The address types a key field may have besides: its bytes as on the wire (a `uint8_t
# NAME[N]` in the key struct), which the run's report shows as an address.
ADDRESS_TYPES = {"ipv4": 4, "ipv6": 16, "mac": 6}
KEY_TYPES = {**MAP_TYPES, **ADDRESS_TYPES}


def key_field_decl(field: str, ftype: str) -> str:
    """A map key field's C declaration: `uint32_t src` or `uint8_t src[4]` (ipv4)."""
    if ftype in ADDRESS_TYPES:
        return f"uint8_t {field}[{ADDRESS_TYPES[ftype]}]"
    return f"{ftype} {field}"


@dataclass(frozen=True)
class Field:
    """A per-packet state field: ``ttl: uint8_t`` or an array ``key: uint8_t[32]``."""

    name: str
    ctype: str

    @property
    def base(self) -> str:
        return self.ctype.split("[")[0].strip()

    @property
    def count(self) -> int:
        if "[" not in self.ctype:
            return 1
        return int(self.ctype.split("[")[1].rstrip("]"))

    @property
    def size(self) -> int:
        return SCALARS[self.base] * self.count

    @property
    def align(self) -> int:
        return SCALARS[self.base]

    def decl(self) -> str:
        """The C member declaration."""
        if "[" in self.ctype:
            return f"{self.base} {self.name}[{self.count}];"
        return f"{self.ctype} {self.name};"


def check_ctype(ctype: str, what: str) -> None:
    """Raise a user error unless `ctype` is a scalar or fixed array we can lay out."""
    base = ctype.split("[")[0].strip()
    ok = base in SCALARS
    if ok and "[" in ctype:
        inner = ctype.split("[", 1)[1]
        ok = inner.endswith("]") and inner[:-1].isdigit() and int(inner[:-1]) > 0
    if not ok:
        raise OfflowError(
            f"{what}: C type `{ctype}` is not supported; use one of "
            f"{', '.join(sorted(SCALARS))} or a fixed array such as `uint8_t[16]`"
        )


def packed_layout(fields: tuple[Field, ...], start: int) -> tuple[list[tuple[Field, int]], int]:
    """Lay out fields in C struct order after `start` bytes; return offsets and the end.

    Fields are sorted by decreasing alignment (then name) so padding is minimal; the
    generated C struct uses the same order, and a static assert checks the size.
    """
    order = sorted(fields, key=lambda f: (-f.align, f.name))
    out: list[tuple[Field, int]] = []
    off = start
    for f in order:
        off = (off + f.align - 1) // f.align * f.align
        out.append((f, off))
        off += f.size
    return out, off


def sort_fields(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """The canonical order of fields in generated structs."""
    return tuple(sorted(fields, key=lambda f: (-f.align, f.name)))


def cname(name: str) -> str:
    """A C identifier for an element, segment or queue name."""
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def port_types_compatible(out_type: str, in_type: str) -> bool:
    """True when a packet of `out_type` may enter an input of `in_type` (types are
    nominal and dotted: `ip.v4` feeds `ip` and `ip.v4`; `any` takes everything)."""
    return in_type in ("any", out_type) or out_type.startswith(in_type + ".")


# The read-modify-write builtins that add (their first argument the address added to);
# what each becomes when its every call adds to a per-CPU copy: a plain add or subtract.
ADD_BUILTINS = {
    "__sync_fetch_and_add": "+=", "__sync_add_and_fetch": "+=",
    "__sync_fetch_and_sub": "-=", "__sync_sub_and_fetch": "-=",
    "__atomic_fetch_add": "+=", "__atomic_add_fetch": "+=",
    "__atomic_fetch_sub": "-=", "__atomic_sub_fetch": "-=",
}
