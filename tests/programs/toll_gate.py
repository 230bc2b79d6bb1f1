"""A user's metering program with its gate on the device: frames come from the host's
wire, the device's `toll_gate` lets 499 of them through and gives up on the 500th
(FAIL: its core fails, breaking the ring it takes from), the rest go back to the host's
log. The host keeps sending into the broken ring until the run ends (docs/remote.md:
what the link did not deliver)."""

from offlow import Element, Port, Program, Sink, Source


class TollGate(Element):
    """Passes 499 frames; the 500th fails the run, saying which."""

    inputs = (Port("frames", "any"),)
    outputs = (Port("paid", "any"),)
    body = """
        static unsigned long long tolls; // frames seen at this gate
        if (++tolls == 500) {
            /* the 500th has no ticket: stop here */
            FAIL("no ticket for frame %llu", tolls);
        }
        SEND(paid);
    """


def program() -> Program:
    p = Program("toll_gate")
    wire, gate, log = Source("wire"), TollGate("toll_gate"), Sink("log")
    wire >> gate >> log
    p.segment("entry", [wire], device="host", cores=[0])
    p.segment("gate", [gate], device="nic", cores=[0])
    p.segment("exit", [log], device="host", cores=[1])
    return p
