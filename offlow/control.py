"""The control plane: read and change the tables of a running program while its
packets flow, over each table's control channel ``ctl.NAME`` (served by the process
that holds the table; message layout in runtime/core/include/offlow/ctl.h).

    with offlow.session.attach(WINDOW) as a:
        a.tables["counts"][3]                         # an array element
        a.tables["counts"][3] = 7
        a.tables["counts"][-1], len(a.tables["counts"])  # as a list: the last, the length
        a.tables["routes4"].add("10.0.0.0/8", 5)      # a route table
        a.tables["routes4"].delete("10.0.0.0/8")

        a.tables["routes6"].apply([RouteChange("add", "2001:db8::/32", 7), ...])

`offlow ctl WINDOW table NAME get|set INDEX [VALUE]` and `offlow ctl WINDOW route
add|del PREFIX [NEXTHOP]` (or `--file F`, many routes: IPv6 in one batch) do the same
from a shell; a hash map: `Table.map()` and `offlow ctl WINDOW map NAME ...`
(offlow/mapctl.py). A request the table refuses (an
index out of range, a value of the wrong size, a route table out of groups, a route
it does not hold) raises ControlError with the reason; the table is unchanged."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from offlow.channels import Channel, Region
from offlow.ctlwire import MSG_MAX, PART_MAX, READ, STAGE_BEGIN, STAGE_MAX, STAGE_PART, STAGE_RUN
from offlow.errors import ControlError, OfflowError  # (ControlError: users import it from here too)
from offlow.ir.graph import CTL_CHANNEL_PREFIX

if TYPE_CHECKING:
    from offlow.mapctl import MapTable

KINDS = {1: "array", 2: "lpm4", 3: "lpm6", 4: "map"}
ROUTE_HOP_MAX = 0x7FFF
# struct ofl_ctl_info: kind, type, size, pad, length, updates
_INFO = struct.Struct("<BBHIQQ")
_LIVE = struct.Struct("<QQ")  # after an lpm6 table's info: lookups, lookups during updates
_MAP_MORE = struct.Struct("<IIQ")  # after a map's info: entries, key size, full
_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}
_FLOAT_FORMATS = {4: "f", 8: "d"}


class TableIndexError(OfflowError, IndexError):
    """An index outside an array table: an OfflowError (the CLI says it in one line) and
    an IndexError, as a list's (so `for v in table` and `list(table)` end there)."""


@dataclass(frozen=True)
class Info:
    """What a table is: its kind ("array", "lpm4", "lpm6"), an array's element type
    ('u', 'i', 'f', 'b') and size, its length (elements, or routes) and the changes made
    through control messages since it started (`updates`)."""

    kind: str
    type: str
    size: int
    length: int
    updates: int
    # An IPv6 route table (updated by rebuild and swap) also counts the lookups (batches)
    # begun on it, and those begun while an update's rebuild ran.
    lookups: int = 0
    lookups_during_updates: int = 0
    # A hash map: the keys it may hold, and the updates refused because it was full.
    entries: int = 0
    full: int = 0

    def text(self) -> str:
        """One line for `offlow ctl ... info`: the fields this kind of table has."""
        shown = ["kind", "type", "size", "length", "updates"]
        shown += (["lookups", "lookups_during_updates"] if self.kind == "lpm6" else
                  ["entries", "full"] if self.kind == "map" else [])
        return ", ".join(f"{name} {getattr(self, name)}" for name in shown)


def parse_prefix(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """An IPv4 or IPv6 prefix (host bits must be zero), or a clear error."""
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError as e:
        raise OfflowError(f"`{text}` is not a prefix such as 10.0.0.0/8 or 2001:db8::/32 "
                          f"({e})") from None


def route_message(op: str, prefix: str, hop: int | None = None) -> bytes:
    """The control message that adds (op "add", with `hop`) or deletes ("del") a
    route (ctl.h), or a clear error for a bad prefix or next hop."""
    net = parse_prefix(prefix)
    addr = net.network_address.packed.ljust(16, b"\0")
    if op == "del":
        return b"d" + bytes([net.prefixlen]) + addr
    if op != "add":
        raise OfflowError(f"route `{op}`: want add or del")
    if hop is None or not 1 <= hop <= ROUTE_HOP_MAX:
        raise OfflowError(f"next hop {hop}: want 1..{ROUTE_HOP_MAX}")
    return b"a" + bytes([net.prefixlen]) + struct.pack("<H", hop) + addr


# How long a table's first request waits for its device to serve the control channel
# (a remote device starts on its machine after the run's start; a nic one at once).
UP_WAIT_S = 60.0


class Table:
    """One table of a running program, through its control channel."""

    def __init__(self, name: str, channel: Callable[[], Channel],
                 up_wait: float = UP_WAIT_S) -> None:
        self.name = name
        self._channel = channel
        self._info: Info | None = None
        self._up_wait = up_wait
        self._up = False

    def _served(self) -> Channel:
        """The control channel, once its device serves it (waited for once, at most
        `up_wait` s: then a clear error, not a request's timeout)."""
        ch = self._channel()
        if not self._up:
            if not ch.wait_peer(self._up_wait):
                raise OfflowError(f"table `{self.name}`: its device is not up yet (it has "
                                  f"not served the table's control channel within "
                                  f"{self._up_wait:g} s: a remote device still starting on "
                                  "its machine, or one whose serve-device is not running?)")
            self._up = True
        return ch

    def request(self, msg: bytes, timeout: float = 5.0) -> bytes:
        """Send one control request and return the reply's payload, or raise
        ControlError with the table's reason. The first waits for the table's device
        to be up (UP_WAIT_S). A request longer than one message is staged in parts and
        then run whole, and a reply longer than one is read back in parts (ctl.h: 'S',
        'P', 'X', 'R'), each message within `timeout`."""
        ch = self._served()
        if len(msg) > MSG_MAX:
            if len(msg) > STAGE_MAX:
                raise OfflowError(f"table `{self.name}`: a request of {len(msg)} bytes; "
                                  f"one takes at most {STAGE_MAX}")
            self._exchange(ch, STAGE_BEGIN + struct.pack("<I", len(msg)), timeout)
            for at in range(0, len(msg), PART_MAX):
                part = msg[at:at + PART_MAX]
                self._exchange(ch, STAGE_PART + struct.pack("<I", at) + part, timeout)
            msg = STAGE_RUN
        status, payload = self._exchange(ch, msg, timeout)
        if status == 0:
            return payload
        kept = b""  # a reply too long for one message: `status` bytes, kept whole
        while len(kept) < status:
            _, part = self._exchange(ch, READ + struct.pack("<I", len(kept)), timeout)
            if not part:
                raise OfflowError(f"table `{self.name}`: an empty part of a reply of "
                                  f"{status} bytes at {len(kept)}")
            kept += part
        return kept[:status]

    def _exchange(self, ch: Channel, msg: bytes, timeout: float) -> tuple[int, bytes]:
        """One message and its reply: the reply's status (0, or a positive length of a
        reply kept to read in parts) and payload; ControlError for a refusal."""
        reply = ch.request(msg, timeout)
        if len(reply) < 4:
            raise OfflowError(f"table `{self.name}`: a reply of {len(reply)} bytes")
        (status,) = struct.unpack_from("<i", reply)
        if status < 0:
            raise ControlError(f"table `{self.name}`", -status,
                               reply[4:].decode(errors="replace"))
        return status, reply[4:]

    def info(self) -> Info:
        """The table's kind, element and counts (asked each time: `updates` moves)."""
        reply = self.request(b"i")
        kind, typ, size, _, length, updates = _INFO.unpack(reply[:_INFO.size])
        base = Info(KINDS.get(kind, str(kind)), chr(typ), size, length, updates)
        more = reply[_INFO.size:_INFO.size + _LIVE.size]
        if len(more) == _LIVE.size and base.kind == "lpm6":
            base = replace(base, **dict(zip(("lookups", "lookups_during_updates"),
                                            _LIVE.unpack(more), strict=True)))
        elif len(more) == _MAP_MORE.size and base.kind == "map":
            entries, _, full = _MAP_MORE.unpack(more)
            base = replace(base, entries=entries, full=full)
        self._info = base
        return self._info

    def _array(self) -> Info:
        info = self._info or self.info()
        if info.kind == "map":
            raise OfflowError(f"table `{self.name}` is a hash map: use `offlow ctl WINDOW map "
                              f"{self.name} ...` (Table.map()), not an index")
        if info.kind != "array":
            raise OfflowError(f"table `{self.name}` is an {info.kind} route table: it takes "
                              "add and delete, not get and set")
        return info

    def map(self) -> MapTable:
        """The table as a shared hash map (get, set, delete, items by typed key:
        offlow/mapctl.py), or a clear error for another kind."""
        from offlow.mapctl import MapTable
        info = self._info or self.info()
        if info.kind != "map":
            what = "an array" if info.kind == "array" else f"an {info.kind} route table"
            raise OfflowError(f"table `{self.name}` is {what}, not a hash map")
        return MapTable(self)

    def _format(self, info: Info) -> str | None:
        if info.type == "u":
            return _INT_FORMATS.get(info.size, "").upper() or None
        if info.type == "i":
            return _INT_FORMATS.get(info.size)
        return _FLOAT_FORMATS.get(info.size) if info.type == "f" else None

    def __len__(self) -> int:
        """The table's length, asked now (info().length: an array's elements, a route
        table's routes, a map's keys)."""
        return self.info().length

    def __getitem__(self, index: int) -> int | float | bytes:
        """Element `index` of an array table, read now; a negative index counts from the
        end, as a list's (-1: the last)."""
        _int_index(self.name, index)
        info = self._array()
        raw = self.request(b"g" + struct.pack("<I", self._index(index, info)))
        fmt = self._format(info)
        return struct.unpack("<" + fmt, raw)[0] if fmt else raw

    def __setitem__(self, index: int, value: int | float | bytes) -> None:
        """Set element `index` of an array table (negative: from the end) to `value`."""
        _int_index(self.name, index)
        info = self._array()
        fmt = self._format(info)
        if isinstance(value, (bytes, bytearray)):
            data = bytes(value)
        elif fmt:
            try:
                data = struct.pack("<" + fmt, value)
            except struct.error as e:
                raise OfflowError(f"table `{self.name}`: {value!r} does not fit its "
                                  f"{info.size}-byte elements ({e})") from None
        else:
            raise OfflowError(f"table `{self.name}`: its {info.size}-byte elements take bytes")
        self.request(b"s" + struct.pack("<I", self._index(index, info)) + data)

    def _index(self, index: int, info: Info) -> int:
        """The element `index` names (a negative one counts from the end), or
        TableIndexError with the range."""
        n = info.length
        if not -n <= index < n:
            where = (f"outside 0..{n - 1} (or -{n}..-1 from the end)" if n
                     else "not there: the table has no elements")
            raise TableIndexError(f"table `{self.name}`: index {index} is {where}")
        return index % n

    def add(self, prefix: str, hop: int) -> None:
        """Add (or replace) route PREFIX -> next hop `hop` in a route table."""
        self.request(self._route("add", prefix, hop))

    def delete(self, prefix: str) -> None:
        """Delete route PREFIX from a route table."""
        self.request(self._route("del", prefix))

    def apply(self, changes: Sequence[RouteChange]) -> int:
        """Apply route changes in order; return how many were applied. An IPv6 table
        takes them as one batch (one message each, then one rebuild and swap): all of
        them, or, one refused, none. An IPv4 table changes in place, each at once: a
        refusal stops there (the error says how many were applied before it). Every
        prefix and hop is checked before anything is sent."""
        msgs = [self._route(c.op, c.prefix, c.hop) for c in changes]
        if (self._info or self.info()).kind == "lpm4":
            for k, m in enumerate(msgs):
                try:
                    self.request(m)
                except ControlError as e:
                    raise ControlError(f"table `{self.name}`", e.errno,
                                       f"{e.reason} ({changes[k].op} {changes[k].prefix}; "
                                       f"the {k} before it were applied)") from None
            return len(msgs)
        self.request(b"b")
        for m in msgs:  # staged: 'A' / 'D', as 'a' / 'd'
            self.request(m[:1].upper() + m[1:])
        (applied,) = struct.unpack_from("<Q", self.request(b"c", timeout=600.0))
        return applied

    def _route(self, op: str, prefix: str, hop: int | None = None) -> bytes:
        """The message, after checking that the table is a route table of the prefix's
        family (the device reads an IPv4 address from the first 4 bytes of any)."""
        msg = route_message(op, prefix, hop)
        info = self._info or self.info()
        want = "lpm4" if parse_prefix(prefix).version == 4 else "lpm6"
        if info.kind != want:
            what = ("an array" if info.kind == "array" else "a hash map" if info.kind == "map"
                    else f"an {info.kind} route table")
            raise OfflowError(f"table `{self.name}` is {what}: {prefix} needs an {want} "
                              "route table")
        return msg


def _int_index(table: str, index: object) -> None:
    """TypeError unless `index` is an int (not a bool), before anything is asked: a slice
    is refused, since each element is a request of its own (a slice's values would not
    be one moment's)."""
    if not isinstance(index, int) or isinstance(index, bool):
        more = (": each element is a request of its own, so read a range one index at a "
                "time" if isinstance(index, slice) else "")
        raise TypeError(f"table `{table}`: an index is an int (one element at a time), not "
                        f"{type(index).__name__}{more}")


@dataclass(frozen=True)
class RouteChange:
    """A route add (with its next hop) or delete."""

    op: str  # "add" or "del"
    prefix: str
    hop: int | None = None


def read_route_file(path: Path, op: str) -> list[RouteChange]:
    """The routes of a file (a line each: PREFIX and, for add, NEXTHOP; a hop on a
    delete's line is ignored, so one file adds and deletes; '#' comments, blank lines)
    as changes `op`, or a clear error naming the line."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise OfflowError(f"cannot read routes from {path}: {e}") from None
    out = []
    for n, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) > 2 or (op == "add" and len(words) != 2):
            raise OfflowError(f"{path}:{n}: want PREFIX{' NEXTHOP' if op == 'add' else ''}, "
                              f"not `{line.strip()}`")
        try:
            hop = int(words[1], 0) if op == "add" else None
        except ValueError:
            raise OfflowError(f"{path}:{n}: next hop `{words[1]}` is not a number") from None
        try:
            route_message(op, words[0], hop)
        except OfflowError as e:
            raise OfflowError(f"{path}:{n}: {e}") from None
        out.append(RouteChange(op, words[0], hop))
    return out


def region_tables(region: Callable[[], Region]) -> Tables:
    """The tables of the program whose channel region `region()` gives."""
    prefix = CTL_CHANNEL_PREFIX
    names = [n[len(prefix):] for n in region().names() if n.startswith(prefix)]
    return Tables(names, lambda n: region().channel(prefix + n))


def parse_value(info: Info, text: str) -> int | float | bytes:
    """A value typed on a command line for an element of `info`: an integer (0x.. too),
    a float, or hex bytes for elements of another type."""
    try:
        if info.type == "f":
            return float(text)
        if info.type in "ui":
            return int(text, 0)
        return bytes.fromhex(text)
    except ValueError:
        kind = {"f": "floating", "u": "unsigned", "i": "signed"}.get(info.type, "hex bytes")
        raise OfflowError(f"`{text}` is not a value for {info.size}-byte {kind} "
                          "elements") from None


class Tables(Mapping[str, Table]):
    """The tables of a running program by name (those with a control channel)."""

    def __init__(self, names: list[str], channel: Callable[[str], Channel]) -> None:
        self._tables = {n: Table(n, lambda n=n: channel(n)) for n in names}

    def __getitem__(self, name: str) -> Table:
        if name not in self._tables:
            raise OfflowError(f"the program has no table `{name}` with a control channel; "
                              f"tables: {', '.join(self._tables) or 'none'} (`offlow explain` "
                              "lists the channels, and says why a table has none)")
        return self._tables[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def route_table(self, prefix: str, name: str | None = None) -> Table:
        """The route table for PREFIX's family (IPv4: lpm4, IPv6: lpm6), or `name`."""
        if name is not None:
            return self[name]
        want = "lpm4" if parse_prefix(prefix).version == 4 else "lpm6"
        found = [t for t in self._tables.values() if t.info().kind == want]
        family = "IPv4" if want == "lpm4" else "IPv6"
        if not found:
            raise OfflowError(f"the program has no {family} route table ({want}) for "
                              f"{prefix}; its tables: {', '.join(self._tables) or 'none'}")
        if len(found) > 1:
            raise OfflowError(f"the program has {len(found)} {family} route tables "
                              f"({', '.join(t.name for t in found)}): name one with --table")
        return found[0]
