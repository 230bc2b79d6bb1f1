"""The C a shared hash map (dsl SharedMap) needs on every target: its packed key struct
``struct NAME_key`` (the same bytes on host, NIC and in BPF), and on host and NIC the
function that opens it (runtime map.h)."""

from __future__ import annotations

from offlow.ir import SharedTable
from offlow.ir.types import key_field_decl


def key_struct(t: SharedTable) -> list[str]:
    """``struct NAME_key``: the key's fields in declared order, packed."""
    return [f"/* The key of shared map {t.name}. */", f"struct {t.name}_key {{",
            *(f"    {key_field_decl(field, ftype)};" for field, ftype in t.map_key),
            "} __attribute__((packed));"]


def open_fn(t: SharedTable) -> list[str]:
    """The table object's open function (its name is t.open_fn)."""
    return [f"static inline int {t.open_fn}(struct ofl_map **m, const struct ofl_args *a, "
            "const char *name)", "{",
            f"    return ofl_map_open_named(m, sizeof(struct {t.name}_key), "
            f"sizeof({t.map_value}), {t.map_entries}u, a, name);", "}"]
