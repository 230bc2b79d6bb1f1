"""Host-side arithmetic of the sketches the device keeps (see offlow.elements.sketch)."""

from offlow.sketch.countmin import error_bound, estimate, flow_key
from offlow.sketch.pcsa import (
    PCSA_PHI,
    parse_summary,
    pcsa_estimate,
    pcsa_raw,
    pcsa_standard_error,
)

__all__ = ["PCSA_PHI", "error_bound", "estimate", "flow_key", "parse_summary", "pcsa_estimate",
           "pcsa_raw", "pcsa_standard_error"]
