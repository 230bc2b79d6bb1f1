"""A user's sensor query over a tuple stream (docs/streams.md, written from the docs):
tuples (ts, sensor reading, ..., room) come from a capture; a predicate of the user's
own C drops the readings whose first and third values sum to a multiple of three (a
made-up rule for a faulty probe); a BSort puts the slightly disordered stream back in
ts order, and an Aggregate gives each room's hottest reading (max of v2, grouped by v4)
over windows of 777 ns every 333 ns.

    offlow run tests/programs/hot_sensors.py --input readings.pcap --output hot.pcap

As written the probe rule runs on the NIC and the query on the host; `--set
query.device=nic` runs it all on the NIC, `--set probe.device=host` all on the host."""

from offlow import Element, Port, Program, Sink, Source
from offlow.elements.streams import Aggregate, BSort, TupleIn


class FaultyProbe(Element):
    """Ends (consumed) a tuple whose v1 + v3 is a multiple of `every`; a tuple of fewer
    than three values is dropped (`too_few`)."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    params = {"every": "int32_t"}
    includes = ("offlow/streams.h",)
    drops = {"not_tuple": "not a tuple frame", "too_few": "fewer than three values"}
    body = r"""
    struct ofl_tuple_view t;    /* the values stay in the frame: "parse, don't copy" */
    if (ofl_tuple_parse(pkt->data, pkt->len, &t) < 0)
        DROP_WHY(not_tuple);    // TupleIn let it in: should not happen }
    if (t.n < 3u)
        DROP_WHY(too_few);
    int64_t sum = (int64_t)ofl_tuple_v(pkt->data, &t, 1) + ofl_tuple_v(pkt->data, &t, 3);
    if (sum % every == 0)       /* "faulty": { the probe's rule } */
        CONSUME();
    """

    def __init__(self, name: str, every: int) -> None:
        super().__init__(name, every=every)


def program(size: int = 777, advance: int = 333, slack: int = 4) -> Program:
    p = Program("hot_sensors")
    readings, tuples = Source("readings"), TupleIn("tuples")
    probe_rule = FaultyProbe("probe_rule", 3)
    reorder = BSort("reorder", slack=slack)
    hottest = Aggregate("hottest", fn="max", attr=2, size=size, advance=advance, group=4,
                        groups=13)
    hot = Sink("hot")
    readings >> tuples >> probe_rule >> reorder >> hottest >> hot
    p.segment("probe", [readings, tuples, probe_rule], device="nic", cores=[0])
    p.segment("query", [reorder, hottest, hot], device="host", cores=[0])
    return p
