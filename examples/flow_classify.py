"""Floem's flow classification: the NIC counts every IPv4 flow (its 5-tuple) in a
count-min sketch (4 rows of 1,024 counters) and sends the packets of flows seen at least
100 times (by the sketch's estimate, never below the true count) to `heavy`, the others
to `light`; the host writes each to its own capture. The sketch is printed after the
run; offlow.sketch.countmin reads a flow's estimate from it.

    offlow run examples/flow_classify.py --input capture.pcap --output classified.pcap

`--set rx.cores=0,1` counts on two NIC cores (the counters are added atomically).
"""

from offlow import Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.sketch import CountMin, countmin_table

DEPTH, WIDTH, THRESHOLD = 4, 1024, 100


def program() -> Program:
    p = Program("flow_classify")
    sketch = countmin_table("flows", DEPTH, WIDTH)
    src, eth, ip4, l4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4")
    cm = CountMin("classify", depth=DEPTH, width=WIDTH, threshold=THRESHOLD, sketch=sketch)
    heavy, light = Sink("heavy"), Sink("light")
    not_v4, other = Discard("not_v4"), Discard("other")
    src >> eth
    eth["ipv4"] >> ip4 >> l4 >> cm
    eth["ipv6"] >> not_v4
    eth["other"] >> other
    cm["heavy"] >> heavy
    cm["light"] >> light

    p.segment("rx", [src, eth, ip4, l4, cm, not_v4, other], device="nic", cores=[0])
    p.segment("app", [heavy, light], device="host", cores=[0])
    return p
