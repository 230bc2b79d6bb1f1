/* The tables of a segment on the xdp target: built by the runtime from the run's
 * options, as on every device, and copied into the program's array maps before it
 * runs (the layout of offlow/lpm_bpf.h). */
#ifndef OFL_XDP_TABLES_H
#define OFL_XDP_TABLES_H

#include <stdbool.h>
#include <stddef.h>

#include <bpf/libbpf.h>

#include "offlow/gen.h"
#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "xdp_run.h"

/* The built tables of one run. */
struct ofl_xdp_tables {
    struct ofl_lpm4 **lpm4;   /* one per desc->lpm4 entry */
    size_t n;
    struct ofl_lpm6 **lpm6;   /* one per desc->lpm6 entry (handles opened for updates) */
    size_t n6;
};

/* Build every table of `d` from the options `a` (a table that does not open says why:
 * ofl_start_failf; a user's option a table never read is refused:
 * ofl_args_check_unread) and size their maps in `obj`, which is opened, not yet
 * loaded. 0 or a negative errno; free with ofl_xdp_tables_free in any case. */
int ofl_xdp_tables_open(struct ofl_xdp_tables *t, const struct ofl_xdp_desc *d,
                        const struct ofl_args *a, struct bpf_object *obj);

/* Copy the built tables into the maps of the loaded `obj`. 0 or a negative errno
 * (printed). */
int ofl_xdp_tables_fill(const struct ofl_xdp_tables *t, const struct ofl_xdp_desc *d,
                        struct bpf_object *obj);

/* One LPM table's maps (lpm_bpf.h's, named `maps`_...) in `obj`: sized to the built
 * table `t` (the IPv6 table's trie `p`) while `obj` is opened, not loaded; filled from
 * it once loaded. 0 or a negative errno (printed). */
int ofl_xdp_lpm4_size(struct bpf_object *obj, const char *maps, const struct ofl_lpm4 *t);
int ofl_xdp_lpm4_fill(struct bpf_object *obj, const char *maps, const struct ofl_lpm4 *t);
int ofl_xdp_lpm6_size(struct bpf_object *obj, const char *maps, const struct ofl_lpm6_trie *p);
int ofl_xdp_lpm6_fill(struct bpf_object *obj, const char *maps, const struct ofl_lpm6_trie *p);

/* Write each shared array of `d` (its map in the loaded `obj`) into the stats' tables
 * object `j`, as every device reports its arrays (a per-CPU one summed over the CPUs);
 * without `contents` (a live read of the counters only, live.h) its length alone,
 * read from no map (stats.h: ofl_stats_table_length). */
void ofl_xdp_arrays_report(struct ofl_json *j, const struct ofl_xdp_desc *d,
                           struct bpf_object *obj, bool contents);

/* Write each shared hash map of `d` (walked through its map's fd in the loaded `obj`:
 * bpf_map_get_next_key) into the stats' tables object `j`, as map.h reports a map on
 * every device, its per-CPU `full` counter summed with `ctl_full`[i] (the control
 * channel's refused sets of map i; NULL: none); without `contents` its keys counted
 * and no value read, no pairs written (ofl_map_json). */
void ofl_xdp_maps_report(struct ofl_json *j, const struct ofl_xdp_desc *d,
                         struct bpf_object *obj, const uint64_t *ctl_full, bool contents);

/* Map `x`'s per-CPU `full` counter in the loaded `obj`, summed. 0 or a negative errno. */
int ofl_xdp_map_full(struct bpf_object *obj, const struct ofl_xdp_map *x, uint64_t *full);

/* Free the built tables. */
void ofl_xdp_tables_free(struct ofl_xdp_tables *t);

#endif
