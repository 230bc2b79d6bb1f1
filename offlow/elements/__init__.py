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

__all__ = [
    "CheckIPv4", "CheckIPv6", "Classify", "Count", "DecHopLimit", "DecTTL", "Discard",
    "ParseEth", "ParseL4",
]
