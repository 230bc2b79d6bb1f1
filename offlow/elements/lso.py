"""Segmentation offload (the LSO seed): the device cuts each large send a host program
posted through a send port (offlow.lso.port) into TCP segments or UDP fragments of at
most the link's MTU (runtime/lib/lso/include/offlow/lso.h, lso_nic.h)."""

from __future__ import annotations

from offlow.dsl import Element, Port, Shared, Table

# The counters of Segment's `kinds` table, by index: TCP then UDP, each per message kind
# (lso.h's order).
KIND_SLOTS = tuple(f"{p}_{k}" for p in ("tcp", "udp") for k in ("ssm", "bom", "com", "eom",
                                                                   "zero"))


def send_port(name: str, mtu: int = 1500, move: str = "pio", dma_min: int = 1024) -> Table:
    """The device's side of a send port (lso_nic.h): run-time options NAME.path= (the
    port's file: a host program makes it, offlow.lso.port.SendPort), NAME.mtu= (the link's
    IP MTU), NAME.move=pio|dma|auto|place (how payloads leave the send buffer: the core,
    the copy engine, the engine for payloads of at least NAME.dma_min= bytes, or not at
    all: each packet's headers written in place before its payload), NAME.dma_cpu= (the
    engine thread's CPU)."""
    return Table(name, "struct ofl_lso_nic", "ofl_lso_nic_open_opts", "ofl_lso_nic_close",
                 options=(("path", ""), ("mtu", str(mtu)), ("move", move),
                          ("dma_min", str(dma_min))),
                 source="the device side of a send port (lso_nic.c): its send buffer and "
                        "completion FIFO, mapped from the port's file (path=)",
                 includes=("offlow/lso_nic.h",), src_kinds=(("lso", "ofl_lso_src_open_opts"),),
                 keys=("dma_cpu", "dma_min", "move", "mtu", "path"),
                 src_kind_keys=(("lso", ("port",)),))


def kind_counts(name: str) -> Shared:
    """Packets per protocol and message kind, for Segment (KIND_SLOTS says which)."""
    return Shared(name, "uint64_t", len(KIND_SLOTS))


class Segment(Element):
    """Cuts each large send into packets: its input is a descriptor as a send port's
    source (kind=lso) delivers it (where the payload lies in the port's send buffer, its
    length, the MSS, flags, the header template); its output the TCP segments (sequence
    numbers advanced, IPv4 IDs and lengths set, PSH/FIN only on the last) or UDP fragments
    (IPv4 offsets and MF, IPv6 fragment headers) of the send, checksums computed or left
    for offload as the descriptor says. Each packet is a BOM, COM, EOM or SSM, each with
    its own path through the header template (a send without payload passes through as
    one packet); `kinds` counts them (KIND_SLOTS). Payloads leave the send buffer by PIO
    or DMA, or stay there with the headers written before them (the port's move=); the
    send is completed to the host once its last packet has gone on. A malformed
    descriptor is refused and counted per reason (and completed with it, so the host
    learns why)."""

    inputs = (Port("send", "any"),)
    outputs = (Port("out", "eth"),)
    tables = ("port", "kinds")
    includes = ("offlow/lso_nic.h",)
    drops = {
        "bad_desc": "a descriptor shorter than its fixed part or its template, a template over "
                    "128 bytes, unknown flags",
        "bad_template": "a header template cut short or not Ethernet + IPv4/IPv6 + TCP/UDP "
                        "(extension headers, a fragment, DF on a datagram to fragment)",
        "beyond_buffer": "a payload that runs past the send buffer",
        "bad_mss": "MSS 0, or a packet of MSS bytes longer than the link's MTU or the mtu",
        "too_long": "a TCP send over 64 KB, a UDP datagram over 65,535 bytes",
        "engine": "the copy engine failed while moving the send's payload",
    }
    body = r"""
    switch (ofl_lso_nic_begin(port, pkt->data, pkt->len, OFL_MTU)) {
    case 0: break;
    case OFL_LSO_EDESC: DROP_WHY(bad_desc);
    case OFL_LSO_ETEMPLATE: DROP_WHY(bad_template);
    case OFL_LSO_EBUFFER: DROP_WHY(beyond_buffer);
    case OFL_LSO_EMSS: DROP_WHY(bad_mss);
    default: DROP_WHY(too_long);
    }
    const unsigned base = port->cut.tcp ? 0u : OFL_LSO_KINDS;
    struct ofl_pkt piece;
    unsigned kind;
    int rc;
    while ((rc = ofl_lso_nic_next(port, &piece, &kind)) > 0) {
        kinds[base + kind]++;
        piece.ts_ns = pkt->ts_ns;
        MAKE(out, &piece);
    }
    if (rc < 0)
        DROP_WHY(engine);
    CONSUME();
    """
