/* One 2-opt climb (see tsp.h), written once in the subset of C shared by C11 and
 * OpenCL C 1.2, so that the host's and the NIC's climber threads (tsp.c) and the gpu
 * climber's kernel (runtime/lib/tsp/cl/tsp_climbs.cl) run the same code.
 *
 * OFL_TSP_GLOBAL is the address space of the distances and neighbour lists: nothing
 * in C, __global in a kernel (define it before including this header). The tour and
 * the scratch are the caller's (private memory in a kernel). Include stdint.h's types
 * first (a kernel: offlow/cl/prelude.h). */
#ifndef OFL_TSP_CLIMB_H
#define OFL_TSP_CLIMB_H

#ifndef OFL_TSP_GLOBAL
#define OFL_TSP_GLOBAL
#endif

/* The distances and neighbour lists a climb reads. */
struct ofl_tsp_view {
    uint32_t n, k;
    OFL_TSP_GLOBAL const int32_t *dist; /* n*n */
    OFL_TSP_GLOBAL const uint32_t *nbr; /* n*k, nearest first */
};

static inline uint64_t ofl_tsp_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ul);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ul;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebul;
    return z ^ (z >> 31);
}

/* Reverse the tour between positions i and j inclusive, going forward from i; the
 * shorter of that stretch and its complement is reversed (the same cycle results). */
static inline void ofl_tsp_reverse(uint32_t *tour, uint32_t *pos, uint32_t n, uint32_t i,
                                   uint32_t j)
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
static inline int ofl_tsp_improve_at(const struct ofl_tsp_view *t, uint32_t *tour,
                                     uint32_t *pos, uint32_t a, uint32_t touched[4])
{
    const uint32_t n = t->n;
    OFL_TSP_GLOBAL const int32_t *d = t->dist;
    OFL_TSP_GLOBAL const uint32_t *nb = t->nbr + (size_t)a * t->k;
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
                ofl_tsp_reverse(tour, pos, n, (pa + 1) % n, pc);
            else /* ... b a ... e c ... -> ... b e ... a c ... */
                ofl_tsp_reverse(tour, pos, n, pa, (pc + n - 1) % n);
            touched[0] = a;
            touched[1] = b;
            touched[2] = c;
            touched[3] = e;
            return 1;
        }
    }
    return 0;
}

/* One climb from the random tour of `seed` into `tour` (n entries); `scratch` holds
 * 3*n words (positions, the work queue, its membership bits). Returns the length. */
static inline int64_t ofl_tsp_climb_view(const struct ofl_tsp_view *t, uint64_t seed,
                                         uint32_t *tour, uint32_t *scratch)
{
    const uint32_t n = t->n;
    uint32_t *pos = scratch, *queue = scratch + n, *queued = scratch + 2 * n;
    uint64_t s = seed;
    for (uint32_t i = 0; i < n; i++)
        tour[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        uint32_t j = (uint32_t)(ofl_tsp_splitmix(&s) % (i + 1)), x = tour[i];
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
        if (!ofl_tsp_improve_at(t, tour, pos, a, touched))
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
    int64_t len = 0;
    for (uint32_t i = 0; i < n; i++)
        len += t->dist[(size_t)tour[i] * n + tour[i + 1 == n ? 0 : i + 1]];
    return len;
}

#endif
