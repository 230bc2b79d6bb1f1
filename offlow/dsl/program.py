"""Programs: elements, their wiring, the per-packet state, shared tables, and the
placement of segments (the schedule).  A Program is a value: build as many as you
like in one process."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from offlow import targets
from offlow.dsl.element import Composite, Element, Handler
from offlow.dsl.values import Shared, SharedMap, Table, c_literal, map_table
from offlow.dsl.where import code_site
from offlow.errors import OfflowError
from offlow.ir import (
    Cache,
    CacheOps,
    Channel,
    Edge,
    Field,
    Graph,
    Node,
    PortSpec,
    QueueSpec,
    SharedTable,
)
from offlow.ir import Segment as IRSegment
from offlow.ir.graph import (
    CHANNEL_NAME_MAX,
    CTL_CHANNEL_PREFIX,
    DEFAULT_MTU,
    ENQUEUE_MODES,
    MAX_DROP_REASONS,
    MAX_INSTANCES,
    MAX_OUTPUTS,
    MTU_MAX,
    MTU_MIN,
    OFFLOAD_BATCH_MAX,
    OFFLOAD_DEPTH_MAX,
    RELOAD_CHANNEL_PREFIX,
    TABLE_CHANNEL_PREFIX,
    WORK_KINDS,
)
from offlow.ir.types import c_identifier, check_ctype

CACHE_POLICIES = ("write_through", "write_back")
CACHE_EVICTIONS = ("lru", "clock")
AUTO = "auto"  # Program(mtu=AUTO): the run's input sizes the queues


class State:
    """Per-packet state record; subclass with C-typed annotations::

    class Meta(State):
        flow_id: "uint32_t"
    """


@dataclass
class Segment:
    """A connected part of the program and where it runs."""

    name: str
    elements: list[Element]
    device: str
    cores: tuple[int, ...]
    group: bool = False
    ordered: bool = False  # a core group whose output keeps its input order
    steer: str = ""  # per-packet field choosing the core (field % cores); "" = round robin
    vector: bool = True  # elements' batch bodies may run where it takes batches
    batch: int = 0  # offload batch (gpu): packets per kernel launch; 0: the target's default
    depth: int = 0  # offload depth (gpu): batches in flight; 0: the target's default
    also: str = ""  # a second device running it at once, balanced (offlow.passes.balance)


@dataclass
class CacheDecl:
    """A cache as declared (Program.cache); lowered to ir.Cache."""

    first: Element
    last: Element
    ops: CacheOps
    policy: str
    options: dict[str, str]




class Program:
    """A data-flow program plus its placement."""

    def __init__(
        self, name: str, *, state: type[State] | None = None, mtu: int | str = AUTO,
        ring_size: int = 1024, batch: int = 32,
    ) -> None:
        _check_name(name)
        self.name = name
        self.state = state
        self.segments: dict[str, Segment] = {}
        self.channels: dict[str, tuple[str, Handler]] = {}  # name -> (device or "", handler)
        self.caches: dict[str, CacheDecl] = {}
        self.queue_specs: dict[tuple[str, str], QueueSpec] = {}  # (from, to) -> mapping
        self.mtu: int | None = None  # None: sized to the run's input (AUTO)
        self.ring_size, self.batch = ring_size, batch
        self.set_queues(mtu=mtu, ring_size=ring_size, batch=batch)

    def set_queues(self, *, mtu: int | str | None = None, ring_size: int | None = None,
                   batch: int | None = None) -> None:
        """Queue geometry for every queue of the program: the largest frame in bytes,
        Ethernet header included (`mtu`; AUTO, the default: the run's input decides, see
        `to_ir`), the entries per ring (a power of two) and the entries per doorbell
        (`batch`). Unset arguments keep their value."""
        ring_size = self.ring_size if ring_size is None else ring_size
        batch = self.batch if batch is None else batch
        if mtu == AUTO:
            self.mtu = None
        elif mtu is not None:
            if isinstance(mtu, bool) or not isinstance(mtu, int) or not (
                    MTU_MIN <= mtu <= MTU_MAX):
                raise OfflowError(f"program `{self.name}`: mtu {mtu!r} must be {MTU_MIN}.."
                                  f"{MTU_MAX} (the largest frame in bytes) or {AUTO!r}")
            self.mtu = mtu
        if ring_size < 2 or ring_size & (ring_size - 1) or ring_size > 1 << 20:
            raise OfflowError(f"program `{self.name}`: ring_size {ring_size} must be a power "
                              "of two from 2 to 1048576")
        if batch < 1:
            raise OfflowError(f"program `{self.name}`: batch {batch} must be at least 1")
        self.ring_size, self.batch = ring_size, batch

    def segment(
        self, name: str, members: Sequence[Element | Composite], *,
        device: str | Sequence[str] = "host",
        cores: Iterable[int] = (0,), group: bool = False, ordered: bool = False,
        steer: str | None = None,
    ) -> Segment:
        """Place `members` together on `device`, data-parallel over `cores`; with
        `group=True` the cores form a core group (a master hands each input batch out
        in slices to the group) instead of each core taking whole batches; `ordered=True`
        (a core group too) keeps the group's output in input order. `steer`
        names a per-packet field: each packet enters core `field % len(cores)` (the
        same key always reaches the same core, in order); else batches go round robin.
        `device=["nic", "host"]` runs the segment on both devices at once, the packets
        split between them by a balancer that moves the share each takes towards balance
        while running (docs/planner.md, run-time balance)."""
        if name in self.segments:
            raise OfflowError(f"segment `{name}` is defined twice")
        _check_members(name, members)
        elements: list[Element] = []
        for m in members:
            elements.extend(m.parts if isinstance(m, Composite) else [m])
        seg = Segment(name, elements, "host", _cores(name, cores))
        self.segments[name] = seg
        self.place(name, device=device, cores=seg.cores, group=group, steer=steer,
                   ordered=ordered)
        return seg

    def channel(self, name: str, handler: Handler, *, device: str | None = None) -> None:
        """A channel named `name` between host programs and a device: each direct message
        a host program sends on it runs `handler` there (see Handler; offlow.session
        opens it). The device is where the handler's tables live (it follows the
        segments that use them), or `device` when given."""
        if name in self.channels:
            raise OfflowError(f"channel `{name}` is defined twice")
        if not name or len(name) > CHANNEL_NAME_MAX or \
                not all(c.isalnum() or c in "_.-" for c in name):
            raise OfflowError(f"channel `{name}`: a name is 1..{CHANNEL_NAME_MAX} letters, "
                              "digits, `_`, `.`, `-`")
        for prefix in (TABLE_CHANNEL_PREFIX, CTL_CHANNEL_PREFIX):
            if name.startswith(prefix):
                raise OfflowError(f"channel `{name}`: names starting with `{prefix}` are the "
                                  "tables' (they travel over them, and are controlled)")
        if name.startswith(RELOAD_CHANNEL_PREFIX):
            raise OfflowError(f"channel `{name}`: names starting with `{RELOAD_CHANNEL_PREFIX}` "
                              "are the processes' (offlow reload)")
        if device is not None and not targets.known(device):
            raise OfflowError(f"channel `{name}`: unknown device `{device}`; devices: "
                              f"{', '.join(targets.names())}")
        if not isinstance(handler, Handler):
            raise OfflowError(f"channel `{name}`: handler must be a Handler, not "
                              f"{type(handler).__name__}")
        self.channels[name] = (device or "", handler)

    def cache(self, name: str, around: Element | tuple[Element, Element], ops: CacheOps, *,
              policy: str = "write_through", entries: int = 4096, ways: int = 8,
              value_max: int = 256, eviction: str = "lru") -> None:
        """A cache named `name` around a get/set region: `around` is one element, or the
        (first, last) elements of a region that may span segments and queues. The
        compiler puts a lookup before the region (a hit is answered there and skips the
        region, a miss goes through it) and an update after it, both on the device of
        the elements around the region, where the cache lives. `ops` says how requests
        and replies look (e.g. offlow.elements.kvs.MEMCACHED_CACHE). `policy` is
        write_through (writes go through the region, the cache keeps a copy) or
        write_back (writes stay in the cache; evicting a written entry sends it through
        the region); `entries` in sets of `ways`, evicted by `eviction` (lru or clock)
        within a set; values up to `value_max` bytes are cached. Settable from the
        command line: ``NAME.policy=write_back``, ``NAME.entries=N`` ..."""
        if name in self.caches:
            raise OfflowError(f"cache `{name}` is defined twice")
        first, last = around if isinstance(around, tuple) else (around, around)
        for el in (first, last):
            if not isinstance(el, Element):
                raise OfflowError(f"cache `{name}`: around must be an element or a pair of "
                                  f"elements, not {type(el).__name__}")
        self.caches[name] = CacheDecl(first, last, ops, "write_through", {})
        self.set_cache(name, policy=policy, entries=entries, ways=ways, value_max=value_max,
                       eviction=eviction)

    def set_cache(self, name: str, **settings: object) -> None:
        """Change a cache's policy, entries, ways, value_max or eviction rule."""
        if name not in self.caches:
            raise OfflowError(f"no cache `{name}`; caches: {', '.join(self.caches) or 'none'}")
        c = self.caches[name]
        for key, value in settings.items():
            if key == "policy":
                if value not in CACHE_POLICIES:
                    raise OfflowError(f"cache `{name}`: policy `{value}`: expected "
                                      f"{' or '.join(CACHE_POLICIES)}")
                c.policy = str(value)
            elif key == "eviction":
                if value not in CACHE_EVICTIONS:
                    raise OfflowError(f"cache `{name}`: eviction `{value}`: expected "
                                      f"{' or '.join(CACHE_EVICTIONS)}")
                c.options[key] = str(value)
            elif key in ("entries", "ways", "value_max"):
                try:
                    n = int(str(value))
                except ValueError:
                    n = 0
                if n < 1:
                    raise OfflowError(f"cache `{name}`: {key} must be a positive number, "
                                      f"not {value!r}")
                for setting, lo, hi in c.ops.limits:
                    if setting == key and not lo <= n <= hi:
                        raise OfflowError(f"cache `{name}`: {key} {n} is not within {lo}.."
                                          f"{hi}, what this cache takes")
                c.options[key] = str(n)
            else:
                raise OfflowError(f"cache `{name}`: unknown setting `{key}` (policy, entries, "
                                  "ways, value_max, eviction)")
        entries, ways = int(c.options.get("entries", "1")), int(c.options.get("ways", "1"))
        if entries % ways:
            raise OfflowError(f"cache `{name}`: entries ({entries}) must be a multiple of "
                              f"ways ({ways})")

    def queue(self, src: str, dst: str, *, instances: int | None = None,
              steer: str | None = None, enqueue: str | None = None,
              devices: Sequence[str] | None = None) -> None:
        """Map the logical queue from segment `src` to segment `dst` (every edge between
        them is one of its channels; entries of all channels share its rings, in order)
        onto physical rings: `instances` rings per producer core (default one per
        consumer core; instance i is taken by consumer core i % cores), `steer` the
        per-packet integer field choosing the instance (`field % instances`; default
        the destination segment's steer, "" round robin), `enqueue` "block" (wait for
        room) or "drop" (a full ring drops the packet, counted), `devices` the remote
        devices the instances are spread over (scale-out: segment `dst` runs on each,
        instance i on device i % len(devices); docs/remote.md). Settable from the
        command line: ``SRC->DST.instances=4`` (or ``SRC:DST.instances=4``),
        ``SRC->DST.devices=remote:a,remote:b``."""
        cur = self.queue_specs.get((src, dst), QueueSpec(src, dst))
        name = f"{src}->{dst}"
        if instances is not None:
            if isinstance(instances, bool) or not isinstance(instances, int) or not (
                    1 <= instances <= MAX_INSTANCES):
                raise OfflowError(f"queue `{name}`: instances must be a number from 1 to "
                                  f"{MAX_INSTANCES}, not {instances!r}")
            cur = replace(cur, instances=instances)
        if steer is not None:
            cur = replace(cur, steer=steer)
        if enqueue is not None:
            if enqueue not in ENQUEUE_MODES:
                raise OfflowError(f"queue `{name}`: enqueue `{enqueue}`: expected "
                                  f"{' or '.join(ENQUEUE_MODES)}")
            cur = replace(cur, enqueue=enqueue)
        if devices is not None:
            if isinstance(devices, str):
                raise OfflowError(f"queue `{name}`: devices is a list of devices, e.g. "
                                  f"[\"remote:a\", \"remote:b\"], not {devices!r}")
            cur = replace(cur, devices=tuple(devices))
        self.queue_specs[(src, dst)] = cur

    def _queue_setting(self, setting: str, target: str, attr: str, value: str) -> None:
        """``SRC->DST.ATTR=VALUE`` (or ``SRC:DST``) from the command line."""
        src, _, dst = target.partition("->") if "->" in target else target.partition(":")
        for seg in (src, dst):
            if seg not in self.segments:
                raise OfflowError(f"--set `{setting}`: no segment `{seg}`; segments: "
                                  f"{', '.join(self.segments) or 'none'}")
        if attr == "instances":
            try:
                n = int(value)
            except ValueError:
                raise OfflowError(f"--set `{setting}`: instances must be a number") from None
            self.queue(src, dst, instances=n)
        elif attr == "steer":
            self.queue(src, dst, steer=value)
        elif attr == "enqueue":
            self.queue(src, dst, enqueue=value)
        elif attr == "devices":
            self.queue(src, dst, devices=[d for d in value.split(",") if d])
        else:
            raise OfflowError(f"--set `{setting}`: unknown queue attribute `{attr}` "
                              "(instances, steer, enqueue, devices)")

    def place(self, segment: str, *, device: str | Sequence[str] | None = None,
              cores: Iterable[int] | None = None, group: bool | None = None,
              steer: str | None = None, vector: bool | None = None,
              batch: int | None = None, depth: int | None = None,
              ordered: bool | None = None) -> None:
        """Change where a segment runs: the one-line design change. `batch` and
        `depth` are offload settings of a target that runs batches (gpu): packets per
        batch and batches in flight. An ordered segment is a core group; one that stops
        being a group stops being ordered. Two devices (``["nic", "host"]``) run the
        segment on both at once, balanced."""
        if segment not in self.segments:
            raise OfflowError(
                f"no segment `{segment}`; segments: {', '.join(self.segments) or 'none'}"
            )
        seg = self.segments[segment]
        if device is not None:
            devices = [device] if isinstance(device, str) else list(device)
            if not 1 <= len(devices) <= 2 or len(set(devices)) != len(devices):
                raise OfflowError(f"segment `{segment}`: device must be one device or two "
                                  f"different ones (balanced), not {devices}")
            for d in devices:
                if not targets.known(d):
                    raise OfflowError(
                        f"segment `{segment}`: unknown device `{d}`; "
                        f"devices: {', '.join(targets.names())}"
                    )
            seg.device, seg.also = devices[0], devices[1] if len(devices) == 2 else ""
        if cores is not None:
            cores = _cores(segment, cores)
            if len(set(cores)) != len(cores):
                raise OfflowError(f"segment `{segment}`: core listed twice in {list(cores)}")
            seg.cores = cores
        if group is not None:
            seg.group = bool(group)
            seg.ordered = seg.ordered and seg.group
        if ordered is not None:
            seg.ordered = bool(ordered)
            seg.group = seg.group or seg.ordered
        if steer is not None:
            seg.steer = steer
        if vector is not None:
            seg.vector = bool(vector)
        for attr, value, most in (("batch", batch, OFFLOAD_BATCH_MAX),
                                  ("depth", depth, OFFLOAD_DEPTH_MAX)):
            if value is None:
                continue
            if not isinstance(value, int) or not 1 <= value <= most:
                raise OfflowError(f"segment `{segment}`: {attr} must be 1..{most}")
            setattr(seg, attr, value)

    def apply_setting(self, setting: str) -> None:
        """Apply a command-line setting: a placement such as ``rx.device=nic`` or
        ``rx.cores=0,1``, a core group ``rx.group=on``, offload settings
        ``route.batch=1024``, ``route.depth=3`` (gpu), a queue's mapping
        ``rx->app.instances=4`` (``rx:app.steer=key``, ``rx:app.enqueue=drop``), or the
        queue geometry ``ring_size=256``, ``batch=64``, ``mtu=9018`` (``mtu=auto``)."""
        lhs, eq, value = setting.partition("=")
        if eq and lhs == "mtu" and value == AUTO:
            self.set_queues(mtu=AUTO)
            return
        if eq and lhs in ("ring_size", "batch", "mtu"):
            try:
                self.set_queues(**{lhs: int(value)})
            except ValueError:
                raise OfflowError(f"--set `{setting}`: {lhs} must be a number") from None
            return
        target, _, attr = lhs.rpartition(".")
        if eq and ("->" in target or ":" in target):
            self._queue_setting(setting, target, attr, value)
            return
        if eq and lhs.rpartition(".")[0] in self.caches:
            cache, _, attr = lhs.rpartition(".")
            self.set_cache(cache, **{attr: value})
            return
        try:
            seg, attr = lhs.rsplit(".", 1)
            if not eq:
                raise ValueError
        except ValueError:
            raise OfflowError(
                f"--set `{setting}`: expected SEGMENT.device=DEV, SEGMENT.cores=0,1, "
                "SEGMENT.group=on|off, SEGMENT.ordered=on|off, SEGMENT.steer=FIELD, "
                "SEGMENT.vector=on|off, SEGMENT.batch=N, SEGMENT.depth=N, CACHE.policy=P, "
                "CACHE.entries=N, "
                "SRC->DST.instances=N, SRC->DST.steer=FIELD, SRC->DST.enqueue=block|drop, "
                "ring_size=N, batch=N or mtu=N|auto"
            ) from None
        if attr == "device":
            self.place(seg, device=value.split(","))
        elif attr == "cores":
            try:
                cores = [int(c) for c in value.split(",")]
            except ValueError:
                raise OfflowError(f"--set `{setting}`: cores must be numbers") from None
            self.place(seg, cores=cores)
        elif attr == "steer":
            self.place(seg, steer=value)
        elif attr in ("batch", "depth"):
            try:
                number = int(value)
            except ValueError:
                raise OfflowError(f"--set `{setting}`: {attr} must be a number") from None
            self.place(seg, **{attr: number})
        elif attr in ("group", "vector", "ordered"):
            flags = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}
            if value.lower() not in flags:
                raise OfflowError(f"--set `{setting}`: {attr} must be on or off")
            self.place(seg, **{attr: flags[value.lower()]})
        else:
            raise OfflowError(f"--set `{setting}`: unknown attribute `{attr}` (device, cores, "
                              "group, ordered, steer, vector, batch, depth)")

    def to_ir(self, fit: tuple[int, str] | None = None) -> Graph:
        """Lower the program to the IR (composites are already flat). `fit` is the mtu
        its input needs and why (offlow.runner.check_options), taken when the program sets
        none; else the default, DEFAULT_MTU."""
        if self.batch > self.ring_size:
            raise OfflowError(f"program `{self.name}`: batch {self.batch} must be 1..ring_size "
                              f"({self.ring_size})")
        if not self.segments:
            raise OfflowError(
                f"program `{self.name}` has no segments; place its elements with "
                "program.segment(name, [elements], device=..., cores=[...])"
            )
        where: dict[int, str] = {}
        elements: list[Element] = []
        for seg in self.segments.values():
            for el in seg.elements:
                if id(el) in where:
                    raise OfflowError(
                        f"element `{el.name}` is in segments `{where[id(el)]}` and `{seg.name}`"
                        "; an element runs in exactly one segment"
                    )
                where[id(el)] = seg.name
                elements.append(el)
        names: dict[str, Element] = {}
        for el in elements:
            if el.name in names:
                raise OfflowError(
                    f"two elements are named `{el.name}`; give one another name with name=..."
                )
            names[el.name] = el
        nodes = tuple(self._node(el, where[id(el)]) for el in elements)
        edges: list[Edge] = []
        for el in elements:
            for port, dst in el.links.items():
                if id(dst.element) not in where:
                    raise OfflowError(
                        f"element `{dst.element.name}` is wired from `{el.name}.{port}` but is "
                        "not in any segment; add it to a segment"
                    )
                edges.append(Edge(el.name, port, dst.element.name, dst.port))
        segments = tuple(IRSegment(s.name, s.device, s.cores, s.group, s.steer, s.vector,
                                   s.batch, s.depth, s.ordered, s.also)
                         for s in self.segments.values())
        caches = []
        for cname_, c in self.caches.items():
            for el in (c.first, c.last):
                if id(el) not in where:
                    raise OfflowError(f"cache `{cname_}` is around `{el.name}`, which is not in "
                                      "any segment; add it to a segment")
            caches.append(Cache(cname_, c.first.name, c.last.name, c.ops, c.policy,
                                tuple(sorted(c.options.items()))))
        handlers = [h for _, h in self.channels.values()]
        channels = tuple(Channel(name, dev, self._node(h, ""))
                         for name, (dev, h) in self.channels.items())
        return Graph(
            name=self.name, nodes=nodes, edges=tuple(edges), segments=segments,
            state=self._state_fields(elements), shared=self._shared([*elements, *handlers]),
            channels=channels, caches=tuple(caches), queue_specs=tuple(self.queue_specs.values()),
            ring_size=self.ring_size, batch=self.batch, **self._mtu(fit),
        )

    def _mtu(self, fit: tuple[int, str] | None) -> dict[str, object]:
        """The Graph's mtu, why it is so, and whether it was fitted to the input."""
        if self.mtu is not None:
            return {"mtu": self.mtu, "mtu_why": "set by the program or --set mtu"}
        if fit is None:
            return {"mtu": DEFAULT_MTU, "mtu_why": "the default: no input to size it to"}
        return {"mtu": fit[0], "mtu_why": fit[1], "mtu_fitted": True}

    def _node(self, el: Element, segment: str) -> Node:
        cls = type(el).__name__
        if len(el.outputs) > MAX_OUTPUTS:
            raise OfflowError(f"element `{el.name}` ({cls}) has {len(el.outputs)} outputs; "
                              f"at most {MAX_OUTPUTS} (a bit each in the body's choice)")
        if len(el.drops) > MAX_DROP_REASONS:
            raise OfflowError(f"element `{el.name}` ({cls}): drops names at most "
                              f"{MAX_DROP_REASONS} reasons, not {len(el.drops)}")
        bad = [r for r in el.drops if not c_identifier(r)]
        if bad:  # (a reason is a C name in the body: DROP_WHY(reason))
            raise OfflowError(f"element `{el.name}` ({cls}): drop reason {bad[0]!r} is not a "
                              "C identifier (letters, digits and _, not a C keyword): "
                              "rename it")
        if el.work not in ("", *WORK_KINDS):
            raise OfflowError(f"element `{el.name}` ({cls}): work = {el.work!r}; give one of "
                              f"{', '.join(WORK_KINDS)} (or leave it out)")
        origin, body_line = code_site(el, "body")
        params = []
        for pname, ctype in el.params.items():
            lit = c_literal(el.param_values[pname], ctype, f"element `{el.name}` param `{pname}`")
            params.append((pname, ctype, lit))
        return Node(
            name=el.name, kind=el.kind, cls=cls,
            inputs=tuple(PortSpec(p.name, p.type) for p in el.inputs),
            outputs=tuple(PortSpec(p.name, p.type) for p in el.outputs),
            body=el.body, params=tuple(params),
            tables=tuple((local, ref.name) for local, ref in el.table_refs.items()),
            fields=tuple(Field(n, t) for n, t in el.fields.items()),
            segment=segment, origin=origin, body_line=body_line, helpers=el.helpers,
            drops=tuple((str(r), str(d)) for r, d in el.drops.items()),
            helpers_line=code_site(el, "helpers")[1], includes=tuple(el.includes),
            batch_body=el.batch_body, batch_line=code_site(el, "batch_body")[1],
            work=el.work, end_body=el.at_end, spread_check=el.spread_check,
        )

    def _state_fields(self, elements: list[Element]) -> tuple[Field, ...]:
        decl: dict[str, tuple[str, str]] = {}
        sources: list[tuple[str, dict[str, str]]] = []
        if self.state is not None:
            hints = vars(self.state).get("__annotations__", {})
            sources.append((f"state {self.state.__name__}", {k: str(v) for k, v in hints.items()}))
        sources += [(f"element `{el.name}`", dict(el.fields)) for el in elements]
        for who, fields in sources:
            for fname, ctype in fields.items():
                check_ctype(ctype, f"{who}, field `{fname}`")
                if not c_identifier(fname) or fname.startswith("ofl_"):
                    raise OfflowError(f"{who}, field `{fname}`: a field name is a C identifier "
                                      "(ASCII, not a C keyword) not starting with `ofl_` "
                                      "(offlow's own names)")
                if fname in decl and decl[fname][0] != ctype:
                    raise OfflowError(
                        f"per-packet field `{fname}` is `{decl[fname][0]}` in {decl[fname][1]} "
                        f"but `{ctype}` in {who}; use one type"
                    )
                decl.setdefault(fname, (ctype, who))
        return tuple(Field(n, t) for n, (t, _) in decl.items())

    def _shared(self, elements: list[Element]) -> tuple[SharedTable, ...]:
        tables: dict[str, Shared | SharedMap | Table] = {}
        for el in elements:
            for ref in el.table_refs.values():
                if ref.name in tables and tables[ref.name] != ref:
                    raise OfflowError(f"two different shared tables are named `{ref.name}`")
                tables[ref.name] = ref
        return tuple(
            SharedTable(t.name, t.ctype, t.length) if isinstance(t, Shared)
            else map_table(t) if isinstance(t, SharedMap)
            else SharedTable(t.name, t.ctype, 1, open_fn=t.open_fn, close_fn=t.close_fn,
                             options=t.options, source=t.source, pack_fn=t.pack_fn,
                             open_blob_fn=t.open_blob_fn, stats_fn=t.stats_fn, tcp=t.tcp,
                             ctl_fn=t.ctl_fn, includes=t.includes, src_kinds=t.src_kinds,
                             one_core=t.one_core, check=t.check, keys=t.keys,
                             src_kind_keys=t.src_kind_keys)
            for t in tables.values())


def _check_members(segment: str, members: object) -> None:
    """`members` is a list of elements (or composites) themselves: one clear error for
    a name given instead (`"tx"`), a class (`Count`), or one element not in a list."""
    what = f"segment `{segment}`"
    if isinstance(members, (Element, Composite, str)) or not isinstance(members, Iterable):
        raise OfflowError(f"{what}: members={members!r}; give a list of its elements, "
                          "e.g. [src, count, out]")
    for m in members:
        if isinstance(m, (Element, Composite)):
            continue
        if isinstance(m, str):
            raise OfflowError(f"{what}: {m!r} is a name; give the element itself (the "
                              "object its class made, as in `out = Sink(\"out\")`), not its "
                              "name")
        if isinstance(m, type) and issubclass(m, (Element, Composite)):
            raise OfflowError(f"{what}: {m.__name__} is an element class; give an element "
                              f"made from it ({m.__name__}(\"name\", ...))")
        raise OfflowError(f"{what}: {m!r} ({type(m).__name__}) is not an element")


def _cores(segment: str, cores: object) -> tuple[int, ...]:
    """`cores` as given to segment() or place(): a non-empty list of core numbers."""
    if not isinstance(cores, Iterable) or isinstance(cores, str):
        raise OfflowError(f"segment `{segment}`: cores={cores!r}; give a list of core "
                          "numbers, e.g. cores=[0] or cores=range(4)")
    out = tuple(cores)
    if not out or any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in out):
        raise OfflowError(f"segment `{segment}`: cores must be a non-empty list of core "
                          "numbers")
    return out


PROGRAM_NAME_MAX = 64


def _check_name(name: object) -> None:
    """A program's name goes into file names (its window, /dev/shm/offlow-NAME-PID-TAG;
    its build's folder) and the commands offlow prints: letters, digits, `_`, `.`, `-`."""
    if not isinstance(name, str) or not 1 <= len(name) <= PROGRAM_NAME_MAX or not all(
            c.isascii() and (c.isalnum() or c in "_.-") for c in name) or name[0] == ".":
        raise OfflowError(f"Program({name!r}): a program's name is 1..{PROGRAM_NAME_MAX} "
                          "letters, digits, `_`, `.` or `-` (not starting with `.`): it "
                          "names the run's files")
