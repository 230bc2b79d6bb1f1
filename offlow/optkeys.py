"""The option keys (`offlow run --opt NAME.KEY=VALUE`) that each source, sink and table
object of a program reads, and the refusal of a user's key that the object does not
read, before any process starts (docs/design.md, docs/elements.md).

The keys are those the object's C code asks for (ofl_args_get). A source's and a sink's
depend on its kind: the run's options choose it (--input: pcap, none: synth, --udp:
udp, --port: the port's kind), as does the user's own `--opt NAME.kind=`, the last one
given winning as in the processes. So a key that only another kind reads (`path` of a
synthetic source) is refused here too, as the device process, which knows the kind,
refuses it (gen.h's ofl_args_check_unread: the backstop, for a user's table that
declares no keys and a kind whose keys are not declared). Keys that offlow gives itself
(ofl_args_get_own: a store's tcp_fd) are no user's and are not listed.
A source's or sink's kind itself is judged here too: one the object's process has not
(gen.c's ofl_source_open and ofl_sink_open: the core's, those the program's tables add,
the port libraries the run links; an xdp device's process only the core's) is refused
before anything is built, naming the kinds it has.
tests/test_opt_keys.py holds these declarations to the keys and the kinds the C code
takes.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from offlow.errors import OfflowError
from offlow.ir import Graph
from offlow.ports import LIBRARY_KINDS

# gen.c's ofl_source_open: every kind's keys, then each kind's own
SOURCE_KEYS = ("advance_ts", "count", "duration_ns", "kind", "loops", "rate", "seed")
SOURCE_KIND_KEYS: Mapping[str, tuple[str, ...]] = {
    "synth": ("prefixes", "sizes"), "pcap": ("path",), "udp": (), "afpacket": ("port",)}
SOURCE_DEFAULT_KIND = "synth"
# an xdp source with --iface reads its duration only (runtime/tools/xdp_run.c)
IFACE_SOURCE_KEYS = ("duration_ns",)
# gen.c's ofl_sink_open: kind=, then a capture's path (udp's too: read, unused) or a
# port's (port_sink_open; a library's sink may read more: PortKind.keys)
SINK_KEYS = ("kind",)
SINK_KIND_KEYS: Mapping[str, tuple[str, ...]] = {
    "": ("path",), "pcap": ("path",), "udp": ("path",), "afpacket": ("port",)}
# the kinds the core's ofl_source_open and ofl_sink_open know (a sink given no kind=
# counts, or writes its path); the program's tables and the linked port libraries add
# theirs (struct ofl_src_kind), in every process but an xdp device's (xdp_run.c)
SOURCE_CORE_KINDS = ("pcap", "synth", "udp", "afpacket")
SINK_CORE_KINDS = ("pcap", "udp", "afpacket")


@dataclass(frozen=True)
class Reads:
    """The keys one object reads: `what` it is (source, sink or table), what chose its
    keys (`mode`: `kind=synth`, or "" for a table), and for a source or sink the keys
    that other kinds of it read, as (key, modes) pairs (for the refusal's hint)."""

    what: str
    mode: str
    keys: tuple[str, ...]
    elsewhere: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _kinds(g: Graph, sinks: bool) -> dict[str, tuple[str, ...]]:
    """Kind -> the keys its sources (or sinks) read, for every kind with declared keys:
    the core's, the port libraries', and those the program's tables add."""
    if sinks:
        return {**{k: SINK_KEYS + v for k, v in SINK_KIND_KEYS.items()},
                **{k: (*SINK_KEYS, "port", *p.keys) for k, p in LIBRARY_KINDS.items()}}
    added = {k: keys for t in g.shared for k, keys in t.src_kind_keys}
    return {k: SOURCE_KEYS + v
            for k, v in {**SOURCE_KIND_KEYS, **{k: p.keys for k, p in LIBRARY_KINDS.items()},
                         **added}.items()}


def given_kinds(options: Iterable[str]) -> dict[str, str]:
    """Object name -> its kind as the `NAME.kind=KIND` options in `options` (the runner's
    and the user's, in the order the processes read them) leave it: the last wins."""
    out: dict[str, str] = {}
    for opt in options:
        name, dot, rest = opt.partition(".")
        key, eq, value = rest.partition("=")
        if dot and eq and key == "kind":
            out[name] = value
    return out


def object_reads(g: Graph, options: Iterable[str],
                 iface_devices: frozenset[str] = frozenset()) -> dict[str, Reads]:
    """Name -> what it reads, for each source, sink and table object of `g` whose keys
    are known: `options` are every NAME.KEY=VALUE the processes get, the runner's and
    the user's, in order (they set the kinds); `iface_devices`, the xdp devices that
    take an interface's traffic (--iface), whose sources read their duration only.
    A table that declares no keys, or a source or sink of a kind without declared keys,
    is not in it: its device process refuses what it does not read."""
    kinds = given_kinds(options)
    out: dict[str, Reads] = {}
    for side, dflt in (("source", SOURCE_DEFAULT_KIND), ("sink", "")):
        table = _kinds(g, side == "sink")
        for n in g.nodes:
            if n.kind != side:
                continue
            kind = kinds.get(n.name, dflt)
            if side == "source" and n.segment and iface_devices & set(
                    g.segment(n.segment).devices):
                out[n.name] = Reads(side, "on xdp with --iface", IFACE_SOURCE_KEYS)
            elif kind in table:
                out[n.name] = Reads(side, _label(kind), table[kind], tuple(
                    (key, tuple(_label(k) for k, ks in table.items() if key in ks))
                    for key in sorted({key for ks in table.values() for key in ks})))
    for t in g.shared:
        if t.is_object and not t.is_map and t.keys:
            out[t.name] = Reads("table", "", t.keys)
    return out


@dataclass(frozen=True)
class Kinds:
    """The kinds a source's or sink's process takes for it (`what`: source or sink),
    and whether that process is an xdp device's (which has the core's kinds only)."""

    what: str
    kinds: tuple[str, ...]
    on_xdp: bool = False


def object_kinds(g: Graph, linked: Iterable[str] = (),
                 xdp_devices: frozenset[str] = frozenset(),
                 iface_devices: frozenset[str] = frozenset()) -> dict[str, Kinds]:
    """Name -> the kinds its process takes, for each source and sink of `g`: the core's,
    for a source the kinds the program's tables add, and the port libraries' in `linked`
    (those the run's --port specs link; a sink only those with a sink); a process on one
    of `xdp_devices` has the core's only. A source on one of `iface_devices` (xdp with
    --iface) reads no kind at all and is not in it (its key check refuses `kind`)."""
    added = tuple(k for t in g.shared for k, _ in t.src_kinds)
    libs = tuple(k for k in dict.fromkeys(linked) if k in LIBRARY_KINDS)
    out: dict[str, Kinds] = {}
    for n in g.nodes:
        if n.kind not in ("source", "sink"):
            continue
        devices = set(g.segment(n.segment).devices) if n.segment else set()
        if n.kind == "source" and devices & iface_devices:
            continue
        xdp = bool(devices & xdp_devices)
        core = SOURCE_CORE_KINDS if n.kind == "source" else SINK_CORE_KINDS
        more = () if xdp else (*(added if n.kind == "source" else ()), *libs)
        out[n.name] = Kinds(n.kind, tuple(dict.fromkeys((*core, *more))), xdp)
    return out


def kind_refusal(opt: str, name: str, kind: str, k: Kinds) -> str:
    """The one error for user option `opt` (NAME.kind=KIND), a kind the object's process
    has not: the object, the kind, a close match and the kinds it has (and, for a port
    library's kind, how to have it)."""
    kinds = sorted(k.kinds)
    close = difflib.get_close_matches(kind, kinds, n=1, cutoff=0.6)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    where = " on xdp" if k.on_xdp else ""
    more = ""
    if kind in LIBRARY_KINDS and k.on_xdp:
        more = f"; `{kind}` is a port library's kind, which an xdp device's process has not"
    elif kind in LIBRARY_KINDS:
        more = f"; `{kind}` is a port's kind: give --port {name}={kind}:ARGS"
    return (f"--opt `{opt}`: {k.what} `{name}`{where} has no kind `{kind}`{hint}; its kinds: "
            f"{', '.join(kinds)}{more}")


def check_kind(user: Sequence[str], kinds: Mapping[str, Kinds]) -> None:
    """Refuse the first of the user's options `user` that gives a source or sink in
    `kinds` a kind its process has not (OfflowError: kind_refusal)."""
    for opt, name, key, value in _split(user):
        k = kinds.get(name)
        if k is not None and key == "kind" and value not in k.kinds:
            raise OfflowError(kind_refusal(opt, name, value, k))


def _split(user: Sequence[str]) -> Iterator[tuple[str, str, str, str]]:
    """Each of the user's options NAME.KEY=VALUE as (option, NAME, KEY, VALUE)."""
    for opt in user:
        name, _, rest = opt.partition(".")
        key, _, value = rest.partition("=")
        yield opt, name, key, value


def _label(kind: str) -> str:
    """How a message names a source's or sink's kind."""
    return f"kind={kind}" if kind else "no kind="


def refusal(opt: str, name: str, key: str, r: Reads) -> str:
    """The one error for user option `opt` (NAME.KEY=VALUE), whose object reads no `key`:
    the object, the key, a close match, the keys it reads and the kinds that read it."""
    keys = sorted(r.keys)
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.7)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    mode = f" ({r.mode})" if r.mode else ""
    other = dict(r.elsewhere).get(key, ())
    more = (f"; `{key}` is read by a {r.what} of {' or '.join(other)}"
            if other and not close else "")
    return (f"--opt `{opt}`: {r.what} `{name}`{mode} reads no option `{key}`{hint}; it "
            f"reads {', '.join(keys) or 'none'}{more}")


def check(user: Sequence[str], reads: Mapping[str, Reads]) -> None:
    """Refuse the first of the user's options `user` (NAME.KEY=VALUE) whose object is in
    `reads` and does not read its key (OfflowError: refusal)."""
    for opt, name, key, _ in _split(user):
        r = reads.get(name)
        if r is not None and key not in r.keys:
            raise OfflowError(refusal(opt, name, key, r))
