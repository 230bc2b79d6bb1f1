"""Elements: typed ports, a C body, parameters and the shared tables they use.

An element says *what* is computed on a packet; where it runs is decided by the
segment it is placed in (see program.py).  Wiring uses ``>>``::

    src >> parse >> ttl          # single output to single input
    cls["tcp"] >> count_tcp      # a named output port
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from offlow.dsl.values import Shared, SharedMap, Table, c_literal
from offlow.errors import OfflowError
from offlow.ir.types import c_identifier


@dataclass(frozen=True)
class Port:
    """A port and the packet type it carries.

    Types are nominal and dotted: an output of type ``ip.v4`` may feed an input of
    type ``ip`` or ``ip.v4``; an input of type ``any`` (the default) accepts everything,
    and an output of type ``any`` feeds only ``any`` inputs.
    """

    name: str
    type: str = "any"


@dataclass(frozen=True)
class PortRef:
    """One port of one element instance; the unit that ``>>`` connects."""

    element: Element
    port: str

    def __rshift__(self, other: Element | PortRef | Composite) -> Any:
        dst = _input_ref(other, f"{self.element.name}.{self.port}")
        self.element._connect(self.port, dst)
        return other


def _input_ref(target: Element | PortRef | Composite, source: str) -> PortRef:
    """The input `source` (ELEMENT.PORT, for the error) is connected to by `>> target`."""
    if isinstance(target, PortRef):
        return target
    if isinstance(target, Composite):
        return target._inner_input()
    if not isinstance(target, Element):
        what = (f"{target!r} is a name; connect the element itself (`a >> out`, where "
                "`out = Sink(\"out\")`)" if isinstance(target, str)
                else f"{target!r} ({type(target).__name__}) is not an element or port")
        raise OfflowError(f"`{source} >> {target!r}`: {what}")
    return PortRef(target, target._single_port("input"))


class Element:
    """Base class of all elements.

    Subclasses set the class attributes below; instances may override ``inputs``,
    ``outputs`` and ``body`` (e.g. a classifier whose outputs depend on its rules).

    Body API (C): ``pkt`` (struct ofl_pkt *), ``state`` (per-packet record),
    ``EMIT(port)``, ``SEND(port)`` (also emit on port, keep going), ``DROP()``,
    ``DROP_WHY(reason)`` (one of ``drops``), ``CONSUME()`` (the packet ends here on
    purpose: counted as consumed, not dropped), ``MAKE(port, p)`` (send a packet the
    body built, a ``struct ofl_pkt *``, on port now with a copy of the state; counted
    as made: one packet in, many out);
    parameters and tables by name.  Falling off the end emits on the only output
    (or drops, when there are several outputs and none was chosen).
    """

    inputs: tuple[Port, ...] = (Port("inp"),)
    outputs: tuple[Port, ...] = (Port("out"),)
    fields: ClassVar[Mapping[str, str]] = {}
    params: ClassVar[Mapping[str, str]] = {}
    tables: ClassVar[tuple[str, ...]] = ()
    body: str = ""
    # C over a vector of packets, beside or instead of `body`: `n` packets (at most
    # OFL_VEC), `pkts[i]` and `states[i]` (struct ofl_pkt, struct ofl_state), the
    # outcome per packet with EMIT_AT(i, port), DROP_AT(i), DROP_WHY_AT(i, reason),
    # CONSUME_AT(i) (a packet given none goes out on the only output). The compiler
    # runs it where the element's segment takes its packets in batches (see
    # docs/elements.md), else `body` (or this one over one packet, without `body`).
    batch_body: str = ""
    # C at file scope before the body: static inline helper functions, types, macros
    # (C allows no function definition inside a body, which is a function's block)
    helpers: ClassVar[str] = ""
    # runtime headers of an application library the body or its tables use (e.g.
    # "offlow/lso_nic.h"): included by the C file of each device that runs the element
    # (the runtime's core headers are always there)
    includes: ClassVar[tuple[str, ...]] = ()
    # reasons the body drops packets for, DROP_WHY(reason), and what each means: the
    # run report counts drops per element and reason
    drops: ClassVar[Mapping[str, str]] = {}
    # C run once on each core of the element's segment when the stream ends there (every
    # input closed, the sources done), before the queues after it close: ``MAKE(port,
    # p)`` sends what the element still holds (a sort buffer, open windows); ``state``
    # is a copy of the state of the first packet this core's element saw (zeroed when it
    # saw none); parameters and tables by name. No packet is at hand: EMIT, SEND and
    # writing the state are refused (DROP and CONSUME do not compile there). It does
    # not run on a core that failed.
    at_end: ClassVar[str] = ""
    # what each field in `fields` holds (its byte order too), for the element reference
    field_docs: ClassVar[Mapping[str, str]] = {}
    kind: ClassVar[str] = "element"
    # what its cost scales with on another device (offlow plan): "integer", "lookup"
    # (memory-bound table lookups) or "hash" (hashing, crypto); "" lets the planner
    # infer it (lookup for an element that uses a table, else integer)
    work: ClassVar[str] = ""
    # C run when a packet is enqueued on a queue spread over several devices
    # (offlow.passes.spread) that is steered by a field this element writes, after the
    # element ran: ``pkt``, ``state``, ``instances`` (the queue's) and ``shard_of``
    # (``const uint8_t *``: the device index of each instance). It may set state fields,
    # e.g. mark a packet whose keys other devices hold (KeyHash's kv_spans)
    spread_check: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Record where the class is defined (offlow.dsl.where): the compiler's
        messages and the generated C name the program file and line of a body."""
        super().__init_subclass__(**kwargs)
        frame = sys._getframe(1)  # the frame running the `class` statement
        cls._ofl_site = (frame.f_code.co_filename, frame.f_lineno)

    def __init__(self, name: str | None = None, **kwargs: Any) -> None:
        self.name = name or type(self).__name__.lower()
        if self.kind in ("source", "sink") and not c_identifier(self.name):
            # (an element's name is escaped where the C holds it; a source's and a
            # sink's go into more of it, and `--opt NAME.KEY=VALUE` names them)
            raise OfflowError(f"{self.kind} `{self.name}`: its name must be a C identifier "
                              "(ASCII, not a C keyword): the generated C and `--opt "
                              "NAME.KEY=VALUE` name it")
        self.param_values: dict[str, Any] = {}
        self.table_refs: dict[str, Shared | SharedMap | Table] = {}
        self.links: dict[str, PortRef] = {}
        wrong = _declaration_error(self)
        if wrong:
            raise OfflowError(f"element `{self.name}` ({type(self).__name__}): {wrong}")
        for what, ports in (("inputs", self.inputs), ("outputs", self.outputs)):
            bad = [p for p in ports if not isinstance(p, Port)]
            if bad:
                raise OfflowError(
                    f"element `{self.name}` ({type(self).__name__}): {what} must be Port "
                    f"objects, not {bad[0]!r}; write Port({bad[0]!r}) (or Port(name, type))"
                )
        for key, value in kwargs.items():
            if key in self.params:
                c_literal(value, self.params[key], f"element `{self.name}` param `{key}`")
                self.param_values[key] = value
            elif key in self.tables:
                if not isinstance(value, Shared | SharedMap | Table):
                    raise OfflowError(f"element `{self.name}`: table `{key}` must be a "
                                      f"Shared(...), SharedMap(...) or Table(...) value, not "
                                      f"{type(value).__name__}")
                self.table_refs[key] = value
            else:
                known = ", ".join([*self.params, *self.tables]) or "none"
                raise OfflowError(
                    f"element `{self.name}` ({type(self).__name__}) has no parameter or table "
                    f"`{key}`; it takes: {known}"
                )
        missing = [p for p in self.params if p not in self.param_values]
        missing += [t for t in self.tables if t not in self.table_refs]
        if missing:
            raise OfflowError(
                f"element `{self.name}` ({type(self).__name__}) needs "
                + ", ".join(f"`{m}`" for m in missing)
                + "; pass them as keyword arguments"
            )

    def __getitem__(self, port: str) -> PortRef:
        names = [p.name for p in (*self.inputs, *self.outputs)]
        if port not in names:
            raise OfflowError(
                f"element `{self.name}` has no port `{port}`; ports: {', '.join(names)}"
            )
        return PortRef(self, port)

    def __rshift__(self, other: Element | PortRef | Composite) -> Any:
        return PortRef(self, self._single_port("output")) >> other

    def _single_port(self, direction: str) -> str:
        ports = self.inputs if direction == "input" else self.outputs
        if len(ports) != 1:
            names = ", ".join(p.name for p in ports) or "none"
            raise OfflowError(
                f"element `{self.name}` has {len(ports)} {direction} ports ({names}); "
                f"name one, e.g. `{self.name}[\"{ports[0].name if ports else 'port'}\"]`"
            )
        return ports[0].name

    def _connect(self, out_port: str, dst: PortRef) -> None:
        if out_port not in [p.name for p in self.outputs]:
            raise OfflowError(f"element `{self.name}`: `{out_port}` is not an output port")
        if dst.port not in [p.name for p in dst.element.inputs]:
            raise OfflowError(
                f"element `{dst.element.name}`: `{dst.port}` is not an input port"
            )
        if out_port in self.links:
            raise OfflowError(
                f"output `{self.name}.{out_port}` is already connected to "
                f"`{self.links[out_port].element.name}`; an output feeds one input "
                "(use SEND() on several outputs to duplicate a packet)"
            )
        self.links[out_port] = dst

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


# What each declaration that names things maps or lists, with an example for the error.
_MAPPINGS = {"fields": '{"hits": "uint32_t"}', "params": '{"limit": "uint32_t"}',
             "drops": '{"over_limit": "what the reason means"}',
             "field_docs": '{"hits": "what the field holds"}'}
_NAME_LISTS = {"tables": '("counts",)', "includes": '("offlow/lso_nic.h",)'}


def _declaration_error(el: Element) -> str | None:
    """What is wrong with the class attributes an element declares, if anything: a
    tuple of reasons where `drops` maps each reason to its meaning, one string where
    `tables` lists names (``("counts")`` is a string, not a tuple), and the like."""
    for attr, example in _MAPPINGS.items():
        v = getattr(el, attr)
        if not (isinstance(v, Mapping) and all(isinstance(k, str) and isinstance(x, str)
                                               for k, x in v.items())):
            return (f"`{attr}` must map each name to a string, e.g. {attr} = {example}; "
                    f"got {v!r}")
    for attr, example in _NAME_LISTS.items():
        v = getattr(el, attr)
        if isinstance(v, str) or not (isinstance(v, tuple | list)
                                      and all(isinstance(x, str) for x in v)):
            hint = f" (write ({v!r},): a one-name tuple needs its comma)" if isinstance(
                v, str) else ""
            return f"`{attr}` must be a tuple of names, e.g. {attr} = {example}; got {v!r}{hint}"
    # (the body's locals: its parameters and tables by these names)
    for attr in ("params", "tables"):
        bad = [n for n in getattr(el, attr) if not c_identifier(n)]
        if bad:
            return (f"`{attr}` names {bad[0]!r}, which is no C identifier (ASCII, not a C "
                    "keyword): the body takes it as a local of that name")
    return None


class Source(Element):
    """A packet source: a pcap file or synthetic traffic, chosen when the program runs."""

    inputs = ()
    outputs = (Port("out", "eth"),)
    kind = "source"


class Sink(Element):
    """A packet sink: writes to a pcap file when the run names one, else counts."""

    inputs = (Port("inp", "any"),)
    outputs = ()
    kind = "sink"


class Handler(Element):
    """C code a device runs for each direct message on a channel (``Program.channel``).

    Body API (C): ``msg`` (const uint8_t *, ``len`` bytes, at most 56), parameters and
    tables by name, ``REPLY(ptr, n)`` to answer (at most 56 bytes, never blocks; the
    host receives it with ``recv``), ``BULK_REPLY(ptr, n)`` to answer in bulk (any
    size, from a table that stays unchanged until the host has it; the manager sends
    it after the body returns and the host takes it with ``bulk_recv``); ``return;``
    ends the body early. The body runs on
    the device's channel manager thread, beside the packet cores: writes to tables race
    with them as any shared access does."""

    inputs = ()
    outputs = ()
    kind = "handler"


class Composite:
    """A group of elements used as one: subclasses build and wire their parts in
    ``__init__`` and call ``expose`` to name the inner ports seen from outside."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.parts: list[Element] = []
        self._inputs: dict[str, PortRef] = {}
        self._outputs: dict[str, PortRef] = {}

    def add(self, element: Element) -> Element:
        """Adopt `element` as a part; its name is prefixed with the composite's."""
        element.name = f"{self.name}.{element.name}"
        self.parts.append(element)
        return element

    def expose(self, inputs: Mapping[str, PortRef], outputs: Mapping[str, PortRef]) -> None:
        """Declare which inner ports are this composite's inputs and outputs."""
        self._inputs = dict(inputs)
        self._outputs = dict(outputs)

    def __getitem__(self, port: str) -> PortRef:
        ref = self._inputs.get(port) or self._outputs.get(port)
        if ref is None:
            names = ", ".join([*self._inputs, *self._outputs])
            raise OfflowError(f"composite `{self.name}` has no port `{port}`; ports: {names}")
        return ref

    def _inner_input(self) -> PortRef:
        if len(self._inputs) != 1:
            raise OfflowError(f"composite `{self.name}` has {len(self._inputs)} inputs; name one")
        return next(iter(self._inputs.values()))

    def __rshift__(self, other: Element | PortRef | Composite) -> Any:
        if len(self._outputs) != 1:
            raise OfflowError(
                f"composite `{self.name}` has {len(self._outputs)} outputs; name one"
            )
        return next(iter(self._outputs.values())) >> other
