"""vector_tags with one vector element in its segment: TCP packets through `stamp`
(vector_tags' TagTcp, batch body and per-packet body), UDP ones dropped by a Discard
of the user's own name, so every packet waiting at the flush waits at `stamp` (the
flush's loop with no arrival order to follow)."""

import runpy
from pathlib import Path

from offlow import Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth

TAGS = runpy.run_path(str(Path(__file__).with_name("vector_tags.py")))


def program() -> Program:
    p = Program("vector_one", batch=7)
    slots = Shared("slots", "uint64_t", 2 * TAGS["SLOTS"])
    src, eth, ip4 = Source("rx"), ParseEth("eth"), CheckIPv4("ip4")
    by, stamp = TAGS["ByProto"]("by_proto"), TAGS["TagTcp"]("stamp", slots=slots)
    not_ip, no_udp, rest, out = Discard("not_ip"), Discard("no_udp"), Discard("rest"), Sink("tx")
    src >> eth
    eth["ipv4"] >> ip4 >> by
    eth["ipv6"] >> not_ip
    eth["other"] >> not_ip
    by["tcp"] >> stamp >> out
    by["udp"] >> no_udp
    by["rest"] >> rest
    p.segment("rx", [src, eth, ip4, by, stamp, not_ip, no_udp, rest], device="nic", cores=[0])
    p.segment("tx", [out], device="host", cores=[0])
    return p
