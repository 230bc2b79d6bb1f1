"""A user's encrypt-then-segment pipeline, second half (docs/lso.md, written from the
docs): the host posts each sealed datagram of tests/programs/seal_jumbo.py as one large
send through a send port (offlow.lso.app.session) with an MSS of its choosing; one NIC
core cuts the sends into IPv4 fragments of the link's MTU and writes them out."""

from offlow import Program, Sink, Source
from offlow.elements.lso import Segment, kind_counts, send_port


def program() -> Program:
    p = Program("cut_sealed", mtu=9018)  # a 9,000-byte IP MTU behind a VLAN tag
    descs = Source("descs")  # the send port's descriptors (the session sets kind=lso)
    slicer = Segment("slicer", port=send_port("sendq"), kinds=kind_counts("per_kind"))
    wire = Sink("wire")
    descs >> slicer >> wire
    p.segment("cutter", [descs, slicer, wire], device="nic", cores=[0])
    return p
