/* Tests of tsp_climbers.h without a program around it: the table built from a blob
 * (and blobs refused), the channel messages a manager sends (info, post, ready, fetch)
 * with jobs run by 3 climber threads, results fetched in order from the circular
 * result queue past its 64 slots, and every malformed or out-of-order message (a post
 * over a result not fetched) refused with its error instead of touching a slot. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/tsp_climbers.h"

static int32_t post(struct ofl_tsp_climbers *c, uint32_t job, uint32_t count, uint64_t seed)
{
    uint8_t m[20];
    uint32_t op = OFL_TSP_OP_POST;
    memcpy(m, &op, 4);
    memcpy(m + 4, &job, 4);
    memcpy(m + 8, &count, 4);
    memcpy(m + 12, &seed, 8);
    const void *bulk;
    size_t n;
    uint32_t info[4];
    return ofl_tsp_climbers_handle(c, m, sizeof m, &bulk, &n, info);
}

/* OFL_TSP_OP_READY or FETCH of `job`: the status, and the slot in *bulk. */
static int32_t ask(struct ofl_tsp_climbers *c, uint32_t op, uint32_t job, const void **bulk,
                   size_t *n)
{
    uint8_t m[8];
    uint32_t info[4];
    memcpy(m, &op, 4);
    memcpy(m + 4, &job, 4);
    return ofl_tsp_climbers_handle(c, m, sizeof m, bulk, n, info);
}

int main(void)
{
    enum { N = 24 };
    double xy[2 * N];
    for (int i = 0; i < N; i++) { /* a circle: every climb ends on its order */
        xy[2 * i] = 1000 * cos(2 * M_PI * ((5 * i) % N) / N);
        xy[2 * i + 1] = 1000 * sin(2 * M_PI * ((5 * i) % N) / N);
    }
    struct ofl_args a = {.device = "test", .nopts = 1};
    a.opt_key[0] = "cities.climbers";
    a.opt_keylen[0] = strlen(a.opt_key[0]);
    a.opt_val[0] = "3";
    struct ofl_tsp_climbers *c = NULL;
    CHECK(ofl_tsp_climbers_open_blob(&c, xy, 7, &a, "cities") == -EINVAL, "7 bytes refused");
    double nan_xy[8] = {0, 0, 1, NAN, 2, 2, 3, 3};
    CHECK(ofl_tsp_climbers_open_blob(&c, nan_xy, sizeof nan_xy, &a, "cities") == -EINVAL,
          "a NaN refused");
    a.opt_val[0] = "0";
    CHECK(ofl_tsp_climbers_open_blob(&c, xy, sizeof xy, &a, "cities") == -EINVAL,
          "climbers=0 refused");
    a.opt_val[0] = "3";
    CHECK(ofl_tsp_climbers_open_blob(&c, xy, sizeof xy, &a, "cities") == 0 && c, "opened");
    if (!c) return CHECK_DONE();

    uint32_t info[4] = {0}, op = OFL_TSP_OP_INFO;
    const void *bulk;
    size_t n;
    CHECK(ofl_tsp_climbers_handle(c, (uint8_t *)&op, 4, &bulk, &n, info) == 0 &&
          info[0] == N && info[1] == 3 && info[2] == OFL_TSP_SLOTS && info[3] == 0, "info");
    /* refusals: short, unknown op, out of order, count 0, asking for jobs not posted */
    CHECK(ofl_tsp_climbers_handle(c, (uint8_t *)&op, 3, &bulk, &n, info) == -EINVAL, "short");
    op = 99;
    CHECK(ofl_tsp_climbers_handle(c, (uint8_t *)&op, 4, &bulk, &n, info) == -EINVAL, "op");
    CHECK(post(c, 1, 5, 0) == -EINVAL, "job 1 before job 0");
    CHECK(post(c, 0, 0, 0) == -EINVAL, "a count of 0");
    CHECK(ask(c, OFL_TSP_OP_FETCH, 0, &bulk, &n) == -EINVAL && !bulk, "fetch before post");

    /* 200 jobs of 3 climbs through 64 slots: post ahead, fetch in order */
    const uint32_t jobs = 200;
    uint32_t posted = 0, fetched = 0, busy = 0;
    int64_t ring = -1;
    while (fetched < jobs) {
        while (posted < jobs) {
            int32_t rc = post(c, posted, 3, 10 * posted);
            if (rc == -EBUSY) { busy++; break; }
            CHECK(rc == 0, "post %u: %d", posted, rc);
            if (rc) return CHECK_DONE();
            posted++;
        }
        int32_t ready = ask(c, OFL_TSP_OP_READY, fetched, &bulk, &n);
        CHECK(ready == 0 || ready == 1, "ready %u: %d", fetched, ready);
        if (ready != 1) continue;
        CHECK(ask(c, OFL_TSP_OP_FETCH, fetched, &bulk, &n) == 0 && bulk &&
              n == sizeof(struct ofl_tsp_result) + N * 4, "fetch %u", fetched);
        struct ofl_tsp_result r;
        memcpy(&r, bulk, sizeof r);
        const uint32_t *tour = (const uint32_t *)((const struct ofl_tsp_result *)bulk + 1);
        uint8_t seen[N] = {0};
        int perm = 1;
        for (int i = 0; i < N; i++) {
            perm &= tour[i] < N && !seen[tour[i]];
            if (tour[i] < N) seen[tour[i]] = 1;
        }
        if (ring < 0) ring = r.length;
        CHECK(r.job == fetched && r.count == 3 && perm && r.length == ring &&
              r.best_seed >= 10ull * fetched && r.best_seed < 10ull * fetched + 3,
              "result %u: job %u count %u length %lld seed %llu", fetched, r.job, r.count,
              (long long)r.length, (unsigned long long)r.best_seed);
        fetched++;
    }
    CHECK(posted == jobs, "every job posted");
    op = OFL_TSP_OP_INFO;
    CHECK(ofl_tsp_climbers_handle(c, (uint8_t *)&op, 4, &bulk, &n, info) == 0 &&
          info[3] == jobs, "the next job's number: %u", info[3]);
    /* a post that would reuse the slot of a result not fetched is refused */
    for (uint32_t j = jobs; j < jobs + OFL_TSP_SLOTS; j++) CHECK(post(c, j, 1, j) == 0, "%u", j);
    CHECK(post(c, jobs + OFL_TSP_SLOTS, 1, 0) == -EBUSY, "64 unfetched: busy");
    CHECK(ask(c, OFL_TSP_OP_FETCH, jobs + 1, &bulk, &n) == -EINVAL, "fetch out of order");
    while (ask(c, OFL_TSP_OP_FETCH, jobs, &bulk, &n) == -EAGAIN) {}
    CHECK(bulk != NULL, "job %u fetched", jobs);
    CHECK(post(c, jobs + OFL_TSP_SLOTS, 1, 0) == 0, "its slot is free again");
    ofl_tsp_climbers_free(c);
    return CHECK_DONE();
}
