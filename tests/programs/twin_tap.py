"""A user's monitoring tap with its copying on the device: frames come from the host's
wire, the device's `twin` sends each one on two outputs (a copy each), and the host
writes one copy to its `out` sink and logs the other to `mirror`. On a remote device
both of the device's rings go back to the host: what the device makes (the copies)
crosses the link as well as what it forwards (docs/remote.md: what the link did not
deliver)."""

from offlow import Element, Port, Program, Sink, Source


class Twin(Element):
    """Sends every frame on both outputs."""

    inputs = (Port("frames", "any"),)
    outputs = (Port("main", "any"), Port("copy", "any"))
    body = "SEND(copy); SEND(main);"


def program() -> Program:
    p = Program("twin_tap")
    wire, twin, out, mirror = Source("wire"), Twin("twin"), Sink("out"), Sink("mirror")
    wire >> twin
    twin["main"] >> out
    twin["copy"] >> mirror
    p.segment("entry", [wire], device="host", cores=[0])
    p.segment("tap", [twin], device="nic", cores=[0])
    p.segment("exit", [out, mirror], device="host", cores=[1])
    return p
