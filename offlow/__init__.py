"""offlow: compile packet-processing data-flow programs to C and run them split
between a host CPU and a device (an emulated NIC here).

The DSL's names (`from offlow import Program, Element, ...`) are offlow.dsl's, imported
the first time one is asked for: a module of the package (the command line, `offlow
stats`) that needs none of them does not pay for the DSL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offlow.errors import OfflowError

if TYPE_CHECKING:
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

__all__ = [
    "Composite", "Element", "Handler", "OfflowError", "Port", "Program", "Shared", "SharedMap",
    "Sink", "Source", "State", "Table",
]


def __getattr__(name: str) -> Any:
    """A DSL name of __all__, from offlow.dsl (PEP 562: asked only for a name the
    package does not hold yet)."""
    if name in __all__:
        from offlow import dsl

        return getattr(dsl, name)
    raise AttributeError(f"module 'offlow' has no attribute {name!r}")
