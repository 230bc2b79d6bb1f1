"""The TSP case study's device side (NFComms): the cities and their climbers as one
table, and the channel handler through which the host's manager posts climbs and
fetches results (runtime/lib/tsp/include/offlow/tsp_climbers.h; docs/tsp.md)."""

from __future__ import annotations

from pathlib import Path

from offlow.dsl import Handler, Table


def climbers_table(name: str, path: str | Path | None = None, climbers: int = 1) -> Table:
    """The cities of a TSPLIB EUC_2D file (`--opt NAME.path=`) and `climbers` threads
    (`--opt NAME.climbers=`) that climb them, in the process of the device that serves
    the handler; on a device other than the host the cities cross over the bulk channel."""
    opts = (("climbers", str(climbers)),) + ((("path", str(path)),) if path else ())
    return Table(name, "struct ofl_tsp_climbers", "ofl_tsp_climbers_open",
                 "ofl_tsp_climbers_free", options=opts,
                 source="TSPLIB cities; 2-opt climber threads", pack_fn="ofl_tsp_climbers_pack",
                 open_blob_fn="ofl_tsp_climbers_open_blob", includes=("offlow/tsp_climbers.h",),
                 check="offlow.tsp.clib:check_table", keys=("climbers", "path"))


class ClimbJobs(Handler):
    """Serves the manager's messages (enum ofl_tsp_op): info, post a job, is a job
    ready, fetch a job's result (in bulk, from the circular result queue)."""

    tables = ("cities",)
    body = r"""
    const void *slot;
    size_t slot_len;
    uint32_t info[4] = { 0, 0, 0, 0 };
    int32_t rc = ofl_tsp_climbers_handle(cities, msg, len, &slot, &slot_len, info);
    if (slot) {
        BULK_REPLY(slot, slot_len);
        return;
    }
    uint32_t out[5] = { (uint32_t)rc, info[0], info[1], info[2], info[3] };
    REPLY(out, sizeof out);
    """
