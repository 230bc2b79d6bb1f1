"""What a target that runs each packet alone (the gpu's work-items, an XDP program)
refuses of an element: state across packets, a batch body only, building or copying
packets, failing its core, the capture time. The checks and the first half of each
reason are the same on both targets; the target says the second half (why it cannot)."""

from __future__ import annotations

from dataclasses import dataclass

from offlow.ir import Node


@dataclass(frozen=True)
class Says:
    """A target's half of each reason, after what the element does."""

    keeps_nothing: str   # code at the end of its stream, or between packets
    batch_only: str      # only a batch body (follows "it has only a batch body")
    makes: str           # MAKE
    sends: str           # SEND
    fails: str           # FAIL
    reads_ts: str        # pkt->ts_ns


def refuse_stream_code(node: Node, says: Says) -> str | None:
    """Why `node` cannot run there when it runs code apart from its packets (at the end
    of its stream, or between packets); None when it runs none."""
    if node.end_body:
        return ("it has code to run at the end of its stream (at_end), after its last "
                "packet; " + says.keeps_nothing)
    if node.prelude or node.at_end:
        return ("a node the compiler made (a cache's) runs code of its own between "
                "packets; " + says.keeps_nothing)
    return None


def refuse_packet_work(node: Node, says: Says) -> str | None:
    """Why `node` cannot run there when what it does to a packet needs more than the one
    packet (a batch body only, MAKE, SEND, FAIL, the capture time); None otherwise."""
    facts = node.facts
    if node.batch_body and not node.body.strip():
        return "it has only a batch body" + says.batch_only
    if facts and facts.makes:
        return "it builds packets (MAKE); " + says.makes
    if facts and facts.sends:
        return "it sends copies of a packet (SEND); " + says.sends
    if facts and facts.fails:
        return "it fails its core (FAIL); " + says.fails
    if facts and facts.reads_ts:
        return "it reads the packet's capture time (pkt->ts_ns), " + says.reads_ts
    return None
