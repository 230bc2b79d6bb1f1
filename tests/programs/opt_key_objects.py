"""Table objects of every stream operator's kind, and a user's own table object that
declares no option keys (tests/test_opt_keys.py): tuples through BSort, Aggregate, Join
and Resample, then the user's element, which holds its table (a BSort's state, opened
by the user's own declaration) without using it."""

from offlow import Element, Port, Program, Sink, Source, Table
from offlow.elements.streams import Aggregate, BSort, Join, Resample, TupleIn

# the user's own: no `keys`, so a key it does not read is the device process's to refuse
MINE = Table("mine", "struct ofl_bsort", "ofl_bsort_open_opts", "ofl_bsort_close",
             options=(("slack", "1"),), includes=("offlow/streams.h",), one_core=True)


class Keep(Element):
    """Passes every tuple on; holds the user's table."""

    inputs = (Port("inp", "tuple"),)
    outputs = (Port("out", "tuple"),)
    tables = ("mine",)
    body = r"""
    (void)mine;  /* held, not used: what is tested is its options */
    """


def program() -> Program:
    p = Program("opt_key_objects")
    src, tuples, out = Source("rx"), TupleIn("tuples"), Sink("tx")
    order = BSort("order", slack=2)
    sums = Aggregate("sums", fn="sum", attr=1, size=1000, advance=1000)
    pairs = Join("pairs", size=1000, left_port=1, right_port=2, left_key=1, right_key=1)
    steps = Resample("steps", size=1000, left_port=1, right_port=2, attr=1)
    keep = Keep("keep", mine=MINE)
    src >> tuples >> order >> sums >> pairs >> steps >> keep >> out
    p.segment("all", [src, tuples, order, sums, pairs, steps, keep, out], device="host",
              cores=[0])
    return p
