"""A user's tap: frames from the wire are marked on the NIC (the low bit of their last
byte: "seen") and archived on the host. Its source, element and sink carry its own
names, which its options (`--opt tap_in.KEY=...`, `--opt archive.KEY=...`) name."""

from offlow import Element, Port, Program, Sink, Source


class Mark(Element):
    """Sets the low bit of the frame's last byte."""

    inputs = (Port("frames", "any"),)
    outputs = (Port("marked", "any"),)
    body = """
        /* an empty frame has no last byte to mark */
        if (pkt->len > 0)
            pkt->data[pkt->len - 1] |= 1; // seen
        SEND(marked);
    """


def program() -> Program:
    p = Program("archive_tap")
    tap, mark, archive = Source("tap_in"), Mark("mark_seen"), Sink("archive")
    tap >> mark >> archive
    p.segment("edge", [tap, mark], device="nic", cores=[0])
    p.segment("keep", [archive], device="host", cores=[0])
    return p
