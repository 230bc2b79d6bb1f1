/* The live copy of a stats file: what a process writes when asked for its counters
 * while it runs (live.h), whole or not at all.
 *
 * The copy of stats file PATH is PATH.live: one JSON object, "device", "live_seq" (the
 * request answered), "live_final": 1 when these are the process's last counts, and
 * "now_ns" (ofl_now_ns), then the members its body function writes (those of the stats
 * file written at exit).  It is written to PATH.live.tmp and renamed over PATH.live,
 * so a reader never sees half a file; a copy that could not be written whole leaves the
 * previous one in place. */
#ifndef OFL_LIVE_FILE_H
#define OFL_LIVE_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "offlow/stats.h"

/* Write the members of a process's counters into the open object of `j`. */
typedef void (*ofl_live_body_fn)(struct ofl_json *j, const void *arg);

/* Write the live copy of stats file `stats` for process `device`, answering request
 * `seq` (`final`: the last counts, written as the process is about to exit), its
 * counters written by body(j, arg). Nothing when `stats` is NULL (no --stats).
 * Returns 0, or a negative errno: -ENAMETOOLONG (the path), the creation's error, or
 * the writing's (-EIO when the stream says only that it failed); on an error nothing
 * is left beside the previous copy. */
int ofl_live_write(const char *stats, const char *device, uint32_t seq, bool final,
                   ofl_live_body_fn body, const void *arg);

#endif
