/* TSP instances and climbs (see offlow/tsp.h; the climb itself: offlow/tsp_climb.h). */
#include "offlow/tsp.h"
#include "offlow/tsp_climb.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const uint32_t ofl_tsp_max_climbers = OFL_TSP_MAX_CLIMBERS;

int ofl_tsp_init(struct ofl_tsp *t, const double *xy, uint32_t n)
{
    memset(t, 0, sizeof *t);
    if (n < OFL_TSP_MIN_CITIES || n > OFL_TSP_MAX_CITIES)
        return -EINVAL;
    t->n = n;
    t->k = n - 1 < OFL_TSP_NEIGHBOURS ? n - 1 : OFL_TSP_NEIGHBOURS;
    t->dist = malloc((size_t)n * n * sizeof *t->dist);
    t->nbr = malloc((size_t)n * t->k * sizeof *t->nbr);
    if (!t->dist || !t->nbr) {
        ofl_tsp_free(t);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < n; j++) {
            double dx = xy[2 * i] - xy[2 * j], dy = xy[2 * i + 1] - xy[2 * j + 1];
            t->dist[(size_t)i * n + j] = (int32_t)(sqrt(dx * dx + dy * dy) + 0.5);
        }
    /* K nearest by insertion into a sorted list (ties: the lower index first) */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t *row = t->nbr + (size_t)i * t->k, have = 0;
        const int32_t *d = t->dist + (size_t)i * n;
        for (uint32_t j = 0; j < n; j++) {
            if (j == i || (have == t->k && d[j] >= d[row[have - 1]]))
                continue;
            uint32_t at = have < t->k ? have++ : t->k - 1;
            while (at > 0 && d[row[at - 1]] > d[j]) {
                row[at] = row[at - 1];
                at--;
            }
            row[at] = j;
        }
    }
    return 0;
}

void ofl_tsp_free(struct ofl_tsp *t)
{
    free(t->dist);
    free(t->nbr);
    t->dist = NULL;
    t->nbr = NULL;
}

int64_t ofl_tsp_length(const struct ofl_tsp *t, const uint32_t *tour)
{
    int64_t len = 0;
    for (uint32_t i = 0; i < t->n; i++)
        len += t->dist[(size_t)tour[i] * t->n + tour[(i + 1) % t->n]];
    return len;
}

int64_t ofl_tsp_climb(const struct ofl_tsp *t, uint64_t seed, uint32_t *tour,
                      uint32_t *scratch)
{
    const struct ofl_tsp_view v = {t->n, t->k, t->dist, t->nbr};
    return ofl_tsp_climb_view(&v, seed, tour, scratch);
}

int64_t ofl_tsp_climbs(const struct ofl_tsp *t, uint64_t seed, uint32_t count,
                       uint32_t *best, uint64_t *best_seed)
{
    uint32_t *work = malloc((ofl_tsp_scratch_words(t->n) + t->n) * sizeof *work);
    if (!work)
        return -ENOMEM;
    uint32_t *tour = work + ofl_tsp_scratch_words(t->n);
    int64_t best_len = INT64_MAX;
    for (uint32_t i = 0; i < count; i++) {
        int64_t len = ofl_tsp_climb(t, seed + i, tour, work);
        if (len < best_len) {
            best_len = len;
            memcpy(best, tour, t->n * sizeof *tour);
            if (best_seed)
                *best_seed = seed + i;
        }
    }
    free(work);
    return best_len;
}
