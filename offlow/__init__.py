"""offlow: compile packet-processing data-flow programs to C and run them split
between a host CPU and a device (an emulated NIC here)."""

from offlow.dsl import (
    Composite,
    Element,
    Handler,
    Port,
    Program,
    Shared,
    SharedMap,
    Sink,
    Source,
    State,
    Table,
)
from offlow.errors import OfflowError

__all__ = [
    "Composite", "Element", "Handler", "OfflowError", "Port", "Program", "Shared", "SharedMap",
    "Sink", "Source", "State", "Table",
]
