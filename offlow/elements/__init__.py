"""The element library."""

from offlow.elements.headers import (
    CheckIPv4,
    CheckIPv6,
    Classify,
    Count,
    DecHopLimit,
    DecTTL,
    Discard,
    ParseEth,
    ParseL4,
)
from offlow.elements.router import LookupIPv4, LookupIPv6, SetNextHop, lpm4_table, lpm6_table

__all__ = [
    "CheckIPv4", "CheckIPv6", "Classify", "Count", "DecHopLimit", "DecTTL", "Discard",
    "LookupIPv4", "LookupIPv6", "ParseEth", "ParseL4", "SetNextHop", "lpm4_table",
    "lpm6_table",
]
