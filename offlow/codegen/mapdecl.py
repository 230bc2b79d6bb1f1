"""The C a shared hash map (dsl SharedMap) needs on every target: its packed key struct
``struct NAME_key`` and a record value's packed ``struct NAME_value`` (the same bytes
on host, NIC and in BPF: a record of 33 bytes is 33 bytes in every slot, so a member is
read and written unaligned, which packed tells the compiler), and on host and NIC the
function that opens it (runtime map.h) and the one its control channel calls
(runtime map_ctl.h), and the size of that channel's staging buffers."""

from __future__ import annotations

from offlow.ir import SharedTable
from offlow.ir.types import key_field_decl


def key_struct(t: SharedTable) -> list[str]:
    """``struct NAME_key``: the key's fields in declared order, packed."""
    return [f"/* The key of shared map {t.name}. */", f"struct {t.name}_key {{",
            *(f"    {key_field_decl(field, ftype)};" for field, ftype in t.map_key),
            "} __attribute__((packed));",
            f"_Static_assert(sizeof(struct {t.name}_key) == {t.map_key_size}, "
            f'"struct {t.name}_key is packed");']


def value_struct(t: SharedTable) -> list[str]:
    """``struct NAME_value`` of a map whose value is a record: its fields in declared
    order, packed as the key's; nothing for an integer value."""
    if not t.map_record:
        return []
    return [f"/* The value (a record) of shared map {t.name}. */", f"struct {t.name}_value {{",
            *(f"    {key_field_decl(field, ftype)};" for field, ftype in t.map_record),
            "} __attribute__((packed));",
            f"_Static_assert(sizeof(struct {t.name}_value) == {t.map_value_size}, "
            f'"struct {t.name}_value is packed");']


def layout(t: SharedTable) -> str:
    """The text a control client reads to type keys and values: "FIELD:TYPE,...;VALUE",
    VALUE an integer type or a record's "FIELD:TYPE,..." (offlow/mapctl.py's Layout)."""
    value = ",".join(f"{f}:{ft}" for f, ft in t.map_record) or t.map_value
    return ",".join(f"{f}:{ft}" for f, ft in t.map_key) + ";" + value


def value_type(t: SharedTable) -> str:
    """The value's type letter of the control info: 'i' signed, 'u' unsigned, 'r' a
    record (its fields' types in the layout text)."""
    if t.map_record:
        return "r"
    return "i" if t.map_value.startswith("int") else "u"


def open_fn(t: SharedTable) -> list[str]:
    """The table object's open function (its name is t.open_fn), and the control
    function (t.ctl_fn): the request handed to the core that owns the map."""
    return [f"static inline int {t.open_fn}(struct ofl_map **m, const struct ofl_args *a, "
            "const char *name)", "{",
            f"    int rc = ofl_map_open_named(m, sizeof(struct {t.name}_key), "
            f"sizeof({t.map_value}), {t.map_entries}u, a, name);",
            f'    if (rc == 0) {{ (*m)->layout = "{layout(t)}"; '
            f"(*m)->ctl_type = '{value_type(t)}'; }}",
            "    return rc;", "}",
            f"static inline void {t.ctl_fn}(struct ofl_map *m, const uint8_t *msg, size_t len, "
            "struct ofl_ctl_out *out, struct ofl_ctl_reply *r)", "{",
            "    ofl_map_ctl_call_out(m, msg, len, out, r);", "}"]


def stage_size(t: SharedTable) -> str:
    """The C expression of the longest control request or reply payload of map `t`:
    its channel's staging buffers (runtime ctl_stage.h, map_ctl.h)."""
    return f"OFL_MAP_CTL_STAGE(sizeof(struct {t.name}_key), sizeof({t.map_value}))"
