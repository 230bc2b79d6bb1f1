"""A user's tap with a probe of its own on the device: frames come from the host's
wire through the device's `stamp` back to the host's `out`, and the device's own
source `probe` reads a capture there and sends it to the host's `seen`. Both sources
read the run's `--input`: the device's probe opens it on the device's side (a
relative path is the device's, docs/remote.md: Faults)."""

from offlow import Element, Port, Program, Sink, Source


class Stamp(Element):
    """Passes every frame on."""

    inputs = (Port("frames", "any"),)
    outputs = (Port("stamped", "any"),)
    body = "SEND(stamped);"


def program() -> Program:
    p = Program("probe_tap")
    wire, stamp, out = Source("wire"), Stamp("stamp"), Sink("out")
    probe, seen = Source("probe"), Sink("seen")
    wire >> stamp >> out
    probe >> seen
    p.segment("entry", [wire], device="host", cores=[0])
    p.segment("tap", [stamp, probe], device="nic", cores=[0])
    p.segment("exit", [out, seen], device="host", cores=[1])
    return p
