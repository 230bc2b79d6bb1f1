"""Packet ports: `offlow run --port [NAME=]KIND:ARGS` puts sources and sinks on a network
device instead of a capture file (docs/ports.md).

Kinds: `dpdk:ARGS` (DPDK's ethdev: EAL virtual-device arguments or a PCI address;
runtime/lib/dpdk, linked only into programs run with it) and `afpacket:IFACE` (a Linux
interface through libpcap's live capture, in the runtime's core). A spec without NAME=
applies to every source and sink of the program; NAME=SPEC to the source or sink NAME
(the router's `rx` and `tx` may then sit on two ports, or in two processes on two
devices of one PMD: net_pcap's rx_pcap on one, tx_pcap on the other).

Everything that can be known before a process starts is checked here: the syntax, the
element names, that the interface exists, that the files a net_pcap device reads are
there."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from offlow.errors import OfflowError


@dataclass(frozen=True)
class PortKind:
    """A kind a runtime library adds: the header that declares it and its C functions
    (gen.h's struct ofl_src_kind)."""

    name: str
    header: str
    source: str
    sink: str
    # the option keys its source and sink open functions read beside every source's and
    # sink's (offlow.optkeys)
    keys: tuple[str, ...] = ()


# The kinds of runtime libraries (the core's afpacket needs no entry).
LIBRARY_KINDS = {"dpdk": PortKind("dpdk", "offlow/dpdk_port.h", "ofl_dpdk_src_open",
                                  "ofl_dpdk_sink_open", keys=("port",))}
KINDS = ("dpdk", "afpacket")
USAGE = "expected [NAME=]dpdk:ARGS or [NAME=]afpacket:IFACE"

_PCI = re.compile(r"^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_VDEV = re.compile(r"^net_[a-z0-9_]+$")
_IFACE = re.compile(r"^[^\s/:\x00]{1,15}$")  # Linux's rule (dev_valid_name), ':' aside
# net_pcap's arguments that name files it reads (it creates those it writes)
_READS = ("rx_pcap",)


@dataclass(frozen=True)
class Port:
    """One source's or sink's port: its kind and what follows `KIND:`."""

    kind: str
    args: str

    @property
    def library(self) -> PortKind | None:
        return LIBRARY_KINDS.get(self.kind)

    def options(self, name: str) -> list[str]:
        """The --opt arguments that put element `name` on this port."""
        return ["--opt", f"{name}.kind={self.kind}", "--opt", f"{name}.port={self.args}"]


def parse(spec: str) -> tuple[str | None, Port]:
    """`[NAME=]KIND:ARGS` -> (NAME or None, Port); a clear error for anything else."""
    head, colon, args = spec.partition(":")
    name = None
    if head not in KINDS and "=" in head:
        name, _, head = head.partition("=")
    if not colon or head not in KINDS:
        raise OfflowError(f"--port `{spec}`: {USAGE}")
    port = Port(head, args)
    _check(spec, port)
    return name, port


def _check(spec: str, p: Port) -> None:
    if p.kind == "afpacket":
        if not _IFACE.match(p.args):
            raise OfflowError(f"--port `{spec}`: `{p.args}` is not an interface name")
        try:
            socket.if_nametoindex(p.args)
        except OSError:
            raise OfflowError(f"--port `{spec}`: no interface `{p.args}` here "
                              "(ip link lists them)") from None
        return
    if not p.args or p.args.startswith("-") or not p.args.isprintable() or " " in p.args:
        raise OfflowError(f"--port `{spec}`: expected DPDK device arguments "
                          "(net_pcap0,rx_pcap=in.pcap,...) or a PCI address (0000:01:00.0)")
    dev, *kvs = p.args.split(",")
    if _PCI.match(dev):
        return
    if not _VDEV.match(dev):
        raise OfflowError(f"--port `{spec}`: `{dev}` is neither a virtual device "
                          "(net_pcap0, net_tap0, net_af_packet0) nor a PCI address")
    for kv in kvs:
        key, eq, value = kv.partition("=")
        if not eq or not key:
            raise OfflowError(f"--port `{spec}`: `{kv}` is not KEY=VALUE")
        if key in _READS and not Path(value).is_file():
            raise OfflowError(f"--port `{spec}`: {key}={value}: no such file")


def assign(specs: Iterable[str], sources: list[str], sinks: list[str]) -> dict[str, Port]:
    """Element name -> its port, from the --port specs (a later spec for an element
    wins over an earlier one; NAME= over none)."""
    out: dict[str, Port] = {}
    named: dict[str, Port] = {}
    for spec in specs:
        name, port = parse(spec)
        if name is None:
            out.update({n: port for n in [*sources, *sinks]})
        elif name in sources or name in sinks:
            named[name] = port
        else:
            have = ", ".join([*sources, *sinks]) or "none"
            raise OfflowError(f"--port `{spec}`: no source or sink named `{name}` "
                              f"(the program has {have})")
    out.update(named)
    return out


def library_kinds(ports: Iterable[Port]) -> tuple[PortKind, ...]:
    """The library kinds that `ports` use, once each (what the build must link)."""
    return tuple(dict.fromkeys(k for p in ports if (k := p.library)))
