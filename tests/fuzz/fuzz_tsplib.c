/* libFuzzer target: the TSPLIB parser (tsp.h) on arbitrary bytes, then a climb.
 *
 * The input is the file (an exactly sized heap copy, so ASan catches a read past
 * `len`). A file that parses must give DIMENSION finite cities of at most 1e9 in size
 * and no error text; one that does not must give -EINVAL and a reason. A parsed
 * instance of up to 64 cities is climbed once: the tour must be a permutation with the
 * length the climb returned. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/tsp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    double *xy = NULL;
    uint32_t n = 0;
    char err[128];
    int rc = ofl_tsplib_parse(text, size, &xy, &n, err, sizeof err);
    free(text);
    if (rc != 0) {
        if (rc != -EINVAL || err[0] == '\0' || xy != NULL) abort();
        return 0;
    }
    if (n < OFL_TSP_MIN_CITIES || n > OFL_TSP_MAX_CITIES || err[0] != '\0') abort();
    for (uint32_t i = 0; i < 2 * n; i++)
        if (!isfinite(xy[i]) || fabs(xy[i]) > 1e9) abort();
    if (n <= 64) {
        struct ofl_tsp t;
        uint32_t tour[64], scratch[3 * 64];
        uint8_t seen[64] = {0};
        if (ofl_tsp_init(&t, xy, n) != 0) abort();
        int64_t len = ofl_tsp_climb(&t, size, tour, scratch);
        for (uint32_t i = 0; i < n; i++) {
            if (tour[i] >= n || seen[tour[i]]) abort();
            seen[tour[i]] = 1;
        }
        if (len != ofl_tsp_length(&t, tour)) abort();
        ofl_tsp_free(&t);
    }
    free(xy);
    return 0;
}
