/* The LPM tables as table objects of generated programs (lpm_tables.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "offlow/err.h"
#include "offlow/lpm_tables.h"
#include "offlow/routes.h"

/* Path and port count of LPM table `name`; -EINVAL with a message if missing/bad. */
static int lpm_opts(const struct ofl_args *a, const char *name, const char **path,
                    unsigned *nports)
{
    *path = ofl_args_get(a, name, "path", NULL);
    const char *np = ofl_args_get(a, name, "nports", "16");
    char *end;
    unsigned long n = strtoul(np, &end, 10);
    if (!*path) {
        ofl_start_failf(a, "table %s needs a prefix file: --opt %s.path=FILE", name, name);
        return -EINVAL;
    }
    if (end == np || *end || n < 1 || n > OFL_ROUTE_MAX_HOP) {
        ofl_start_failf(a, "table %s: nports=%s must be 1..%u", name, np,
                        (unsigned)OFL_ROUTE_MAX_HOP);
        return -EINVAL;
    }
    *nports = (unsigned)n;
    return 0;
}

/* Report the outcome of building table `name`. */
static int built(const struct ofl_args *a, const char *name, const char *path, int rc,
                 const char *errbuf)
{
    if (rc < 0)
        ofl_start_failf(a, "table %s from %s: %s", name, path,
                        errbuf[0] ? errbuf : ofl_strerror(rc));
    return rc;
}

int ofl_lpm4_open_opts(struct ofl_lpm4 **t, const struct ofl_args *a, const char *name)
{
    const char *path;
    unsigned nports;
    char errbuf[256] = "";
    int rc = lpm_opts(a, name, &path, &nports);
    if (rc < 0) return rc;
    return built(a, name, path, ofl_lpm4_open_file(t, path, nports, errbuf), errbuf);
}

int ofl_lpm6_open_opts(struct ofl_lpm6 **t, const struct ofl_args *a, const char *name)
{
    const char *path;
    unsigned nports;
    char errbuf[256] = "";
    int rc = lpm_opts(a, name, &path, &nports);
    if (rc < 0) return rc;
    struct ofl_routes r;
    ofl_routes_init(&r);
    *t = NULL;
    rc = ofl_routes_load(&r, path, nports, errbuf);
    if (rc == 0) rc = ofl_lpm6_open_live(t, r.v6, r.n6, errbuf);
    ofl_routes_free(&r);
    return built(a, name, path, rc, errbuf);
}

/* Read the routes of table `name`'s prefix file (its path= and nports= options). */
static int load_routes(struct ofl_routes *r, const struct ofl_args *a, const char *name)
{
    const char *path;
    unsigned nports;
    char errbuf[256] = "";
    int rc = lpm_opts(a, name, &path, &nports);
    if (rc < 0) return rc;
    ofl_routes_init(r);
    rc = built(a, name, path, ofl_routes_load(r, path, nports, errbuf), errbuf);
    if (rc < 0) ofl_routes_free(r);
    return rc;
}

int ofl_lpm4_pack(void **blob, size_t *len, const struct ofl_args *a, const char *name)
{
    struct ofl_routes r;
    int rc = load_routes(&r, a, name);
    if (rc < 0) return rc;
    *len = r.n4 * sizeof *r.v4;
    *blob = r.v4;   /* the array becomes the blob */
    r.v4 = NULL;
    ofl_routes_free(&r);
    return 0;
}

int ofl_lpm6_pack(void **blob, size_t *len, const struct ofl_args *a, const char *name)
{
    struct ofl_routes r;
    int rc = load_routes(&r, a, name);
    if (rc < 0) return rc;
    *len = r.n6 * sizeof *r.v6;
    *blob = r.v6;
    r.v6 = NULL;
    ofl_routes_free(&r);
    return 0;
}

/* Check that a blob holds whole routes of `size` bytes; print otherwise. */
static int whole_routes(const struct ofl_args *a, const char *name, size_t len, size_t size)
{
    if (len % size == 0) return 0;
    ofl_start_failf(a, "table %s: received %zu bytes, not a whole number of %zu-byte routes",
                    name, len, size);
    return -EINVAL;
}

int ofl_lpm4_open_blob(struct ofl_lpm4 **t, const void *blob, size_t len,
                       const struct ofl_args *a, const char *name)
{
    char errbuf[256] = "";
    int rc = whole_routes(a, name, len, sizeof(struct ofl_route4));
    if (rc < 0) return rc;
    return built(a, name, "the host's routes",
                 ofl_lpm4_build(t, blob, len / sizeof(struct ofl_route4), errbuf), errbuf);
}

int ofl_lpm6_open_blob(struct ofl_lpm6 **t, const void *blob, size_t len,
                       const struct ofl_args *a, const char *name)
{
    char errbuf[256] = "";
    int rc = whole_routes(a, name, len, sizeof(struct ofl_route6));
    if (rc < 0) return rc;
    return built(a, name, "the host's routes",
                 ofl_lpm6_open_live(t, blob, len / sizeof(struct ofl_route6), errbuf),
                 errbuf);
}
