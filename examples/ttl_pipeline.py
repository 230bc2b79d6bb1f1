"""The foundation demo: parse, check and decrement TTL on the NIC; classify and count
on the host; write the forwarded packets to a pcap.

What the program computes is the wiring below; where it runs is the two
`p.segment(...)` lines.  Move the NIC part to the host with one edit
(device="host") or from the command line: `--set rx.device=host`.
"""

from offlow import Program, Shared, Sink, Source
from offlow.elements import (
    CheckIPv4,
    CheckIPv6,
    Classify,
    Count,
    DecHopLimit,
    DecTTL,
    Discard,
    ParseEth,
    ParseL4,
)

CLASSES = {"tls": (6, 443), "quic": (17, 443), "dns": (17, 53)}


def program() -> Program:
    p = Program("ttl_pipeline")
    counts = Shared("class_counts", "uint64_t", len(CLASSES) + 1)

    src, eth = Source("rx"), ParseEth("eth")
    ip4, ttl4 = CheckIPv4("ip4"), DecTTL("ttl4")
    ip6, ttl6 = CheckIPv6("ip6"), DecHopLimit("ttl6")
    l4, cls, out = ParseL4("l4"), Classify(CLASSES, name="classify"), Sink("tx")
    non_ip = Discard("non_ip")

    src >> eth
    eth["ipv4"] >> ip4 >> ttl4 >> l4
    eth["ipv6"] >> ip6 >> ttl6 >> l4
    eth["other"] >> non_ip
    l4 >> cls
    counters = []
    for slot, name in enumerate([*CLASSES, "other"]):
        c = Count(f"count_{name}", slot=slot, counts=counts)
        cls[name] >> c >> out
        counters.append(c)

    # Placement (the schedule): one line per segment.
    p.segment("rx", [src, eth, ip4, ttl4, ip6, ttl6, non_ip], device="nic", cores=[0])
    p.segment("app", [l4, cls, *counters, out], device="host", cores=[0])
    return p
