"""Segmentation offload on the NIC (the LSO seed): a host program writes each large send
(a header template and up to 64 KB of payload) into a send port's double-buffered send
buffer and posts its descriptor; the NIC takes the descriptors, cuts each send into TCP
segments or UDP fragments of the link's MTU (BOM, COM, EOM or SSM packets, each by its
own path), moving the payloads by PIO or by its copy engine, writes the packets out and
posts a completion per send.

Large sends built from the shared captures' flows, then cut at a 1500-byte MTU:

    offlow lso sends --output sends.pcap
    offlow lso run --input sends.pcap --output out.pcap

From a host program, offlow.lso.app.session(program(), output=...) gives the port:
`s.port.send(template, payload, mss=1460)`.
"""

from offlow import Program, Sink, Source
from offlow.elements.lso import Segment, kind_counts, send_port


def program() -> Program:
    # the largest frame it makes: a 9,216-byte IP MTU behind two VLAN tags
    p = Program("lso", mtu=9238)
    sends = Source("sends")          # descriptors from the send port (kind=lso)
    cut = Segment("lso", port=send_port("port"), kinds=kind_counts("kinds"))
    tx = Sink("tx")
    sends >> cut >> tx
    p.segment("nic", [sends, cut, tx], device="nic", cores=[0])
    return p
