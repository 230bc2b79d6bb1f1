"""A user's program for the sink's burst: frames of odd length go out twice (a copy
marked 0xA5, then the frame itself marked 0x5B), the others once (marked 0x5B), all
through one sink in the source's own segment. The copies reach the sink one at a time
while the source batch's frames wait for its end: what comes out must still be in
the order the sink was reached (tests/test_sink_burst.py)."""

from offlow import Element, Port, Program, Sink, Source


class OddTwice(Element):
    """Odd-length frames to both outputs (`twice` gets a copy), all to `once`."""

    inputs = (Port("inp", "any"),)
    outputs = (Port("twice", "any"), Port("once", "any"))
    body = """
    /* an odd length: one more, a copy, on `twice` */
    if (pkt->len & 1u)
        SEND(twice);
    EMIT(once);   // the frame itself
    """


class MarkCopy(Element):
    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    body = "pkt->data[0] = 0xA5; /* first byte of the destination MAC */"


class MarkFrame(Element):
    inputs = (Port("inp", "any"),)
    outputs = (Port("out", "any"),)
    body = "pkt->data[0] = 0x5B;"


def program() -> Program:
    p = Program("fork_marks")
    rx, fork, wire = Source("from_wire"), OddTwice("fork"), Sink("to_wire")
    copy_mark, frame_mark = MarkCopy("copy_mark"), MarkFrame("frame_mark")
    rx >> fork
    fork["twice"] >> copy_mark >> wire
    fork["once"] >> frame_mark >> wire
    p.segment("only", [rx, fork, copy_mark, frame_mark, wire], device="nic", cores=[0])
    return p
