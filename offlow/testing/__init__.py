"""Test inputs shared by the test suite and by users testing their own programs."""

from offlow.testing.malformed import (
    Case,
    count_categories,
    malformed_cases,
    write_malformed_pcap,
)

__all__ = ["Case", "count_categories", "malformed_cases", "write_malformed_pcap"]
