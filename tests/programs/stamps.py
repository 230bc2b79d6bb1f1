"""A user's program that reads each packet's capture time after a queue: the NIC parses
and checks IPv4, the host sums the capture times (in microseconds) of what it sees and
keeps the earliest and the latest. Nothing it computes depends on where `rx` runs."""

from offlow import Element, Program, Shared, Source
from offlow.elements import CheckIPv4, ParseEth


class Age(Element):
    """Capture times of the packets seen, in microseconds: times[0] their sum, times[1]
    the earliest (0: none yet), times[2] the latest."""

    outputs = ()
    tables = ("times",)
    body = r"""
    const uint64_t us = pkt->ts_ns / 1000u;
    times[0] += us;
    if (times[1] == 0 || us < times[1])
        times[1] = us;
    if (us > times[2])
        times[2] = us;
    CONSUME();
    """


def program() -> Program:
    p = Program("stamps")
    times = Shared("times", "uint64_t", 3)
    src, eth, ip4, age = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), Age("age", times=times)
    other, v6 = Age("other", times=Shared("others", "uint64_t", 3)), Age(
        "v6", times=Shared("v6s", "uint64_t", 3))
    src >> eth
    eth["ipv4"] >> ip4 >> age
    eth["ipv6"] >> v6
    eth["other"] >> other
    p.segment("rx", [src, eth, ip4], device="nic")
    p.segment("app", [age, other, v6], device="host")
    return p
