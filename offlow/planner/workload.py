"""The traffic a plan is calibrated with (`offlow plan --workload`): the run's synthetic
generator, a capture, or Floem's key-value workload written as a capture."""

from __future__ import annotations

from pathlib import Path

from offlow.errors import OfflowError
from offlow.kvs.capture import kvs_requests


def resolve(workload: str, work: Path) -> Path | None:
    """The capture of a workload: None for `synthetic` (the run's generator), a file
    written under `work` for `kvs`, else the path given (which must exist)."""
    if workload == "synthetic":
        return None
    if workload == "kvs":
        path = work / "kvs-requests.pcap"
        kvs_requests(path)
        return path
    path = Path(workload)
    if not path.is_file():
        raise OfflowError(f"--workload {workload}: no such capture (give synthetic, kvs or a "
                          "pcap file)")
    return path
