/* 2-opt with neighbour lists and don't-look bits (see offlow/tsp.h). */
#include "offlow/tsp.h"

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

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Reverse the tour between positions i and j inclusive, going forward from i; the
 * shorter of that stretch and its complement is reversed (the same cycle results). */
static void reverse(uint32_t *tour, uint32_t *pos, uint32_t n, uint32_t i, uint32_t j)
{
    uint32_t len = (j + n - i) % n + 1;
    if (2 * len > n) {
        uint32_t ni = (j + 1) % n, nj = (i + n - 1) % n;
        i = ni;
        j = nj;
        len = n - len;
    }
    for (uint32_t s = 0; s < len / 2; s++) {
        uint32_t a = tour[i], b = tour[j];
        tour[i] = b;
        pos[b] = i;
        tour[j] = a;
        pos[a] = j;
        i = i + 1 == n ? 0 : i + 1;
        j = j == 0 ? n - 1 : j - 1;
    }
}

/* Try the 2-opt moves at city a (both its tour edges, against its neighbours); apply
 * the first improving one. Returns 1 when a move was made, with the four cities whose
 * edges changed in `touched`. */
static int improve_at(const struct ofl_tsp *t, uint32_t *tour, uint32_t *pos, uint32_t a,
                      uint32_t touched[4])
{
    const uint32_t n = t->n;
    const int32_t *d = t->dist;
    const uint32_t *nb = t->nbr + (size_t)a * t->k;
    uint32_t pa = pos[a];
    for (int dir = 0; dir < 2; dir++) {
        /* dir 0: edge (a, succ a); dir 1: edge (pred a, a) */
        uint32_t b = tour[dir == 0 ? (pa + 1) % n : (pa + n - 1) % n];
        int32_t dab = d[(size_t)a * n + b];
        for (uint32_t q = 0; q < t->k; q++) {
            uint32_t c = nb[q];
            int32_t dac = d[(size_t)a * n + c];
            if (dac >= dab)
                break; /* the neighbours are sorted: no later one gains */
            uint32_t pc = pos[c];
            uint32_t e = tour[dir == 0 ? (pc + 1) % n : (pc + n - 1) % n];
            if (e == a || c == b)
                continue;
            int32_t gain = dab + d[(size_t)c * n + e] - dac - d[(size_t)b * n + e];
            if (gain <= 0)
                continue;
            if (dir == 0) /* ... a b ... c e ... -> ... a c ... b e ... */
                reverse(tour, pos, n, (pa + 1) % n, pc);
            else /* ... b a ... e c ... -> ... b e ... a c ... */
                reverse(tour, pos, n, pa, (pc + n - 1) % n);
            touched[0] = a;
            touched[1] = b;
            touched[2] = c;
            touched[3] = e;
            return 1;
        }
    }
    return 0;
}

int64_t ofl_tsp_climb(const struct ofl_tsp *t, uint64_t seed, uint32_t *tour,
                      uint32_t *scratch)
{
    const uint32_t n = t->n;
    uint32_t *pos = scratch, *queue = scratch + n, *queued = scratch + 2 * n;
    uint64_t s = seed;
    for (uint32_t i = 0; i < n; i++)
        tour[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        uint32_t j = (uint32_t)(splitmix(&s) % (i + 1)), x = tour[i];
        tour[i] = tour[j];
        tour[j] = x;
    }
    /* the work queue (a ring of n slots: each city at most once in it) in tour order */
    for (uint32_t i = 0; i < n; i++) {
        pos[tour[i]] = i;
        queue[i] = tour[i];
        queued[i] = 1;
    }
    uint32_t head = 0, count = n;
    while (count > 0) {
        uint32_t a = queue[head], touched[4];
        head = head + 1 == n ? 0 : head + 1;
        count--;
        queued[a] = 0;
        if (!improve_at(t, tour, pos, a, touched))
            continue;
        for (int m = 0; m < 4; m++) {
            uint32_t c = touched[m];
            if (queued[c])
                continue;
            queued[c] = 1;
            queue[(head + count) % n] = c;
            count++;
        }
    }
    return ofl_tsp_length(t, tour);
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
