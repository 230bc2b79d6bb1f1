"""Distinct IPv4 sources counted on the NIC with PCSA; the host asks for the sketch
over a direct channel (NFComms' application).

The NIC parses each frame and adds its IPv4 source address to a 2,048-bitmap PCSA
sketch that lives in NIC memory; nothing crosses to the host per packet. A host
program opens the `pcsa` channel and asks for the summary; `offlow pcsa` runs this
program on a capture and prints the estimate beside the exact count:

    offlow pcsa --input ../shared/data/tls_ciphers.pcap

or serve it and attach to its window from another host program (offlow.session):

    offlow run examples/pcsa.py --input ../shared/data/tls_ciphers.pcap --serve
"""

from offlow import Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.elements.sketch import PCSA, PcsaSummary, pcsa_table


def program() -> Program:
    p = Program("pcsa")
    sketch = pcsa_table("sketch")

    src, eth, ip4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4")
    count, done = PCSA("pcsa", sketch=sketch), Sink("counted")
    ipv6, other = Discard("ipv6"), Discard("non_ip")
    src >> eth
    eth["ipv4"] >> ip4 >> count >> done
    eth["ipv6"] >> ipv6
    eth["other"] >> other

    p.segment("rx", [src, eth, ip4, count, done, ipv6, other], device="nic", cores=[0])
    p.channel("pcsa", PcsaSummary("summary", sketch=sketch))
    return p
