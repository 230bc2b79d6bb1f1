/* The LPM tables as table objects of generated programs (runtime/lib/lpm:
 * lpm_tables.c): built by name from a program's run-time options, or from the routes
 * the host sent (a table that travels): the functions of offlow/elements/router.py's
 * tables. */
#ifndef OFL_LPM_TABLES_H
#define OFL_LPM_TABLES_H

#include <stddef.h>

#include "offlow/ctl.h"
#include "offlow/gen.h"
#include "offlow/lpm4.h"
#include "offlow/lpm6.h"

/* Build the IPv4 (IPv6: opened for updates, ofl_lpm6_open_live) LPM table named `name`
 * from its options: path= (a prefix file, text or gzip) and nports= (next hops
 * 1..nports by the file rule, default 16).
 * Says the error (ofl_start_failf). */
int ofl_lpm4_open_opts(struct ofl_lpm4 **t, const struct ofl_args *a, const char *name);
int ofl_lpm6_open_opts(struct ofl_lpm6 **t, const struct ofl_args *a, const char *name);

/* The host side of a table that travels: read the prefix file of table `name` (its
 * options as above) and return its IPv4 (IPv6) routes as one malloc'ed blob, after
 * what the file held besides them (its lines, those not prefixes, the first). */
int ofl_lpm4_pack(void **blob, size_t *len, const struct ofl_args *a, const char *name);
int ofl_lpm6_pack(void **blob, size_t *len, const struct ofl_args *a, const char *name);

/* The device side: build the table (IPv6: opened for updates) from a blob of routes the
 * host sent (ofl_lpm4_pack's). A blob that is not a whole number of routes, or holds a
 * bad route, is -EINVAL (printed). */
int ofl_lpm4_open_blob(struct ofl_lpm4 **t, const void *blob, size_t len,
                       const struct ofl_args *a, const char *name);
int ofl_lpm6_open_blob(struct ofl_lpm6 **t, const void *blob, size_t len,
                       const struct ofl_args *a, const char *name);

/* The stats of table `name` (its stats_fn): when its prefix file held lines that are
 * not prefixes, an object saying how many of its lines and the first of them ("kind":
 * "lpm", "path", "lines", "not_prefixes", "first_not_prefix"); nothing otherwise. */
void ofl_lpm4_stats_json(struct ofl_json *j, const char *name, const struct ofl_lpm4 *t);
void ofl_lpm6_stats_json(struct ofl_json *j, const char *name, const struct ofl_lpm6 *t);

/* Answer a control message (ctl.h) for an IPv4 table: info, route add, route delete
 * (ofl_lpm4_add, ofl_lpm4_del, while lookups run). Called by the one thread that
 * serves the table's control channel. */
void ofl_lpm4_ctl(struct ofl_lpm4 *t, const uint8_t *msg, size_t len, struct ofl_ctl_reply *r);

/* The same for an IPv6 table (opened for updates: ofl_lpm6_add, ofl_lpm6_del, each a
 * rebuild off to the side and one swap while lookups run). */
void ofl_lpm6_ctl(struct ofl_lpm6 *t, const uint8_t *msg, size_t len, struct ofl_ctl_reply *r);

#endif
