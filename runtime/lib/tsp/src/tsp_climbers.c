/* Climber threads and the circular result queue (see offlow/tsp_climbers.h). */
#include "offlow/tsp_climbers.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/wait.h"

static void *climber(void *arg)
{
    struct ofl_tsp_climbers *c = arg;
    const uint32_t n = c->tsp.n;
    const size_t words = ofl_tsp_scratch_words(n) + n; /* scratch, then a tour */
    uint32_t *work = c->scratch + words * atomic_fetch_add(&c->ids, 1);
    struct ofl_waiter w;
    ofl_waiter_init(&w, NULL, 0, NULL);
    while (!atomic_load_explicit(&c->stop, memory_order_acquire)) {
        unsigned j = atomic_load_explicit(&c->taken, memory_order_relaxed);
        if (j == atomic_load_explicit(&c->posted, memory_order_acquire) ||
            !atomic_compare_exchange_weak(&c->taken, &j, j + 1)) {
            ofl_wait(&w);
            continue;
        }
        ofl_waiter_progress(&w);
        struct ofl_tsp_job job = c->work[j % OFL_TSP_SLOTS];
        struct ofl_tsp_result *r = (void *)(c->slots + (j % OFL_TSP_SLOTS) * c->stride);
        uint32_t *tour = (uint32_t *)(r + 1), *cur = work + ofl_tsp_scratch_words(n);
        r->job = j;
        r->count = job.count;
        r->length = INT64_MAX;
        for (uint32_t i = 0; i < job.count; i++) {
            int64_t len = ofl_tsp_climb(&c->tsp, job.seed + i, cur, work);
            if (len < r->length) {
                r->length = len;
                r->best_seed = job.seed + i;
                memcpy(tour, cur, n * sizeof *cur);
            }
        }
        atomic_store_explicit(&c->done[j % OFL_TSP_SLOTS], j + 1, memory_order_release);
    }
    return NULL;
}

/* Build the climbers of `n` cities at `xy` with option climbers= of table `name`. */
static int start(struct ofl_tsp_climbers **out, const double *xy, uint32_t n,
                 const struct ofl_args *a, const char *name)
{
    const char *opt = ofl_args_get(a, name, "climbers", "1");
    char *end;
    long threads = strtol(opt, &end, 10);
    if (*end || end == opt || threads < 1 || threads > OFL_TSP_MAX_CLIMBERS) {
        ofl_start_failf(a, "table %s: climbers=%s: expected 1 to %d", name, opt,
                        OFL_TSP_MAX_CLIMBERS);
        return -EINVAL;
    }
    struct ofl_tsp_climbers *c = calloc(1, sizeof *c);
    if (!c) {
        ofl_start_failf(a, "table %s: out of memory", name);
        return -ENOMEM;
    }
    int rc = ofl_tsp_init(&c->tsp, xy, n);
    c->stride = (sizeof(struct ofl_tsp_result) + n * sizeof(uint32_t) + 63) & ~(size_t)63;
    c->nthreads = (uint32_t)threads;
    c->slots = rc == 0 ? calloc(OFL_TSP_SLOTS, c->stride) : NULL;
    c->scratch = rc == 0 ? malloc(c->nthreads * (ofl_tsp_scratch_words(n) + n) *
                                  sizeof *c->scratch) : NULL;
    if (rc == 0 && (!c->slots || !c->scratch))
        rc = -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < c->nthreads; i++) {
        rc = -pthread_create(&c->threads[i], NULL, climber, c);
        c->started += rc == 0;
    }
    if (rc) {
        ofl_start_failf(a, "table %s: %s", name,
                        rc == -EINVAL ? "city count out of range" : strerror(-rc));
        ofl_tsp_climbers_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* The cities of the file at table `name`'s path= option (printed errors). */
static int read_cities(double **xy, uint32_t *n, const struct ofl_args *a, const char *name)
{
    const char *path = ofl_args_get(a, name, "path", NULL);
    if (!path) {
        ofl_start_failf(a, "table %s: no path= (a TSPLIB file)", name);
        return -EINVAL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        ofl_start_failf(a, "table %s: %s: %s", name, path, strerror(e));
        return -e;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    size_t got;
    while (text && (got = fread(text + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap && cap < (64u << 20)) {
            char *more = realloc(text, cap *= 2);
            if (!more)
                free(text);
            text = more;
        } else if (len == cap) {
            break;
        }
    }
    fclose(f);
    if (!text) {
        ofl_start_failf(a, "table %s: %s: out of memory", name, path);
        return -ENOMEM;
    }
    char err[256];
    int rc = ofl_tsplib_parse(text, len, xy, n, err, sizeof err);
    free(text);
    if (rc)
        ofl_start_failf(a, "table %s: %s: %s", name, path,
                        rc == -ENOMEM ? strerror(ENOMEM) : err);
    return rc;
}

int ofl_tsp_climbers_open(struct ofl_tsp_climbers **c, const struct ofl_args *a,
                          const char *name)
{
    void *xy;
    size_t len;
    int rc = ofl_tsp_climbers_pack(&xy, &len, a, name);
    if (rc)
        return rc;
    rc = start(c, xy, (uint32_t)(len / (2 * sizeof(double))), a, name);
    free(xy);
    return rc;
}

int ofl_tsp_climbers_pack(void **blob, size_t *len, const struct ofl_args *a,
                          const char *name)
{
    double *xy;
    uint32_t n;
    int rc = read_cities(&xy, &n, a, name);
    if (rc)
        return rc;
    *blob = xy;
    *len = 2 * (size_t)n * sizeof *xy;
    return 0;
}

int ofl_tsp_climbers_open_blob(struct ofl_tsp_climbers **c, const void *blob, size_t len,
                               const struct ofl_args *a, const char *name)
{
    size_t n = len / (2 * sizeof(double));
    int ok = len % (2 * sizeof(double)) == 0 && n >= OFL_TSP_MIN_CITIES &&
             n <= OFL_TSP_MAX_CITIES;
    double *xy = ok ? malloc(len) : NULL;
    if (xy)
        memcpy(xy, blob, len);
    for (size_t i = 0; xy && i < 2 * n; i++)
        ok &= isfinite(xy[i]);
    if (!ok) {
        ofl_start_failf(a, "table %s: %zu bytes of cities: expected 2*n finite "
                        "doubles, n from %d to %d", name, len, OFL_TSP_MIN_CITIES,
                        OFL_TSP_MAX_CITIES);
        free(xy);
        return -EINVAL;
    }
    if (!xy)
        return -ENOMEM;
    int rc = start(c, xy, (uint32_t)n, a, name);
    free(xy);
    return rc;
}

void ofl_tsp_climbers_free(struct ofl_tsp_climbers *c)
{
    if (!c)
        return;
    atomic_store_explicit(&c->stop, 1, memory_order_release);
    for (uint32_t i = 0; i < c->started; i++)
        pthread_join(c->threads[i], NULL);
    ofl_tsp_free(&c->tsp);
    free(c->slots);
    free(c->scratch);
    free(c);
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

int32_t ofl_tsp_climbers_handle(struct ofl_tsp_climbers *c, const uint8_t *msg, size_t len,
                                const void **bulk, size_t *bulk_len, uint32_t info[4])
{
    *bulk = NULL;
    if (len < 4)
        return -EINVAL;
    uint32_t op = rd32(msg), job = len >= 8 ? rd32(msg + 4) : 0;
    uint32_t posted = atomic_load_explicit(&c->posted, memory_order_relaxed);
    switch (op) {
    case OFL_TSP_OP_INFO:
        info[0] = c->tsp.n;
        info[1] = c->nthreads;
        info[2] = OFL_TSP_SLOTS;
        info[3] = posted;
        return 0;
    case OFL_TSP_OP_POST: {
        if (len < 20 || job != posted || rd32(msg + 8) == 0)
            return -EINVAL;
        if (job - c->fetched >= OFL_TSP_SLOTS) /* its slot holds a result not fetched */
            return -EBUSY;
        struct ofl_tsp_job *w = &c->work[job % OFL_TSP_SLOTS];
        w->count = rd32(msg + 8);
        memcpy(&w->seed, msg + 12, 8);
        atomic_store_explicit(&c->posted, posted + 1, memory_order_release);
        return 0;
    }
    case OFL_TSP_OP_READY:
    case OFL_TSP_OP_FETCH: {
        /* fetches go in order; the last one may be asked again (a transfer retried) */
        if (len < 8 || job >= posted ||
            (op == OFL_TSP_OP_FETCH && job != c->fetched && job + 1 != c->fetched))
            return -EINVAL;
        int ready = atomic_load_explicit(&c->done[job % OFL_TSP_SLOTS],
                                         memory_order_acquire) == job + 1;
        if (op == OFL_TSP_OP_READY || !ready)
            return ready ? 1 : (op == OFL_TSP_OP_READY ? 0 : -EAGAIN);
        if (job == c->fetched)
            c->fetched++;
        *bulk = c->slots + (job % OFL_TSP_SLOTS) * c->stride;
        *bulk_len = sizeof(struct ofl_tsp_result) + c->tsp.n * sizeof(uint32_t);
        return 0;
    }
    default:
        return -EINVAL;
    }
}
