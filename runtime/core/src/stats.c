/* A tiny streaming JSON writer. */
#include "offlow/stats.h"

#include <math.h>

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

static int level(const struct ofl_json *j)
{
    if (j->depth < 0) return 0;
    return j->depth < OFL_JSON_MAX_DEPTH ? j->depth : OFL_JSON_MAX_DEPTH - 1;
}

/* Comma if needed, then the key (inside objects). */
static void member(struct ofl_json *j, const char *key)
{
    int d = level(j);
    if (j->first[d]) fputc(',', j->f);
    j->first[d] = 1;
    if (key) {
        put_string(j->f, key);
        fputc(':', j->f);
    }
}

static void open_(struct ofl_json *j, const char *key, char c)
{
    if (!j->f) return;
    member(j, key);
    fputc(c, j->f);
    j->depth++;
    j->first[level(j)] = 0;
}

static void close_(struct ofl_json *j, char c)
{
    if (!j->f) return;
    fputc(c, j->f);
    if (j->depth > 0) j->depth--;
}

void ofl_json_begin_obj(struct ofl_json *j, const char *key) { open_(j, key, '{'); }
void ofl_json_end_obj(struct ofl_json *j) { close_(j, '}'); }
void ofl_json_begin_arr(struct ofl_json *j, const char *key) { open_(j, key, '['); }
void ofl_json_end_arr(struct ofl_json *j) { close_(j, ']'); }

/* `v` in decimal: digits made here, one fwrite (fprintf's format parsing, per number,
 * was most of the time a stats file with a 4M-entry array took to write). */
static void put_u64(FILE *f, uint64_t v)
{
    char b[20];  /* 18446744073709551615: 20 digits */
    size_t n = sizeof b;
    do {
        b[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    fwrite(b + n, 1, sizeof b - n, f);
}

void ofl_json_u64(struct ofl_json *j, const char *key, uint64_t v)
{
    if (!j->f) return;
    member(j, key);
    put_u64(j->f, v);
}

void ofl_json_f64(struct ofl_json *j, const char *key, double v)
{
    if (!j->f) return;
    member(j, key);
    if (isfinite(v)) fprintf(j->f, "%.17g", v);
    else fputs("null", j->f);
}

void ofl_json_str(struct ofl_json *j, const char *key, const char *v)
{
    if (!j->f) return;
    member(j, key);
    if (v) put_string(j->f, v);
    else fputs("null", j->f);
}
