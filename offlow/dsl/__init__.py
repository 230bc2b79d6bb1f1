"""The front-end: elements with C bodies, per-packet state, shared state, wiring, placement,
and program files (loader.load_program)."""

from offlow.dsl.element import Composite, Element, Handler, Port, Sink, Source
from offlow.dsl.program import Program, Segment, State
from offlow.dsl.values import Shared, SharedMap, Table
from offlow.ir import CacheOps

__all__ = [
    "CacheOps", "Composite", "Element", "Handler", "Port", "Program", "Segment", "Shared",
    "SharedMap", "Sink", "Source", "State", "Table",
]
