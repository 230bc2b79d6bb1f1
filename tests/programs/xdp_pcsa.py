"""Distinct IPv4 sources counted with PCSA where the packets arrive: examples/pcsa.py's
segment without its channel (the sketch read from the run's table report; the example
itself, channel and all, runs on xdp too: tests/test_xdp_chan.py), so that it runs on
xdp (`--set sources.device=xdp`) as on the NIC. The sketch, a shared array, is a BPF array
map there: PCSA's body sets its bits with atomic ORs from every CPU that receives
packets, and the run's host side reads it into the table report at the end. The
user's own names."""

from offlow import Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth
from offlow.elements.sketch import PCSA, pcsa_table


def program() -> Program:
    p = Program("xdp_pcsa")
    seen = pcsa_table("seen")
    port, frames, v4 = Source("port"), ParseEth("frames"), CheckIPv4("v4")
    count, out, skip = PCSA("count", sketch=seen), Sink("out"), Discard("skip")
    port >> frames
    frames["ipv4"] >> v4 >> count >> out
    frames["ipv6"] >> skip
    frames["other"] >> skip
    p.segment("sources", [port, frames, v4, count, out, skip], device="nic", cores=[0])
    return p
