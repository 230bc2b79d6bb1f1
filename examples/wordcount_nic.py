"""Storm-style word count (Floem's analytics), second offload design: the NIC parses
each datagram of a text stream (the spout), splits the lines into words and counts them
(the bolts); nothing crosses to the host. The ranker reads the count table printed
after the run: offlow.streams.words.top_k gives the k most frequent words.

    offlow run examples/wordcount_nic.py --input lines.pcap

The first design, examples/wordcount.py, runs the bolts on the host; the two
files differ in a few lines (docs/streams.md counts them; `offlow bench streams`
measures both).
"""

from offlow import Program, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.words import CountWords, SplitWords, word_table

SLOTS = 16384  # distinct words the count table holds


def program() -> Program:
    p = Program("wordcount_nic")
    table = word_table("counts", SLOTS)
    rx, eth, ip4, l4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4")
    split, count = SplitWords("split"), CountWords("count", slots=SLOTS, words=table)
    other = Discard("other")
    rx >> eth
    eth["ipv4"] >> ip4 >> l4 >> split >> count
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("spout", [rx, eth, ip4, l4, other, split, count], device="nic", cores=[0])
    return p
