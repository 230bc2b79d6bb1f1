"""The TSP climbers on the NIC in a program with a host segment: the host process reads
the cities' file (path=) and sends them over the bulk channel table.cities; the NIC
process starts the climbers (climbers=). Each side reads keys the other never does
(tests/test_unread_table_opts.py)."""

from offlow import Program, Source
from offlow.elements import Discard
from offlow.elements.tsp import ClimbJobs, climbers_table
from offlow.paths import DATA


def program() -> Program:
    p = Program("climbers_sent")
    cities = climbers_table("cities", DATA / "kroA100.tsp")
    src, idle = Source("rx"), Discard("idle")
    src >> idle
    p.segment("rx", [src], device="host", cores=[0])
    p.segment("idle", [idle], device="nic", cores=[0])
    p.channel("tsp", ClimbJobs("jobs", cities=cities), device="nic")
    return p
