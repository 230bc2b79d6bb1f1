/* TSPLIB files of TYPE TSP and EDGE_WEIGHT_TYPE EUC_2D (see offlow/tsp.h). Each line is
 * copied into a bounded, NUL-terminated buffer before it is read, so the text need not
 * end in NUL and a line cannot run past it. */
#include "offlow/tsp.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_LEN 256

static int fail(char *err, size_t errlen, unsigned line, const char *fmt, ...)
{
    if (errlen == 0)
        return -EINVAL;
    int at = snprintf(err, errlen, "line %u: ", line);
    if (at >= 0 && (size_t)at < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + at, errlen - (size_t)at, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* A whole-token unsigned decimal in [lo, hi], or -1. */
static long parse_count(const char *s, long lo, long hi)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *trim(end) != '\0' || v < lo || v > hi)
        return -1;
    return v;
}

struct parse {
    const char *text;
    size_t len, at;
    unsigned line;
    char buf[LINE_MAX_LEN + 1];
};

/* The next line, trimmed, or NULL at the end; *bad: 1 for a line over LINE_MAX_LEN,
 * 2 for one with a NUL byte, else 0. */
static char *next_line(struct parse *p, int *bad)
{
    *bad = 0;
    if (p->at >= p->len)
        return NULL;
    const char *s = p->text + p->at;
    const char *nl = memchr(s, '\n', p->len - p->at);
    size_t n = nl ? (size_t)(nl - s) : p->len - p->at;
    p->at += n + (nl != NULL);
    p->line++;
    if (n > LINE_MAX_LEN) {
        *bad = 1;
        return p->buf;
    }
    memcpy(p->buf, s, n);
    p->buf[n] = '\0';
    if (memchr(p->buf, '\0', n)) {
        *bad = 2;
        return p->buf;
    }
    return trim(p->buf);
}

/* The next line that is not blank, trimmed, into *s (NULL at the end). Returns 0, or
 * -EINVAL with the reason in `err` for a line over LINE_MAX_LEN or with a NUL byte. */
static int next_content(struct parse *p, char **s, char *err, size_t errlen)
{
    int bad;
    while ((*s = next_line(p, &bad)) != NULL) {
        if (bad)
            return fail(err, errlen, p->line, bad == 1 ? "line longer than %d bytes"
                        : "a NUL byte in the text", LINE_MAX_LEN);
        if (**s != '\0')
            return 0;
    }
    return 0;
}

/* The header: KEYWORD [ ]: VALUE lines up to NODE_COORD_SECTION. */
static int header(struct parse *p, long *dim, char *err, size_t errlen)
{
    int type = 0, weights = 0, rc;
    char *s;
    *dim = -1;
    while ((rc = next_content(p, &s, err, errlen)) == 0 && s != NULL) {
        if (strcmp(s, "NODE_COORD_SECTION") == 0) {
            if (!type)
                return fail(err, errlen, p->line, "NODE_COORD_SECTION before TYPE : TSP");
            if (!weights)
                return fail(err, errlen, p->line,
                            "NODE_COORD_SECTION before EDGE_WEIGHT_TYPE : EUC_2D");
            if (*dim < 0)
                return fail(err, errlen, p->line, "NODE_COORD_SECTION before DIMENSION");
            return 0;
        }
        char *colon = strchr(s, ':');
        if (!colon)
            return fail(err, errlen, p->line, "expected `KEYWORD : VALUE` or "
                        "NODE_COORD_SECTION, got `%.40s`", s);
        *colon = '\0';
        char *key = trim(s), *value = trim(colon + 1);
        if (strcmp(key, "NAME") == 0 || strcmp(key, "COMMENT") == 0)
            continue;
        if (strcmp(key, "TYPE") == 0) {
            if (strcmp(value, "TSP") != 0)
                return fail(err, errlen, p->line, "TYPE `%.40s`: offlow reads TSP files only",
                            value);
            type = 1;
        } else if (strcmp(key, "EDGE_WEIGHT_TYPE") == 0) {
            if (strcmp(value, "EUC_2D") != 0)
                return fail(err, errlen, p->line, "EDGE_WEIGHT_TYPE `%.40s`: offlow reads "
                            "EUC_2D only", value);
            weights = 1;
        } else if (strcmp(key, "DIMENSION") == 0) {
            *dim = parse_count(value, OFL_TSP_MIN_CITIES, OFL_TSP_MAX_CITIES);
            if (*dim < 0)
                return fail(err, errlen, p->line, "DIMENSION `%.40s`: expected a whole "
                            "number from %d to %d", value, OFL_TSP_MIN_CITIES,
                            OFL_TSP_MAX_CITIES);
        } else {
            return fail(err, errlen, p->line, "keyword `%.40s` is not read here (a TSP file "
                        "with EUC_2D coordinates has NAME, COMMENT, TYPE, DIMENSION, "
                        "EDGE_WEIGHT_TYPE, NODE_COORD_SECTION)", key);
        }
    }
    return rc ? rc : fail(err, errlen, p->line, "no NODE_COORD_SECTION");
}

static int coordinate(const char *tok, double *v)
{
    char *end;
    if (!tok)
        return -1;
    *v = strtod(tok, &end);
    return *end == '\0' && end != tok && isfinite(*v) && fabs(*v) <= 1e9 ? 0 : -1;
}

/* DIMENSION node lines "INDEX X Y", each index once, then optionally EOF. */
static int nodes(struct parse *p, uint32_t n, double *xy, uint8_t *seen, char *err,
                 size_t errlen)
{
    uint32_t got = 0;
    int rc;
    char *s;
    while ((rc = next_content(p, &s, err, errlen)) == 0 && s != NULL) {
        if (strcmp(s, "EOF") == 0)
            break;
        if (got == n)
            return fail(err, errlen, p->line, "more than DIMENSION = %u node lines", n);
        char *save, *idx = strtok_r(s, " \t", &save);
        char *xs = strtok_r(NULL, " \t", &save), *ys = strtok_r(NULL, " \t", &save);
        long i = parse_count(idx, 1, n);
        double x, y;
        if (!xs || !ys || strtok_r(NULL, " \t", &save))
            return fail(err, errlen, p->line, "expected `INDEX X Y`");
        if (i < 0)
            return fail(err, errlen, p->line, "node index `%.20s`: expected 1 to %u", idx, n);
        if (seen[i - 1])
            return fail(err, errlen, p->line, "node %ld given twice", i);
        if (coordinate(xs, &x) || coordinate(ys, &y))
            return fail(err, errlen, p->line, "node %ld: coordinates `%.30s %.30s` are not "
                        "finite numbers of at most 1e9", i, xs, ys);
        seen[i - 1] = 1;
        xy[2 * (i - 1)] = x;
        xy[2 * (i - 1) + 1] = y;
        got++;
    }
    if (rc)
        return rc;
    if (got < n)
        return fail(err, errlen, p->line, "%u node lines for DIMENSION %u", got, n);
    return 0;
}

int ofl_tsplib_parse(const char *text, size_t len, double **xy, uint32_t *n, char *err,
                     size_t errlen)
{
    struct parse p = {.text = text, .len = len};
    long dim;
    if (errlen)
        err[0] = '\0';
    int rc = header(&p, &dim, err, errlen);
    if (rc)
        return rc;
    double *out = malloc(2 * (size_t)dim * sizeof *out);
    uint8_t *seen = calloc((size_t)dim, 1);
    if (!out || !seen) {
        free(out);
        free(seen);
        return -ENOMEM;
    }
    rc = nodes(&p, (uint32_t)dim, out, seen, err, errlen);
    free(seen);
    if (rc) {
        free(out);
        return rc;
    }
    *xy = out;
    *n = (uint32_t)dim;
    return 0;
}
