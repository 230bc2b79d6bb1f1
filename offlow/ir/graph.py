"""The IR: plain frozen data classes.  Passes are functions Graph -> Graph that
return new values (dataclasses.replace) and never mutate their input."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from offlow.ir.types import KEY_TYPES, Field


@dataclass(frozen=True)
class PortSpec:
    name: str
    type: str


@dataclass(frozen=True)
class BodyFacts:
    """What the C body does with the per-packet state and the packet."""

    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()
    kills: frozenset[str] = frozenset()
    emits: frozenset[str] = frozenset()
    uses_pkt: bool = False
    reads_ts: bool = False  # the packet's timestamp (pkt->ts_ns)
    macros: tuple[str, ...] = ()  # macros the body #defines (undefined after it)
    makes: frozenset[str] = frozenset()  # ports it sends packets it built on (MAKE)
    sends: bool = False  # it may send a packet on several ports (SEND: copies)
    fails: bool = False  # it may fail its core (FAIL, FAIL_AT)
    # where its per-packet body may end having chosen no output (no EMIT, SEND, DROP or
    # CONSUME: its last statement, `prog.py:25`, or "its body" when empty), for an element
    # of several outputs, which has no default one; None when it cannot
    unchosen_at: str | None = None
    # the locals of the shared arrays its bodies only add to (passes/tableuse.py), and
    # each add builtin they call with the local it adds to ("": something else)
    adds_only: frozenset[str] = frozenset()
    atomic_adds: frozenset[tuple[str, str]] = frozenset()
    # the locals of the shared arrays its bodies update with a plain read-modify-write,
    # and (local, pointer, the helper function it is in or "") for those made through a
    # pointer into the table, (local, where: `prog.py:12`, helper or "") for each of them
    plain_updates: frozenset[str] = frozenset()
    plain_via: frozenset[tuple[str, str, str]] = frozenset()
    plain_at: frozenset[tuple[str, str, str]] = frozenset()
    # (local, where `f`) for each pointer into the table given to a function whose body
    # is not seen (a function pointer's)
    unseen_calls: frozenset[tuple[str, str]] = frozenset()
    # (local, where `x`) for each pointer into the table kept where the analysis cannot
    # follow it (a global, memory reached through a pointer: passes/tableuse.py)
    unseen_stores: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Node:
    name: str
    kind: str  # "element" | "source" | "sink"
    cls: str  # the Python class, for messages
    inputs: tuple[PortSpec, ...]
    outputs: tuple[PortSpec, ...]
    body: str = ""
    params: tuple[tuple[str, str, str], ...] = ()  # (name, C type, C literal)
    tables: tuple[tuple[str, str], ...] = ()  # (local name, shared table name)
    fields: tuple[Field, ...] = ()  # state fields the element declares
    segment: str = ""
    facts: BodyFacts | None = None
    origin: str = ""  # the file that defines the element's class, for messages and #line
    body_line: int = 0  # the line of that file where the body starts (0: made at run time)
    helpers: str = ""  # C at file scope for the body (Element.helpers)
    drops: tuple[tuple[str, str], ...] = ()  # (reason, what it means) for DROP_WHY
    helpers_line: int = 0  # the line of `origin` where the helpers start (0: unknown)
    includes: tuple[str, ...] = ()  # runtime headers its body uses (Element.includes)
    prelude: str = ""  # file-scope C emitted before the body; `{target:PORT}` names the
    #                    function that takes a packet sent on PORT, `{made}` counts a packet
    #                    the node made (compiler-made nodes)
    # C run once per core when the node's segment is done there, before its output
    # queues close (compiler-made nodes: a cache writing back what it holds): `ctx`, the
    # node's tables, `{target:PORT}` as in the prelude, and `{kept_state}`: the state of
    # the first packet this core's node saw (`const struct ofl_state *`, NULL if none).
    at_end: str = ""
    # A user element's own end code (Element.at_end): a function of `ctx` and `state` (a
    # copy of the first state this core's node saw, zeroed if none) that may MAKE packets
    end_body: str = ""
    # C over a vector of packets (Element.batch_body), run instead of `body` where the
    # node's segment runs batches (offlow.passes.fuse), and what it does (its own
    # macros; `facts` holds both bodies' effect on the state)
    batch_body: str = ""
    batch_line: int = 0  # the line of `origin` where the batch body starts (0: unknown)
    batch_facts: BodyFacts | None = None
    work: str = ""  # its kind of work for the planner (WORK_KINDS; "": inferred)
    spread_check: str = ""  # Element.spread_check: C run where a queue spread over devices
    #                         is steered by a field the node writes

    @property
    def work_kind(self) -> str:
        """Its kind of work: its own, else lookup where it uses a table, else integer."""
        return self.work or ("lookup" if self.tables else "integer")

    def output(self, name: str) -> PortSpec:
        return next(p for p in self.outputs if p.name == name)

    def input(self, name: str) -> PortSpec:
        return next(p for p in self.inputs if p.name == name)


@dataclass(frozen=True)
class Channel:
    """A named channel between host programs and `device`, whose messages `handler`
    (a node of kind "handler", in no segment) answers there."""

    name: str
    device: str
    handler: Node


@dataclass(frozen=True)
class Edge:
    src: str
    src_port: str
    dst: str
    dst_port: str

    def __str__(self) -> str:
        return f"{self.src}.{self.src_port} -> {self.dst}.{self.dst_port}"


@dataclass(frozen=True)
class Segment:
    name: str
    device: str
    cores: tuple[int, ...]
    group: bool = False  # a core group: a master hands each batch out in slices
    steer: str = ""  # per-packet field that picks the consumer core; "" = round robin
    vector: bool = True  # its elements' batch bodies may run (else per packet only)
    # offload settings (a target that runs batches: gpu): packets per batch and batches
    # in flight; 0 = the target's default
    batch: int = 0
    depth: int = 0
    ordered: bool = False  # a core group whose output keeps its input order
    # a second device running the segment at once, the packets split between the two by
    # a balancer (offlow.passes.balance lowers it into a segment of its own)
    also: str = ""
    # the device of each core (by index) when the segment is spread over several devices
    # by the queue into it (offlow.passes.spread); empty: every core on `device`
    spread: tuple[str, ...] = ()

    def core_device(self, k: int) -> str:
        """The device that runs core `k` (an index into `cores`)."""
        return self.spread[k] if self.spread else self.device

    @property
    def devices(self) -> tuple[str, ...]:
        """The devices it runs on: `device`, or every device it is spread over."""
        return tuple(dict.fromkeys(self.spread)) if self.spread else (self.device,)


@dataclass(frozen=True)
class SharedTable:
    """A shared array (`length` scalars of `ctype`) or, when `open_fn` is set, a table
    object built at start-up by `open_fn` from run-time `options`."""

    name: str
    ctype: str
    length: int
    home: str = ""  # a device, or "window" (used by several devices); set by placement
    open_fn: str = ""
    close_fn: str = ""
    options: tuple[tuple[str, str], ...] = ()
    source: str = ""
    pack_fn: str = ""  # host side of a table that travels (see dsl.values.Table)
    open_blob_fn: str = ""
    bulk: bool = False  # set by the plan: sent to its device over channel table.NAME
    ctl: str = ""  # set by the plan: the device that serves its control channel ctl.NAME
    ctl_fn: str = ""  # the object's control function (dsl Table; see runtime ctl.h)
    stats_fn: str = ""  # writes the object's counters to the stats file (dsl Table)
    # stats_fn takes a 4th argument, ``bool contents``: false for a live read of the
    # counters only (runtime live.h's OFL_LIVE_TABLES unset), which leaves out the
    # object's entries (a hash map's pairs) and keeps its counters
    stats_contents: bool = False
    tcp: bool = False   # serves the run's TCP socket, when it has one (dsl Table)
    includes: tuple[str, ...] = ()  # runtime headers of its type and functions (dsl Table)
    src_kinds: tuple[tuple[str, str], ...] = ()  # source kinds it adds: (kind, C function)
    one_core: bool = False  # its users run on one core, unlocked (dsl Table)
    check: str = ""  # module:function checking its options before a run (dsl Table)
    # the option keys its C code reads (dsl Table's `keys`): a user's --opt of another is
    # refused before any process starts (offlow.optkeys); empty: not declared, the
    # device process refuses it (gen.h's ofl_args_check_unread)
    keys: tuple[str, ...] = ()
    # the keys each source kind it adds reads beside every source's (dsl Table)
    src_kind_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # a hash map (dsl SharedMap): its key's (field, type) pairs, value's C type (an
    # integer type, or `struct NAME_value` for a record), a record's (field, type)
    # pairs (empty for an integer value) and entries
    map_key: tuple[tuple[str, str], ...] = ()
    map_value: str = ""
    map_record: tuple[tuple[str, str], ...] = ()
    map_entries: int = 0

    @property
    def is_object(self) -> bool:
        return bool(self.open_fn)

    @property
    def is_map(self) -> bool:
        return bool(self.map_key)

    @property
    def map_key_size(self) -> int:
        """The bytes of a map's packed key struct."""
        return sum(KEY_TYPES[t] for _, t in self.map_key)

    @property
    def map_value_size(self) -> int:
        """The bytes of a map's value (a record's packed struct)."""
        if self.map_record:
            return sum(KEY_TYPES[t] for _, t in self.map_record)
        return KEY_TYPES[self.map_value]


ENQUEUE_MODES = ("block", "drop")
# What an element's cost scales with on another device (a device profile's `speed`):
# plain integer work, memory-bound table lookups, hashing and crypto
WORK_KINDS = ("integer", "lookup", "hash")
# The largest frame (the mtu) a program may take: an entry header's 16-bit length.
MTU_MAX = 65535
MTU_MIN = 64
# The mtu where nothing sizes it to an input (see Program's `mtu`).
DEFAULT_MTU = 2048
MAX_INSTANCES = 256
# Offload settings (segment batch= and depth=, for a target that runs batches): the
# most packets in one batch (Knapp's sweep goes to 64 Ki) and batches in flight (the
# runtime's OFL_GPU_MAX_DEPTH, runtime/lib/gpu: tests/test_gpu.py checks they agree).
OFFLOAD_BATCH_MAX = 65536
OFFLOAD_DEPTH_MAX = 8
# Outputs of one element: a bit each in the mask its body sets, below gen.h's
# OFL_WHY (bit 29), OFL_CONSUMED (bit 30) and OFL_DECIDED (bit 31).
MAX_OUTPUTS = 29
# Named drop reasons of one element (DROP_WHY): a number each in the mask's low byte.
MAX_DROP_REASONS = 256
# The drop reason of a packet a body made (MAKE) that is longer than the mtu: no queue
# entry or sink could take it (every element that makes packets has it).
MADE_TOO_LONG = ("made_too_long", "a packet it made (MAKE) is longer than the mtu")
# the reason of the packet an element's FAIL (FAIL_AT) drops (body.h)
FAILED = ("failed", "FAIL() in its body: the run's error; with the packets its core "
                   "held then, dropped unrun")
# The drop reason of a packet whose element has several outputs (so no default) and
# whose body chose none of them, nor DROP or CONSUME (it ended without a word).
NO_OUTPUT = ("no_output", "its body chose no output (EMIT or SEND), nor DROP or CONSUME: an "
             "element with several outputs has no default one")


@dataclass(frozen=True)
class QueueChannel:
    """One edge carried by a logical queue (a channel of it): its entries carry the
    channel's index in their header, and only the fields live after this edge."""

    edge: Edge
    fields: tuple[Field, ...] = ()  # live per-packet fields it carries
    carries_data: bool = True  # the packet bytes are needed downstream
    carries_ts: bool = True  # the packet's timestamp is read downstream (or a sink writes it)


@dataclass(frozen=True)
class QueueSpec:
    """How the program maps the logical queue from `src_segment` to `dst_segment`
    onto rings (Program.queue); unset parts take their defaults."""

    src_segment: str
    dst_segment: str
    instances: int = 0  # physical rings per producer core; 0: one per consumer core
    steer: str | None = None  # field choosing the instance; None: the segment's; "": none
    enqueue: str = "block"  # "block": wait for room; "drop": a full ring drops
    devices: tuple[str, ...] = ()  # remote devices its instances are spread over (scale-out)


@dataclass(frozen=True)
class Queue:
    """A logical queue: every edge from `src_segment` to `dst_segment` is one of its
    channels. Each producer core has `instances` rings (physical queues); a packet
    goes to instance `state->steer % instances` (round robin per loop turn when
    `steer` is ""), instance i is taken by consumer core i % consumers. Entries of
    all channels share the rings, so order is kept per ring across channels."""

    name: str
    src_segment: str
    dst_segment: str
    crosses_device: bool
    channels: tuple[QueueChannel, ...]
    ring_size: int = 1024
    batch: int = 32
    instances: int = 1
    steer: str = ""
    enqueue: str = "block"

    @property
    def tagged(self) -> bool:
        """Entries say which channel they belong to (more than one channel)."""
        return len(self.channels) > 1

    @property
    def edge(self) -> Edge:
        """The edge of a queue with one channel."""
        if self.tagged:
            raise ValueError(f"queue {self.name} has {len(self.channels)} channels")
        return self.channels[0].edge

    @property
    def fields(self) -> tuple[Field, ...]:
        """Every field some channel carries (the union, first seen first)."""
        out: dict[str, Field] = {}
        for c in self.channels:
            for f in c.fields:
                out.setdefault(f.name, f)
        return tuple(out.values())

    @property
    def carries_data(self) -> bool:
        """Some channel carries the packet bytes."""
        return any(c.carries_data for c in self.channels)

    def channel_of(self, edge: Edge) -> int | None:
        return next((k for k, c in enumerate(self.channels) if c.edge == edge), None)


# Channels named so carry tables between processes (runtime/core/src/gen_chan.c); the
# program's own channels may not be named so.
TABLE_CHANNEL_PREFIX = "table."
# Channels named so read and change a table of the running program (offlow ctl,
# offlow/control.py; runtime/core/include/offlow/ctl.h).
CTL_CHANNEL_PREFIX = "ctl."
# Channels named so take a device process's reloads (offlow reload, offlow/reload.py;
# runtime/core/include/offlow/reload.h).
RELOAD_CHANNEL_PREFIX = "reload."
# The longest channel name (runtime/core/include/offlow/chan.h: OFL_CHAN_NAME_MAX).
CHANNEL_NAME_MAX = 31


def channel_names(g: Graph) -> list[str]:
    """Every channel of the window's region: the program's, then one per table the
    host sends to a device, then one per table that a process serves control
    messages for."""
    return ([c.name for c in g.channels] +
            [f"{TABLE_CHANNEL_PREFIX}{t.name}" for t in g.shared if t.bulk] +
            [f"{CTL_CHANNEL_PREFIX}{t.name}" for t in g.shared if t.ctl])


@dataclass(frozen=True)
class CacheOps:
    """The C side of a cache for one protocol (see offlow.dsl.Program.cache).

    ``int request_fn(ctype *c, struct ofl_pkt *pkt, ARGS, uint64_t *ticket,
    void (*emit)(void *arg, struct ofl_pkt *pkt, uint64_t key_hash), void *arg)``
    returns 0 (hit: the packet is now the reply), 1 (miss: send it on to the region,
    its reply will come back with `ticket`) or a negative errno (drop); `emit` sends a
    packet the cache makes (a write-back) into the region ahead of the request.
    ``int reply_fn(ctype *c, struct ofl_pkt *pkt, REPLY_ARGS, uint64_t ticket)`` returns
    0 (send the reply on) or 1 (drop it: a reply to the cache's own traffic).
    `args` are the C expressions ARGS (over `state`); `reply_args` those of REPLY_ARGS,
    where the region can tell the cache about its reply through per-packet fields its
    elements set (the same as `args` when empty); `steer` is the per-packet field a
    made packet's key hash goes to (`steer_expr`, over `hash`); `internal` is the
    ticket of made packets; `made`, when set, a per-packet field that made packets
    carry as 1 (clients' packets as 0: fields start zeroed), so that the region can
    tell the cache's own traffic from clients' (a memcached store keeps the CAS a
    written-back item carries)."""

    ctype: str
    open_fn: str
    close_fn: str
    request_fn: str
    reply_fn: str
    args: str = ""
    reply_args: str = ""
    steer: str = ""
    steer_expr: str = "hash"
    internal: str = "UINT64_MAX"
    made: str = ""
    source: str = ""
    # (setting, lowest, highest) of each number setting the C side takes, checked when
    # the program is built (Program.set_cache) rather than by a device process at start
    limits: tuple[tuple[str, int, int], ...] = ()
    # ``void stats_fn(struct ofl_json *j, const char *name, const ctype *c)``: the
    # cache's counters in the stats file
    stats_fn: str = ""
    # write-back: ``int finish_fn(ctype *c, emit, void *arg)`` writes back every written
    # entry through `emit` when the lookup's segment is done (the run stops), returning
    # how many
    finish_fn: str = ""
    # the runtime headers that declare `ctype` and these functions (offlow/kvcache.h)
    includes: tuple[str, ...] = ()
    # the option keys open_fn reads (the cache table's `keys`: offlow.optkeys)
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cache:
    """A cache around the region of elements `first`..`last` (the caching construct):
    `expand_caches` turns it into a lookup element before the region (hits answered
    there, misses sent on through it) and an update element after it."""

    name: str
    first: str
    last: str
    ops: CacheOps
    policy: str = "write_through"  # or "write_back"
    options: tuple[tuple[str, str], ...] = ()  # size and eviction rule, for the table


@dataclass(frozen=True)
class Graph:
    name: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    segments: tuple[Segment, ...]
    state: tuple[Field, ...]
    shared: tuple[SharedTable, ...]
    queues: tuple[Queue, ...] = ()
    channels: tuple[Channel, ...] = ()
    caches: tuple[Cache, ...] = ()
    queue_specs: tuple[QueueSpec, ...] = ()  # Program.queue settings, by segment pair
    mtu: int = DEFAULT_MTU
    mtu_why: str = ""  # how the mtu was chosen, for explain and the run report
    mtu_fitted: bool = False  # sized to the input (not set by the program): may be lowered
    ring_size: int = 1024
    batch: int = 32
    notes: tuple[str, ...] = field(default=())

    @cached_property
    def by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    def node(self, name: str) -> Node:
        return self.by_name[name]

    def segment(self, name: str) -> Segment:
        return next(s for s in self.segments if s.name == name)

    def out_edges(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.src == name]

    def in_edges(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.dst == name]

    def queue_on(self, edge: Edge) -> Queue | None:
        """The logical queue that carries `edge`, if it crosses segments."""
        return next((q for q in self.queues if q.channel_of(edge) is not None), None)

    def channel_on(self, edge: Edge) -> tuple[Queue, int] | None:
        """The logical queue and channel index that carry `edge`."""
        for q in self.queues:
            k = q.channel_of(edge)
            if k is not None:
                return q, k
        return None

    def devices(self) -> list[str]:
        seen: list[str] = []
        for s in self.segments:
            seen += [d for d in s.devices if d not in seen]
        return seen


def topological(g: Graph) -> list[str]:
    """Node names in an order where every edge goes forward (the graph must be acyclic)."""
    indeg = {n.name: 0 for n in g.nodes}
    for e in g.edges:
        indeg[e.dst] += 1
    ready = [n.name for n in g.nodes if indeg[n.name] == 0]
    order: list[str] = []
    while ready:
        v = ready.pop(0)
        order.append(v)
        for e in g.out_edges(v):
            indeg[e.dst] -= 1
            if indeg[e.dst] == 0:
                ready.append(e.dst)
    return order
