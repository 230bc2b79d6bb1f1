"""A running program's shared hash map through its control channel (runtime
map_ctl.h): keys and values typed by the map's layout, which the device gives
("FIELD:TYPE,...;VALUETYPE"; a record value's VALUETYPE is its own "FIELD:TYPE,...").
A key is written field=value, every field once, comma separated
(`src=10.0.0.1,dst=10.0.0.2,proto=6`): an integer field takes a number (0x..
too), an `ipv4` / `ipv6` field an address, a `mac` field 02:00:00:aa:bb:cc; a value is an
integer of the map's value type, or for a record value its fields written as a key's
are (`packets=3,bytes=1500,...`, every field once). Keys and records print the same
way (offlow/mapreport.py's text); the Python calls give a record as a dict.

    m = attach(WINDOW).tables["flows"].map()
    m.set("src=10.0.0.1,dst=10.0.0.2,proto=6", 7); m.get(...); m.delete(...); m.items()
"""

from __future__ import annotations

import errno
import ipaddress
import string
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from offlow.ctlwire import REPLY_MAX
from offlow.errors import ControlError, OfflowError
from offlow.ir.types import ADDRESS_TYPES, KEY_TYPES, MAP_TYPES
from offlow.mapreport import fields as read_fields
from offlow.mapreport import number

HEX = set(string.hexdigits)


class Requester(Protocol):
    """What sends one control message and returns the reply's payload (control.Table)."""

    name: str

    def request(self, msg: bytes, timeout: float = 5.0) -> bytes: ...


# A record value, as the Python calls take and give it: each field's number or address.
Record = dict[str, int | str]


@dataclass(frozen=True)
class Layout:
    """A map's key fields ((name, type) in order) and value type; a record value's
    fields in `record` (its `value` then "record")."""

    fields: tuple[tuple[str, str], ...]
    value: str
    record: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def parse(text: str) -> Layout:
        """The layout text a device gives, or a clear error (a device of another
        offlow)."""
        try:
            key, value = text.split(";")
            fields = tuple((f, t) for f, t in (x.split(":") for x in key.split(",")))
            record = (tuple((f, t) for f, t in (x.split(":") for x in value.split(",")))
                      if ":" in value else ())
        except ValueError:
            raise OfflowError(f"a map layout `{text}` is not FIELD:TYPE,...;VALUE") from None
        if (not record and value not in MAP_TYPES
                or not all(t in KEY_TYPES for _, t in fields + record)):
            raise OfflowError(f"a map layout `{text}` names a type offlow does not know")
        return Layout(fields, "record" if record else value, record)

    @property
    def key_size(self) -> int:
        return sum(KEY_TYPES[t] for _, t in self.fields)


def _int(text: str, ctype: str, what: str) -> bytes:
    """`text` as an integer of `ctype`'s bytes (little-endian), or a clear error."""
    size, signed = KEY_TYPES[ctype], ctype.startswith("int")
    try:
        n = int(text, 0)
    except ValueError:
        raise OfflowError(f"{what} `{text}` is not an integer ({ctype})") from None
    bits = 8 * size - signed
    lo, hi = (-(1 << bits), (1 << bits) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= n <= hi:
        raise OfflowError(f"{what} {n} does not fit {ctype} ({lo}..{hi})")
    return n.to_bytes(size, "little", signed=signed)


def _address(text: str, ftype: str, what: str) -> bytes:
    """An address field's bytes as on the wire, or a clear error."""
    try:
        if ftype == "mac":
            parts = text.split(":")
            if len(parts) != 6 or not all(len(x) == 2 and set(x) <= HEX for x in parts):
                raise ValueError
            return bytes(int(x, 16) for x in parts)
        addr = ipaddress.ip_address(text)
        if len(addr.packed) != ADDRESS_TYPES[ftype]:
            raise ValueError
        return addr.packed
    except ValueError:
        example = {"ipv4": "192.0.2.1", "ipv6": "2001:db8::1", "mac": "02:00:00:aa:bb:cc"}
        article = "a" if ftype == "mac" else "an"
        raise OfflowError(f"{what} `{text}` is not {article} {ftype} address such as "
                          f"{example[ftype]}") from None


def _pack(fields: tuple[tuple[str, str], ...], text: str, what: str) -> bytes:
    """The packed `fields` of `text` (FIELD=VALUE,... every field once), or a clear
    error naming `what` (key, value)."""
    names = [f for f, _ in fields]
    given: dict[str, str] = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq:
            raise OfflowError(f"{what} `{text}`: want FIELD=VALUE,... with fields "
                              f"{', '.join(names)}")
        if name not in names:
            whose = "the map" if what == "key" else "the map's record value"
            raise OfflowError(f"{what} `{text}`: {whose} has no field `{name}`; "
                              f"fields: {', '.join(names)}")
        if name in given:
            raise OfflowError(f"{what} `{text}`: field `{name}` given twice")
        given[name] = value.strip()
    missing = [n for n in names if n not in given]
    if missing:
        raise OfflowError(f"{what} `{text}`: no value for {', '.join(missing)}")
    return b"".join(_address(given[f], t, f"field `{f}`") if t in ADDRESS_TYPES
                    else _int(given[f], t, f"field `{f}`") for f, t in fields)


def _text(fields: tuple[tuple[str, str], ...], raw: bytes) -> str:
    """Packed `fields` as FIELD=VALUE,... (the form _pack reads)."""
    return ",".join(f"{f}={shown}" for (f, _), (_, shown) in zip(
        fields, read_fields(raw, fields), strict=True))


def parse_key(layout: Layout, text: str) -> bytes:
    """The packed key of `text` (FIELD=VALUE,... every field once), or a clear error."""
    return _pack(layout.fields, text, "key")


def format_key(layout: Layout, raw: bytes) -> str:
    """A packed key as FIELD=VALUE,... (the form parse_key reads)."""
    return _text(layout.fields, raw)


def parse_value(layout: Layout, text: str) -> bytes:
    """A value's bytes (a record's: FIELD=VALUE,... every field once), or a clear
    error."""
    if layout.record:
        return _pack(layout.record, text, "value")
    return _int(text, layout.value, "value")


def format_value(layout: Layout, value: int | Record) -> str:
    """A value as `offlow ctl` prints it: the number, or a record's FIELD=VALUE,...
    (the form parse_value reads)."""
    if isinstance(value, dict):
        return ",".join(f"{f}={value[f]}" for f, _ in layout.record)
    return str(value)


def read_value(layout: Layout, raw: bytes) -> int | Record:
    """A value's bytes as a number, or a record as {field: number or address text}."""
    if layout.record:
        return {f: shown for (f, _), (_, shown) in zip(
            layout.record, read_fields(raw, layout.record), strict=True)}
    return number(raw, layout.value)


class MapTable:
    """One shared hash map of a running program, through its control channel."""

    def __init__(self, table: Requester) -> None:
        self._t = table
        text, at = b"", 0
        while True:  # the layout text, a reply's worth at a time
            part = table.request(b"k" + struct.pack("<H", at))
            text += part
            at += len(part)
            if len(part) < REPLY_MAX:
                break
        self.layout = Layout.parse(text.decode())

    def key(self, text: str) -> bytes:
        return parse_key(self.layout, text)

    def get(self, key: str) -> int | Record | None:
        """The value under `key` (a record as a dict), or None when the map lacks it."""
        try:
            raw = self._t.request(b"g" + self.key(key))
        except ControlError as e:
            if e.errno == errno.ENOENT:
                return None
            raise
        return read_value(self.layout, raw)

    def set(self, key: str, value: int | str | Record) -> None:
        """Store `value` under `key` (insert or replace; a record as FIELD=VALUE,... or a
        dict); a full map refuses a new key."""
        text = format_value(self.layout, value) if isinstance(value, dict) else str(value)
        self._t.request(b"s" + self.key(key) + parse_value(self.layout, text))

    def delete(self, key: str) -> None:
        """Remove `key` (ControlError, errno ENOENT, when the map lacks it)."""
        self._t.request(b"d" + self.key(key))

    def items(self, limit: int | None = None) -> Iterator[tuple[str, int | Record]]:
        """The keys and values, in the map's slot order (a walk while the core runs:
        each entry whole, the walk as a whole not one instant's)."""
        slot, n, ks = 0, 0, self.layout.key_size
        while limit is None or n < limit:
            try:
                raw = self._t.request(b"n" + struct.pack("<I", slot))
            except ControlError as e:
                if e.errno == errno.ENOENT:
                    return
                raise
            (at,) = struct.unpack_from("<I", raw)
            yield format_key(self.layout, raw[4:4 + ks]), read_value(self.layout, raw[4 + ks:])
            slot, n = at + 1, n + 1
