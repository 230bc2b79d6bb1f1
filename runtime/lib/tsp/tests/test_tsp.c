/* Tests of tsp.h: the TSPLIB parser on a valid file written the way people write them
 * (blank lines, CRLF, spaces around the colon, nodes out of order, no EOF) and on
 * malformed ones (each refused with its line); climbs: cities on a circle, where the
 * only 2-opt local optimum is the circle's order, so every climb must find it; every
 * tour a permutation whose length ofl_tsp_length agrees with; distances nint-rounded. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offlow/tsp.h"

static int parse(const char *text, double **xy, uint32_t *n, char *err)
{
    return ofl_tsplib_parse(text, strlen(text), xy, n, err, 200);
}

static void test_parse_valid(void)
{
    const char *text = "NAME: user\r\nCOMMENT : four cities, mine\r\nTYPE : TSP\r\n"
                       "DIMENSION:4\n\nEDGE_WEIGHT_TYPE : EUC_2D\nNODE_COORD_SECTION\n"
                       "3 3 4.5\n1 0 0\n  2\t1e1 -2\n4 0 7\n";
    double *xy = NULL;
    uint32_t n = 0;
    char err[200];
    int rc = parse(text, &xy, &n, err);
    CHECK(rc == 0 && n == 4, "valid file: rc %d n %u (%s)", rc, n, err);
    if (rc == 0) {
        CHECK(xy[0] == 0 && xy[1] == 0 && xy[2] == 10 && xy[3] == -2 && xy[4] == 3 &&
              xy[5] == 4.5 && xy[6] == 0 && xy[7] == 7, "coordinates in index order");
        free(xy);
    }
}

static void test_parse_malformed(void)
{
    static const struct { const char *text, *want; } cases[] = {
        {"", "no NODE_COORD_SECTION"},
        {"TYPE : TSP\nEDGE_WEIGHT_TYPE : EUC_2D\nNODE_COORD_SECTION\n1 0 0\n",
         "line 3: NODE_COORD_SECTION before DIMENSION"},
        {"TYPE : ATSP\n", "line 1: TYPE `ATSP`"},
        {"TYPE : TSP\nEDGE_WEIGHT_TYPE : GEO\n", "line 2: EDGE_WEIGHT_TYPE `GEO`"},
        {"TYPE : TSP\nDIMENSION : 4x\n", "line 2: DIMENSION `4x`"},
        {"TYPE : TSP\nDIMENSION : 3\n", "line 2: DIMENSION `3`"},
        {"TYPE : TSP\nDIMENSION : 99999\n", "line 2: DIMENSION `99999`"},
        {"TYPE : TSP\nEDGE_WEIGHT_SECTION\n", "line 2: expected `KEYWORD : VALUE`"},
        {"TYPE : TSP\nCAPACITY : 3\n", "line 2: keyword `CAPACITY`"},
        {"TYPE:TSP\nDIMENSION:4\nEDGE_WEIGHT_TYPE:EUC_2D\nNODE_COORD_SECTION\n1 0 0\n2 1\n",
         "line 6: expected `INDEX X Y`"},
        {"TYPE:TSP\nDIMENSION:4\nEDGE_WEIGHT_TYPE:EUC_2D\nNODE_COORD_SECTION\n5 0 0\n",
         "line 5: node index `5`"},
        {"TYPE:TSP\nDIMENSION:4\nEDGE_WEIGHT_TYPE:EUC_2D\nNODE_COORD_SECTION\n1 0 0\n1 2 2\n",
         "line 6: node 1 given twice"},
        {"TYPE:TSP\nDIMENSION:4\nEDGE_WEIGHT_TYPE:EUC_2D\nNODE_COORD_SECTION\n1 nan 0\n",
         "line 5: node 1: coordinates `nan 0`"},
        {"TYPE:TSP\nDIMENSION:4\nEDGE_WEIGHT_TYPE:EUC_2D\nNODE_COORD_SECTION\n1 0 0\n2 0 1\n"
         "EOF\n", "line 7: 2 node lines for DIMENSION 4"},
        {"TYPE:TSP\nDIMENSION:4\nEDGE_WEIGHT_TYPE:EUC_2D\nNODE_COORD_SECTION\n1 0 0\n2 0 1\n"
         "3 1 1\n4 1 0\n5 2 2\n", "line 9: more than DIMENSION = 4 node lines"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double *xy = NULL;
        uint32_t n = 0;
        char err[200];
        int rc = parse(cases[i].text, &xy, &n, err);
        CHECK(rc == -EINVAL && strstr(err, cases[i].want) && xy == NULL,
              "case %zu: rc %d err `%s`, want `%s`", i, rc, err, cases[i].want);
    }
    char big[600];
    memset(big, 'A', sizeof big);
    double *xy = NULL;
    uint32_t n;
    char err[200];
    CHECK(ofl_tsplib_parse(big, sizeof big, &xy, &n, err, sizeof err) == -EINVAL &&
          strstr(err, "line 1: line longer than"), "long line: %s", err);
}

static int is_permutation(const uint32_t *tour, uint32_t n)
{
    uint8_t seen[OFL_TSP_MAX_CITIES] = {0};
    for (uint32_t i = 0; i < n; i++) {
        if (tour[i] >= n || seen[tour[i]])
            return 0;
        seen[tour[i]] = 1;
    }
    return 1;
}

static void test_circle(uint32_t n)
{
    double *xy = malloc(2 * n * sizeof *xy);
    for (uint32_t i = 0; i < n; i++) { /* scrambled order: city 7*i mod n at angle i */
        uint32_t c = (7 * i) % n;
        xy[2 * c] = 1000 * cos(2 * M_PI * i / n);
        xy[2 * c + 1] = 1000 * sin(2 * M_PI * i / n);
    }
    struct ofl_tsp t;
    CHECK(ofl_tsp_init(&t, xy, n) == 0, "init %u", n);
    uint32_t *tour = malloc(n * sizeof *tour), *scratch = malloc(3 * n * sizeof *scratch);
    int64_t ring = 0; /* the circle's order, summed independently */
    for (uint32_t i = 0; i < n; i++) {
        double dx = 1000 * (cos(2 * M_PI * i / n) - cos(2 * M_PI * (i + 1) / n));
        double dy = 1000 * (sin(2 * M_PI * i / n) - sin(2 * M_PI * (i + 1) / n));
        ring += (int64_t)(sqrt(dx * dx + dy * dy) + 0.5);
    }
    for (uint64_t seed = 0; seed < 20; seed++) {
        int64_t len = ofl_tsp_climb(&t, seed, tour, scratch);
        CHECK(is_permutation(tour, n), "n %u seed %llu: not a permutation", n,
              (unsigned long long)seed);
        CHECK(len == ofl_tsp_length(&t, tour) && len == ring,
              "n %u seed %llu: length %lld, the circle %lld", n, (unsigned long long)seed,
              (long long)len, (long long)ring);
    }
    uint64_t best_seed = 99;
    CHECK(ofl_tsp_climbs(&t, 5, 10, tour, &best_seed) == ring && best_seed == 5,
          "climbs: best seed %llu", (unsigned long long)best_seed);
    free(tour);
    free(scratch);
    free(xy);
    ofl_tsp_free(&t);
}

static void test_init(void)
{
    double xy[10] = {0, 0, 3, 4, 0, 1.5, 1, 1, 9, 9};
    struct ofl_tsp t;
    CHECK(ofl_tsp_init(&t, xy, 3) == -EINVAL, "3 cities refused");
    CHECK(ofl_tsp_init(&t, xy, 5) == 0 && t.k == 4, "5 cities, k 4");
    CHECK(t.dist[1] == 5 && t.dist[2] == 2 && t.dist[5 * 2 + 3] == 1,
          "nint distances: %d %d %d", t.dist[1], t.dist[2], t.dist[5 * 2 + 3]);
    CHECK(t.nbr[0] == 3 && t.nbr[1] == 2 && t.nbr[2] == 1 && t.nbr[3] == 4,
          "nearest first: %u %u %u %u", t.nbr[0], t.nbr[1], t.nbr[2], t.nbr[3]);
    ofl_tsp_free(&t);
}

int main(void)
{
    test_parse_valid();
    test_parse_malformed();
    test_init();
    test_circle(5);
    test_circle(13);
    test_circle(200);
    return CHECK_DONE();
}
