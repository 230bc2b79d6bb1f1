"""The front-end: elements with C bodies, per-packet state, shared state, wiring, placement."""

from offlow.dsl.element import Composite, Element, Port, Sink, Source
from offlow.dsl.program import Program, Segment, Shared, State

__all__ = [
    "Composite", "Element", "Port", "Program", "Segment", "Shared", "Sink", "Source", "State",
]
