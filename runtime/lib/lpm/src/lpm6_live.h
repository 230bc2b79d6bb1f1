/* What lpm6.c calls of a handle opened for updates (lpm6_live.c). */
#ifndef OFL_LPM6_LIVE_H
#define OFL_LPM6_LIVE_H

#include <stddef.h>

#include "offlow/lpm6.h"

/* Free what the handle's `live` holds: its tables, routes and itself. */
void ofl_lpm6_live_free(struct ofl_lpm6_live *l);

/* Bytes it holds: the current table, the routes and itself. */
size_t ofl_lpm6_live_memory(const struct ofl_lpm6_live *l);

#endif
