"""Values elements are constructed with: shared arrays, table objects, and parameters
as C literals."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from offlow.errors import OfflowError
from offlow.ir import SharedTable
from offlow.ir.types import KEY_TYPES, MAP_TYPES, SCALARS, c_identifier


@dataclass(frozen=True)
class Shared:
    """A shared table or counter array, declared once, used by elements by name.

    It lives in the memory of the device whose elements use it; when elements on
    several devices use it, it lives in the interconnect window.
    """

    name: str
    ctype: str
    length: int = 1

    def __post_init__(self) -> None:
        # Every target lays a shared array out as `length` scalars (host/nic/window
        # structs, xdp map values, gpu buffers, the ctl channel, the report): refuse
        # anything else here, before it can size one thing and index another.
        who = f"shared table `{self.name}`"
        _named(who, self.name)
        if (not isinstance(self.length, int) or isinstance(self.length, bool)
                or self.length < 1):
            raise OfflowError(f"{who}: length={self.length!r}; a shared table holds 1 or "
                              "more elements (an int)")
        if self.ctype in SCALARS:
            return
        base, _, rest = self.ctype.partition("[")
        base, inner = base.strip(), rest.removesuffix("]").strip()
        if base in SCALARS and inner.isdigit() and int(inner) > 0:
            k = int(inner)
            raise OfflowError(
                f"{who}: element type `{self.ctype}` is an array, and a shared table's "
                f"elements are scalars (bodies get a `{base} *`): declare its {self.length} "
                f"rows of {k} as Shared(\"{self.name}\", \"{base}\", {self.length * k}) "
                f"and index row i's element j as `[{k} * i + j]`")
        raise OfflowError(f"{who}: element type {self.ctype!r} is not one of "
                          f"{', '.join(SCALARS)}")


@dataclass(frozen=True)
class Table:
    """A table object (an LPM table, a hash table) built at start-up, in the memory of
    the one device whose elements use it.

    `ctype` is its C type (``struct ofl_lpm4``); elements get a ``ctype *`` local.
    The device process builds it before any core starts, by calling
    ``int open_fn(ctype **t, const struct ofl_args *a, const char *name)``, which
    reads the run-time options ``NAME.KEY=VALUE`` (defaults in `options`, overridden
    by ``offlow run --opt``), and frees it with ``void close_fn(ctype *t)`` at exit.
    `source` says how it gets there, for ``offlow explain``.

    A table that can travel has `pack_fn` and `open_blob_fn`: when it lives on a
    device other than the host, the host process reads its input with
    ``int pack_fn(void **blob, size_t *len, const struct ofl_args *a, const char *name)``
    and sends the blob over the bulk channel ``table.NAME``; the device builds the
    table from it with ``int open_blob_fn(ctype **t, const void *blob, size_t len,
    const struct ofl_args *a, const char *name)`` (a NIC has no file system).

    `stats_fn`, when set, writes the object's counters to the stats file at exit:
    ``void stats_fn(struct ofl_json *j, const char *name, const ctype *t)`` (an object
    named `name`). A table with `tcp` serves the run's TCP socket (``offlow run
    --tcp``): the runner passes it to the process that holds the table as the option
    ``NAME.tcp_fd=N``, which the open function serves.

    `ctl_fn`, when set, answers the control messages of the running program's table
    (offlow ctl; runtime/core/include/offlow/ctl.h): ``void ctl_fn(ctype *t, const
    uint8_t *msg, size_t len, struct ofl_ctl_reply *r)``, run by the channel manager of
    the process that holds it (``ofl_lpm4_ctl``: route add and delete).

    `includes` are the runtime headers that declare these functions and `ctype`
    (``offlow/lpm4.h``): the generated program includes them, and links the runtime
    libraries that hold them. `src_kinds` are the packet source kinds the table's
    library adds, as (kind, C function) pairs: ``--opt SOURCE.kind=KIND`` opens a source
    with ``int fn(struct ofl_src **s, const struct ofl_args *a, const char *name,
    const struct ofl_src_opts *o, char *errbuf)`` (gen.h's struct ofl_src_kind).
    A table with `one_core` is state its functions change without locks (a stream
    operator's windows): every element that uses it must run on one and the same core.

    `check`, when set, names a Python function (``module:function``) that the runner
    calls with the table's name and options (a dict, command-line overrides applied)
    before any process starts; it raises OfflowError on options or files the open
    function would refuse, so a bad one is one clear error instead of a device
    process's failure.

    `keys` are the option keys its C functions read (``ofl_args_get``: the open
    function's, and the pack function's of a table that travels), for example
    ``("nports", "path")``: ``offlow run --opt NAME.KEY=VALUE`` of any other key is
    refused before any process starts, naming these (offlow.optkeys). A table that
    declares none has a key it does not read refused by its device process once started
    (gen.h's ofl_args_check_unread). `src_kind_keys` are, for each source kind in
    `src_kinds`, the keys its open function reads beside every source's, as (kind,
    keys) pairs (a kind without them: its sources' keys are checked once started).
    """

    name: str
    ctype: str
    open_fn: str
    close_fn: str
    options: tuple[tuple[str, str], ...] = ()
    source: str = ""
    pack_fn: str = ""
    open_blob_fn: str = ""
    stats_fn: str = ""
    tcp: bool = False
    ctl_fn: str = ""
    includes: tuple[str, ...] = ()
    src_kinds: tuple[tuple[str, str], ...] = ()
    one_core: bool = False
    check: str = ""
    keys: tuple[str, ...] = ()
    src_kind_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        _named(f"table `{self.name}`", self.name)
        # (its own defaults would be refused as the user's are: say so where it is made)
        unread = [k for k, _ in self.options if self.keys and k not in self.keys]
        if unread:
            raise OfflowError(f"table `{self.name}`: option `{unread[0]}` is not one of the "
                              f"keys it reads ({', '.join(self.keys)})")


def _named(who: str, name: object) -> None:
    """Refuse a table's name that is no C identifier: the generated C and the run's
    `--opt NAME.KEY=VALUE` name it (a quote or a backslash broke the generated C in a
    cascade of compile errors)."""
    if not c_identifier(name):
        raise OfflowError(f"{who}: its name must be a C identifier (ASCII, not a C "
                          "keyword): the generated C and `--opt NAME.KEY=VALUE` name it")


MAP_KEY_MAX = 256          # bytes (runtime map.h's OFL_MAP_KEY_MAX)
MAP_VALUE_MAX = 256        # bytes (runtime map.h's OFL_MAP_VALUE_MAX)
MAP_ENTRIES_MAX = 1 << 24  # (map.h's OFL_MAP_ENTRIES_MAX)


@dataclass(frozen=True)
class SharedMap:
    """A hash map of at most `entries` keys, each a packed ``struct NAME_key`` of the
    `key` fields ((field, type) pairs, in order: an integer type, or `ipv4`, `ipv6`,
    `mac` for an address's bytes as on the wire, shown as an address in the report),
    each value one `value`: an integer type, or a record, ``struct NAME_value``, of
    (field, type) pairs declared as the key's are (a flow's packets, bytes, first and
    last time: ``value=(("packets", "uint64_t"), ("bytes", "uint64_t"), ...)``),
    packed in declared order. It lives on
    the one device whose elements use it (on one core: its users run unlocked), empty
    at start; bodies call ``ofl_map_lookup(NAME, &key)`` (the value's address or NULL),
    ``ofl_map_update(NAME, &key, &value)`` (0, or -ENOSPC counted `full` when it holds
    `entries` keys and the key is new) and ``ofl_map_delete(NAME, &key)`` (0 or
    -ENOENT), where NAME is the element's table name for it. On xdp it is a
    BPF_MAP_TYPE_HASH. The run's table report lists its keys and values, sorted by
    key, and `full`."""

    name: str
    key: tuple[tuple[str, str], ...]
    value: str | tuple[tuple[str, str], ...] = "uint64_t"
    entries: int = 1024

    def __post_init__(self) -> None:
        who = f"shared map `{self.name}`"
        _named(who, self.name)
        object.__setattr__(self, "key", _fields(who, "key", self.key))
        if self.key_size > MAP_KEY_MAX:
            raise OfflowError(f"{who}: its key is {self.key_size} bytes, more than the "
                              f"{MAP_KEY_MAX} a map key may have")
        if isinstance(self.value, tuple | list):
            object.__setattr__(self, "value", _fields(who, "value", self.value))
            if self.value_size > MAP_VALUE_MAX:
                raise OfflowError(f"{who}: its value is {self.value_size} bytes, more than "
                                  f"the {MAP_VALUE_MAX} a map value may have")
        elif not isinstance(self.value, str) or self.value not in MAP_TYPES:
            raise OfflowError(f"{who}: value type {self.value!r}; a value is one of "
                              f"{', '.join(MAP_TYPES)}, or a record ((field, type), ...)")
        if (not isinstance(self.entries, int) or isinstance(self.entries, bool)
                or not 1 <= self.entries <= MAP_ENTRIES_MAX):
            raise OfflowError(f"{who}: entries={self.entries!r}; a map holds 1 to "
                              f"{MAP_ENTRIES_MAX} entries")

    @property
    def key_size(self) -> int:
        """The bytes of its packed key struct."""
        return sum(KEY_TYPES[t] for _, t in self.key)

    @property
    def record(self) -> tuple[tuple[str, str], ...]:
        """A record value's (field, type) pairs; () for an integer value."""
        return self.value if isinstance(self.value, tuple) else ()

    @property
    def value_size(self) -> int:
        """The bytes of a value (a record's packed struct)."""
        if isinstance(self.value, tuple):
            return sum(KEY_TYPES[t] for _, t in self.value)
        return MAP_TYPES[self.value]

    @property
    def value_ctype(self) -> str:
        """The value's C type: the integer type, or ``struct NAME_value``."""
        return f"struct {self.name}_value" if isinstance(self.value, tuple) else self.value


def _fields(who: str, what: str, fields: Any) -> tuple[tuple[str, str], ...]:
    """A key's or a record value's (field, type) pairs, checked: C identifiers, each
    once, of KEY_TYPES; one clear error else."""
    if (not isinstance(fields, tuple | list) or not fields
            or not all(isinstance(f, tuple | list) and len(f) == 2 for f in fields)):
        raise OfflowError(f"{who}: {what} must be ((field, type), ...), one pair or more, "
                          f"not {fields!r}")
    seen: set[str] = set()
    for fname, ftype in fields:
        if not c_identifier(fname):
            raise OfflowError(f"{who}: {what} field {fname!r} is not a C identifier (ASCII, "
                              "not a C keyword)")
        if fname in seen:
            raise OfflowError(f"{who}: {what} field `{fname}` is declared twice")
        seen.add(fname)
        if not isinstance(ftype, str) or ftype not in KEY_TYPES:
            raise OfflowError(f"{who}: {what} field `{fname}` has type {ftype!r}; a {what} "
                              f"field is one of {', '.join(KEY_TYPES)}")
    return tuple((f, t) for f, t in fields)


def map_table(m: SharedMap) -> SharedTable:
    """The IR's table object for map `m`: opened by the function the generated code
    defines for it (offlow/codegen/mapdecl.py), closed and reported by runtime map.h."""
    return SharedTable(
        m.name, "struct ofl_map", 1, open_fn=f"ofl_mapopen_{m.name}", close_fn="ofl_map_close",
        source=(f"a hash map of at most {m.entries} keys (struct {m.name}_key, "
                f"{m.key_size} B) to {_value_text(m)}, empty at start"),
        stats_fn="ofl_map_stats_json", stats_contents=True,
        includes=("offlow/map.h", "offlow/map_ctl.h"),
        one_core=True, ctl_fn=f"ofl_mapctl_{m.name}",
        map_key=m.key, map_value=m.value_ctype, map_record=m.record, map_entries=m.entries)


def _value_text(m: SharedMap) -> str:
    """The value as `offlow explain` says it: `uint64_t`, or the record's struct, size
    and fields."""
    if not m.record:
        return m.value_ctype
    return (f"{m.value_ctype} ({m.value_size} B: "
            + ", ".join(f"{f} {t}" for f, t in m.record) + ")")


def _int_range(ctype: str) -> tuple[int, int] | None:
    """The values C integer type `ctype` holds (None: not one offlow sizes)."""
    if ctype == "bool":
        return 0, 1
    if ctype not in SCALARS or ctype in ("float", "double"):
        return None
    bits = 8 * SCALARS[ctype]
    if ctype.startswith("uint"):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def c_literal(value: Any, ctype: str, where: str) -> str:
    """`value` as a C literal of type `ctype`; `where` names it in the error. A number
    the type cannot hold (-1 or 2**40 for a uint32_t, 1.5 for an integer, a float that
    is not finite) is an error: C would wrap or cut it without a word."""
    span = _int_range(ctype)
    if isinstance(value, float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise OfflowError(f"{where}: {value!r} is not a finite number")
        if span is not None:
            if not value.is_integer():
                raise OfflowError(f"{where}: {value!r} is not a whole number, and C type "
                                  f"`{ctype}` holds whole numbers only")
            value = int(value)
    if isinstance(value, int) and span is not None and not span[0] <= value <= span[1]:
        raise OfflowError(f"{where}: {value} does not fit C type `{ctype}` "
                          f"({span[0]}..{span[1]})")
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        suffix = "ULL" if ctype.startswith("uint") and value >= 0 else "LL"
        return f"{value}{suffix}"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str) and ctype in ("const char *", "str"):
        return json.dumps(value)
    raise OfflowError(f"{where}: cannot pass {value!r} as C type `{ctype}`")
