"""Floem's network sequencer on the NIC: every UDP datagram sent to one of 8 groups
(destination ports 7000-7007) gets its group's next sequence number, under the group's
lock, and leaves in that order; the NIC writes the stamped datagrams out itself (the
sink is in its segment: what leaves the NIC is what is written). Other traffic is
dropped and counted.

    offlow run examples/sequencer.py --input datagrams.pcap --output stamped.pcap

`--set seq.cores=0,1,2` stamps on three NIC cores: the numbers stay gap-free and
strictly increasing per group in the order the datagrams are written
(offlow.elements.sequencer, docs/elements.md).
"""

from offlow import Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.sequencer import Sequence, sequencer_table

BASE, GROUPS = 7000, 8


def program() -> Program:
    p = Program("sequencer")
    seqs = sequencer_table("seqs", GROUPS)
    rx, eth, ip4, l4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4")
    stamp, tx, other = Sequence("stamp", base=BASE, groups=GROUPS, seqs=seqs), Sink("tx"), \
        Discard("other")
    rx >> eth
    eth["ipv4"] >> ip4 >> l4 >> stamp >> tx
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("seq", [rx, eth, ip4, l4, stamp, other, tx], device="nic", cores=[0])
    return p
