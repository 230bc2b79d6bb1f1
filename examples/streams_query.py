"""The active-NIC seed's partitioned query over a tuple stream: a Filter on the NIC
(keeps the tuples whose v1 is below 20: a fifth of uniform values 0..99) and a
sliding-window Aggregate on the host (the average of v2 over windows of 100 us every
50 us, by ts). Tuples are Ethernet/IPv4/UDP frames of 32-bit values; ts is when each
arrived (docs/streams.md). Results go back where their tuples came from (TupleReply), so
the same program serves tuples sent over UDP:

    offlow tuples generate stream.pcap --count 100000
    offlow run examples/streams_query.py --input stream.pcap --output results.pcap
    offlow run examples/streams_query.py --udp 9000 --duration 10
    offlow tuples send stream.csv --to 9000

Placement is the two `p.segment` lines: `--set select.device=host` runs it all on the
host. `--set select.cores=0,1` filters on two NIC cores (Filter keeps no state), but
each core's ring keeps only its own order, so the Aggregate (one core: its windows are
its own) then drops the tuples that reach it out of ts order as late; a BSort before it
with a slack that covers the interleaving puts them back in order.
"""

from offlow import Program, Sink, Source
from offlow.elements.streams import Aggregate, Filter, TupleIn, TupleReply


def program(keep_below: int = 20, window_us: int = 100, advance_us: int = 50) -> Program:
    """The query; its parameters (the Filter's bound on v1, the windows' size and
    advance) are what the seed tuned for its Figure 4 (`offlow bench seeds`)."""
    p = Program("streams_query")
    src, tuples = Source("rx"), TupleIn("tuples")
    select = Filter("select", attr=1, op="<", value=keep_below)
    average = Aggregate("average", fn="avg", attr=2, size=window_us * 1000,
                        advance=advance_us * 1000)
    back, out = TupleReply("back"), Sink("tx")
    src >> tuples >> select >> average >> back >> out

    # Placement (the schedule): one line per segment.
    p.segment("select", [src, tuples, select], device="nic", cores=[0])
    p.segment("aggregate", [average, back, out], device="host", cores=[0])
    return p
