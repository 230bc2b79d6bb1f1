/* The travelling salesman's 2-opt hill climber (NFComms' TSP case study): a TSPLIB
 * EUC_2D file parsed into city coordinates, the instance a climber needs (integer
 * distances as TSPLIB defines them, neighbour lists), and one climb: a random tour
 * improved by 2-opt moves until none improves it.
 *
 * A climb is 2-opt with neighbour lists and don't-look bits (Bentley 1992): for each
 * city on a work queue, only moves that add an edge to one of its K nearest cities are
 * tried, and a city whose neighbourhood gave no improvement is not looked at again
 * until an edge at it changes. Reversals take the shorter side of the cycle. The same
 * local optimum criterion as plain 2-opt restricted to those neighbours; about 100x
 * less work per climb on kroA100. A climb depends only on (instance, seed), so climbs
 * may be spread over any number of threads or devices and give the same tours. */
#ifndef OFL_TSP_H
#define OFL_TSP_H

#include <stddef.h>
#include <stdint.h>

#define OFL_TSP_MAX_CITIES 4096 /* the distance matrix is n*n int32: 64 MiB at most */
#define OFL_TSP_MIN_CITIES 4
#define OFL_TSP_NEIGHBOURS 10 /* K: candidate cities tried for each city */
#define OFL_TSP_MAX_CLIMBERS 64 /* climber threads of one table (tsp_climbers.h) */

/* OFL_TSP_MAX_CLIMBERS as a value (for Python, through ctypes). */
extern const uint32_t ofl_tsp_max_climbers;

/* An instance: n cities, their n*n distances and K nearest neighbours each. */
struct ofl_tsp {
    uint32_t n;
    uint32_t k;     /* min(OFL_TSP_NEIGHBOURS, n - 1) */
    int32_t *dist;  /* n*n, dist[i*n+j] = nint(euclidean distance) (TSPLIB EUC_2D) */
    uint32_t *nbr;  /* n*k, nearest first */
};

/* Parse a TSPLIB file of TYPE TSP and EDGE_WEIGHT_TYPE EUC_2D (`len` bytes at `text`,
 * not NUL-terminated) into a malloc'd array of 2*n doubles (x0, y0, x1, ...) at *xy
 * and its city count at *n. Returns 0, or -EINVAL with the line and the reason in
 * `err` (`errlen` bytes; a keyword or type it does not read, a DIMENSION that is not
 * a number in [OFL_TSP_MIN_CITIES, OFL_TSP_MAX_CITIES], a node line that is not
 * "INDEX X Y", an index out of range or given twice, a city missing, a coordinate that
 * is not finite or over 1e9 in size), or -ENOMEM. Nothing is allocated on error. */
int ofl_tsplib_parse(const char *text, size_t len, double **xy, uint32_t *n, char *err,
                     size_t errlen);

/* Build the instance of `n` cities at `xy` (2*n doubles, finite). Returns 0, -EINVAL
 * (n out of range), or -ENOMEM. Free with ofl_tsp_free. */
int ofl_tsp_init(struct ofl_tsp *t, const double *xy, uint32_t n);

/* Free what ofl_tsp_init allocated (safe on a zeroed struct). */
void ofl_tsp_free(struct ofl_tsp *t);

/* The length of the closed tour `tour` (n city indices). */
int64_t ofl_tsp_length(const struct ofl_tsp *t, const uint32_t *tour);

/* The scratch a climb needs, in uint32_t words (3*n). */
static inline size_t ofl_tsp_scratch_words(uint32_t n) { return 3 * (size_t)n; }

/* One climb: a random tour drawn from `seed`, improved by 2-opt (above) to a local
 * optimum, into `tour` (n entries); `scratch` holds ofl_tsp_scratch_words(n) words.
 * Returns the tour's length. */
int64_t ofl_tsp_climb(const struct ofl_tsp *t, uint64_t seed, uint32_t *tour,
                      uint32_t *scratch);

/* `count` climbs with seeds seed, seed+1, ...: the best tour into `best` (n entries;
 * the first of equal lengths) and its length returned; *best_seed gets its seed when
 * not NULL. Returns -ENOMEM when its scratch cannot be allocated, INT64_MAX (nothing
 * written) when count is 0. */
int64_t ofl_tsp_climbs(const struct ofl_tsp *t, uint64_t seed, uint32_t count,
                       uint32_t *best, uint64_t *best_seed);

#endif
