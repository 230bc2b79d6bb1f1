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
tests/test_opt_keys.py holds these declarations to the keys the C code asks for.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
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
    for opt in user:
        name, _, rest = opt.partition(".")
        key = rest.partition("=")[0]
        r = reads.get(name)
        if r is not None and key not in r.keys:
            raise OfflowError(refusal(opt, name, key, r))
