/* A tiny streaming JSON writer (for the stats file written at exit). */
#ifndef OFL_STATS_H
#define OFL_STATS_H

#include <stdint.h>
#include <stdio.h>

#define OFL_JSON_MAX_DEPTH 16

/* Writer state; zero it, set `f`, then begin the top value with key NULL.
 * first[d] is nonzero once a value was written at depth d (a comma is due).
 * Nesting deeper than OFL_JSON_MAX_DEPTH - 1 still writes valid JSON but may
 * misplace commas. Calls with f == NULL do nothing. */
struct ofl_json {
    FILE *f;
    int depth;
    int first[OFL_JSON_MAX_DEPTH];
};

/* Start an object; `key` names it inside an object, NULL in arrays or at the top. */
void ofl_json_begin_obj(struct ofl_json *j, const char *key);
/* End the innermost object. */
void ofl_json_end_obj(struct ofl_json *j);
/* Start an array (key as for objects). */
void ofl_json_begin_arr(struct ofl_json *j, const char *key);
/* End the innermost array. */
void ofl_json_end_arr(struct ofl_json *j);
/* An unsigned integer member (key NULL inside arrays). */
void ofl_json_u64(struct ofl_json *j, const char *key, uint64_t v);
/* A number (%.17g); NaN and infinities are written as null. */
void ofl_json_f64(struct ofl_json *j, const char *key, double v);
/* A string, escaped; NULL is written as null. */
void ofl_json_str(struct ofl_json *j, const char *key, const char *v);

#endif
