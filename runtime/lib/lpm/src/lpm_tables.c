/* The LPM tables as table objects of generated programs (lpm_tables.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/err.h"
#include "offlow/lpm_tables.h"
#include "offlow/routes.h"
#include "offlow/stats.h"

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

/* Report the outcome of building table `name` (the file named once: the reader's
 * messages name it already). */
static int built(const struct ofl_args *a, const char *name, const char *path, int rc,
                 const char *errbuf)
{
    if (rc < 0 && errbuf[0] && strstr(errbuf, path))
        ofl_start_failf(a, "table %s: %s", name, errbuf);
    else if (rc < 0)
        ofl_start_failf(a, "table %s from %s: %s", name, path,
                        errbuf[0] ? errbuf : ofl_strerror(rc));
    return rc;
}

/* What a table's prefix file held besides routes: in its blob, before the routes. */
struct file_counts {
    uint64_t lines, bad, first_bad;
};

/* The report of the file at `path` that `r` was read from. */
static struct ofl_routes_file file_of(const char *path, const struct ofl_routes *r)
{
    return (struct ofl_routes_file){ path, r->lines, r->bad, r->first_bad };
}

/* Read the routes of table `name`'s prefix file (its path= and nports= options, the
 * path in `*path`). */
static int load_routes(struct ofl_routes *r, const struct ofl_args *a, const char *name,
                       const char **path)
{
    unsigned nports;
    char errbuf[256] = "";
    int rc = lpm_opts(a, name, path, &nports);
    if (rc < 0) return rc;
    ofl_routes_init(r);
    rc = built(a, name, *path, ofl_routes_load(r, *path, nports, errbuf), errbuf);
    if (rc < 0) ofl_routes_free(r);
    return rc;
}

int ofl_lpm4_open_opts(struct ofl_lpm4 **t, const struct ofl_args *a, const char *name)
{
    struct ofl_routes r;
    const char *path;
    char errbuf[256] = "";
    *t = NULL;
    int rc = load_routes(&r, a, name, &path);
    if (rc < 0) return rc;
    rc = built(a, name, path, ofl_lpm4_build(t, r.v4, r.n4, errbuf), errbuf);
    if (rc == 0) (*t)->file = file_of(path, &r);
    ofl_routes_free(&r);
    return rc;
}

int ofl_lpm6_open_opts(struct ofl_lpm6 **t, const struct ofl_args *a, const char *name)
{
    struct ofl_routes r;
    const char *path;
    char errbuf[256] = "";
    *t = NULL;
    int rc = load_routes(&r, a, name, &path);
    if (rc < 0) return rc;
    rc = built(a, name, path, ofl_lpm6_open_live(t, r.v6, r.n6, errbuf), errbuf);
    if (rc == 0) (*t)->file = file_of(path, &r);
    ofl_routes_free(&r);
    return rc;
}

/* The blob of `n` routes of `size` bytes at `v`, after the file's counts of `r`. */
static int pack(void **blob, size_t *len, const struct ofl_routes *r, const void *v,
                size_t n, size_t size)
{
    struct file_counts c = { r->lines, r->bad, r->first_bad };
    *len = sizeof c + n * size;
    if (!(*blob = malloc(*len))) return -ENOMEM;
    memcpy(*blob, &c, sizeof c);
    if (n) memcpy((char *)*blob + sizeof c, v, n * size);
    return 0;
}

int ofl_lpm4_pack(void **blob, size_t *len, const struct ofl_args *a, const char *name)
{
    struct ofl_routes r;
    const char *path;
    int rc = load_routes(&r, a, name, &path);
    if (rc < 0) return rc;
    rc = pack(blob, len, &r, r.v4, r.n4, sizeof *r.v4);
    ofl_routes_free(&r);
    return rc;
}

int ofl_lpm6_pack(void **blob, size_t *len, const struct ofl_args *a, const char *name)
{
    struct ofl_routes r;
    const char *path;
    int rc = load_routes(&r, a, name, &path);
    if (rc < 0) return rc;
    rc = pack(blob, len, &r, r.v6, r.n6, sizeof *r.v6);
    ofl_routes_free(&r);
    return rc;
}

/* Check that a blob holds whole routes of `size` bytes; print otherwise. */
static int whole_routes(const struct ofl_args *a, const char *name, size_t len, size_t size)
{
    if (len % size == 0) return 0;
    ofl_start_failf(a, "table %s: received %zu bytes, not a whole number of %zu-byte routes",
                    name, len, size);
    return -EINVAL;
}

/* The file's counts at the start of a blob of `*len` bytes into `f`; `*blob` and `*len`
 * then the routes after them. -EINVAL (said: ofl_start_failf) for a blob too short to
 * hold them. */
static int blob_file(struct ofl_routes_file *f, const void **blob, size_t *len,
                     const struct ofl_args *a, const char *name)
{
    struct file_counts c;
    if (*len < sizeof c) {
        ofl_start_failf(a, "table %s: received %zu bytes, fewer than the %zu of the prefix "
                        "file's counts", name, *len, sizeof c);
        return -EINVAL;
    }
    memcpy(&c, *blob, sizeof c);
    *blob = (const char *)*blob + sizeof c;
    *len -= sizeof c;
    /* (the path as the host read it: the same option in this process) */
    *f = (struct ofl_routes_file){ ofl_args_get(a, name, "path", NULL), c.lines, c.bad,
                                   c.first_bad };
    return 0;
}

int ofl_lpm4_open_blob(struct ofl_lpm4 **t, const void *blob, size_t len,
                       const struct ofl_args *a, const char *name)
{
    char errbuf[256] = "";
    struct ofl_routes_file file;
    int rc = blob_file(&file, &blob, &len, a, name);
    if (rc == 0) rc = whole_routes(a, name, len, sizeof(struct ofl_route4));
    if (rc < 0) return rc;
    rc = ofl_lpm4_build(t, blob, len / sizeof(struct ofl_route4), errbuf);
    if (rc == 0) (*t)->file = file;
    return built(a, name, "the host's routes", rc, errbuf);
}

int ofl_lpm6_open_blob(struct ofl_lpm6 **t, const void *blob, size_t len,
                       const struct ofl_args *a, const char *name)
{
    char errbuf[256] = "";
    struct ofl_routes_file file;
    int rc = blob_file(&file, &blob, &len, a, name);
    if (rc == 0) rc = whole_routes(a, name, len, sizeof(struct ofl_route6));
    if (rc < 0) return rc;
    rc = ofl_lpm6_open_live(t, blob, len / sizeof(struct ofl_route6), errbuf);
    if (rc == 0) (*t)->file = file;
    return built(a, name, "the host's routes", rc, errbuf);
}

/* Table `name`'s file report, when its file held lines that are not prefixes. */
static void file_json(struct ofl_json *j, const char *name, const struct ofl_routes_file *f)
{
    if (!f->bad) return;   /* (a clean file: nothing to say) */
    ofl_json_begin_obj(j, name);
    ofl_json_str(j, "kind", "lpm");
    ofl_json_str(j, "path", f->path ? f->path : "");
    ofl_json_u64(j, "lines", f->lines);
    ofl_json_u64(j, "not_prefixes", f->bad);
    ofl_json_u64(j, "first_not_prefix", f->first_bad);
    ofl_json_end_obj(j);
}

void ofl_lpm4_stats_json(struct ofl_json *j, const char *name, const struct ofl_lpm4 *t)
{
    file_json(j, name, &t->file);
}

void ofl_lpm6_stats_json(struct ofl_json *j, const char *name, const struct ofl_lpm6 *t)
{
    file_json(j, name, &t->file);
}
