/* The stream operators as table objects: their options from the command line (the glue
 * between gen.h's options and the operators, which need no program). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/gen.h"
#include "offlow/streams.h"

/* A number option NAME.KEY (default `dflt`) within [lo, hi]. */
static int opt_num(const struct ofl_args *a, const char *name, const char *key,
                   const char *dflt, long long lo, long long hi, long long *v)
{
    const char *s = ofl_args_get(a, name, key, dflt);
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) {
        ofl_start_failf(a, "stream operator %s: %s=%s is not a number within "
                        "%lld..%lld", name, key, s, lo, hi);
        return -EINVAL;
    }
    *v = x;
    return 0;
}

static int opened(int rc, const struct ofl_args *a, const char *name)
{
    if (rc == -EINVAL)
        ofl_start_failf(a, "stream operator %s: its options do not fit together "
                        "(docs/streams.md)", name);
    else if (rc < 0)
        ofl_start_failf(a, "stream operator %s: %s", name, strerror(-rc));
    return rc;
}

int ofl_bsort_open_opts(struct ofl_bsort **b, const struct ofl_args *a, const char *name)
{
    long long slack;
    if (opt_num(a, name, "slack", "0", 0, 4095, &slack))
        return -EINVAL;
    return opened(ofl_bsort_open(b, (uint32_t)slack), a, name);
}

int ofl_agg_open_opts(struct ofl_agg **g, const struct ofl_args *a, const char *name)
{
    static const char *const fns[] = { "count", "sum", "avg", "min", "max" };
    const char *fn = ofl_args_get(a, name, "fn", "avg");
    unsigned f = 0;
    while (f < 5 && strcmp(fn, fns[f]))
        f++;
    if (f == 5) {
        ofl_start_failf(a, "stream operator %s: fn=%s: expected count, sum, avg, "
                        "min or max", name, fn);
        return -EINVAL;
    }
    long long size, advance, groups;
    if (opt_num(a, name, "size", "1", 1, INT64_MAX / 4, &size) ||
        opt_num(a, name, "advance", "1", 1, INT64_MAX / 4, &advance) ||
        opt_num(a, name, "groups", "64", 1, 65536, &groups))
        return -EINVAL;
    if (size / advance >= 1024) {
        ofl_start_failf(a, "stream operator %s: size=%lld over advance=%lld keeps "
                        "more than 1024 windows open", name, size, advance);
        return -EINVAL;
    }
    return opened(ofl_agg_open(g, (enum ofl_agg_fn)f, size, advance, (uint32_t)groups), a,
                  name);
}

/* The window and room of a two-stream operator: size= and cap=. */
static int size_cap(const struct ofl_args *a, const char *name, long long *size,
                    long long *cap)
{
    return opt_num(a, name, "size", "0", 0, INT64_MAX / 4, size) ||
           opt_num(a, name, "cap", "1024", 1, 65536, cap) ? -EINVAL : 0;
}

int ofl_join_open_opts(struct ofl_join **j, const struct ofl_args *a, const char *name)
{
    long long size, cap;
    if (size_cap(a, name, &size, &cap))
        return -EINVAL;
    return opened(ofl_join_open(j, size, (uint32_t)cap), a, name);
}

int ofl_resample_open_opts(struct ofl_resample **r, const struct ofl_args *a, const char *name)
{
    long long size, cap;
    if (size_cap(a, name, &size, &cap))
        return -EINVAL;
    return opened(ofl_resample_open(r, size, (uint32_t)cap), a, name);
}
