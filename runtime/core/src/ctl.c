/* Control messages of arrays, and the reply helpers (ctl.h). */
#include "offlow/ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ofl_ctl_ok(struct ofl_ctl_reply *r, const void *p, size_t n)
{
    int32_t st = 0;
    memcpy(r->b, &st, 4);
    if (n > sizeof r->b - 4) n = sizeof r->b - 4;
    if (n) memcpy(r->b + 4, p, n);
    r->n = 4 + n;
}

void ofl_ctl_ok_out(struct ofl_ctl_reply *r, struct ofl_ctl_out *out, const void *p, size_t n)
{
    if (n <= OFL_CTL_REPLY_MAX) {
        ofl_ctl_ok(r, p, n);
        return;
    }
    if (!out || n > out->cap || n > INT32_MAX) {
        ofl_ctl_fail(r, -EMSGSIZE, "a reply of %zu bytes does not fit a message", n);
        return;
    }
    memcpy(out->b, p, n);
    out->n = n;
    int32_t st = (int32_t)n;   /* positive: kept, read it in parts */
    memcpy(r->b, &st, 4);
    r->n = 4;
}

void ofl_ctl_fail(struct ofl_ctl_reply *r, int rc, const char *fmt, ...)
{
    int32_t st = rc;
    memcpy(r->b, &st, 4);
    char text[OFL_CTL_MSG_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text - 4, fmt, ap);
    va_end(ap);
    size_t n = strlen(text);
    memcpy(r->b + 4, text, n);
    r->n = 4 + n;
}

/* Store `size` bytes at p: one atomic store where the size allows. */
static void store(void *p, const uint8_t *v, size_t size)
{
    uint64_t x = 0;
    memcpy(&x, v, size < 8 ? size : 8);
    switch (size) {
    case 1: __atomic_store_n((uint8_t *)p, (uint8_t)x, __ATOMIC_RELAXED); break;
    case 2: __atomic_store_n((uint16_t *)p, (uint16_t)x, __ATOMIC_RELAXED); break;
    case 4: __atomic_store_n((uint32_t *)p, (uint32_t)x, __ATOMIC_RELAXED); break;
    case 8: __atomic_store_n((uint64_t *)p, x, __ATOMIC_RELAXED); break;
    default: memcpy(p, v, size);
    }
}

/* The index of a get or set message, or fail. */
static int index_of(const uint8_t *msg, size_t len, size_t n, size_t *i,
                    struct ofl_ctl_reply *r)
{
    uint32_t x;
    if (len < 5) {
        ofl_ctl_fail(r, -EINVAL, "message of %zu bytes: no index", len);
        return -EINVAL;
    }
    memcpy(&x, msg + 1, 4);
    if (x >= n) {
        ofl_ctl_fail(r, -ERANGE, "index %u: the table has %zu elements", x, n);
        return -ERANGE;
    }
    *i = x;
    return 0;
}

void ofl_ctl_array(void *base, size_t size, size_t n, char type, uint64_t *updates,
                   const uint8_t *msg, size_t len, struct ofl_ctl_reply *r)
{
    ofl_ctl_array_out(base, size, n, type, updates, msg, len, NULL, r);
}

void ofl_ctl_array_out(void *base, size_t size, size_t n, char type, uint64_t *updates,
                       const uint8_t *msg, size_t len, struct ofl_ctl_out *out,
                       struct ofl_ctl_reply *r)
{
    uint8_t *b = base;
    size_t i;
    if (len == 0) {
        ofl_ctl_fail(r, -EINVAL, "empty message");
        return;
    }
    switch (msg[0]) {
    case OFL_CTL_INFO: {
        struct ofl_ctl_info in = {OFL_CTL_ARRAY, (uint8_t)type, (uint16_t)size, 0, n, *updates};
        ofl_ctl_ok(r, &in, sizeof in);
        return;
    }
    case OFL_CTL_GET:
        if (index_of(msg, len, n, &i, r) < 0) return;
        if (size > OFL_CTL_REPLY_MAX) {   /* a copy, kept in `out` */
            ofl_ctl_ok_out(r, out, b + size * i, size);
            return;
        }
        uint8_t v[OFL_CTL_MSG_MAX];
        switch (size) {   /* one atomic load where the size allows */
        case 1: v[0] = __atomic_load_n(b + i, __ATOMIC_RELAXED); break;
        case 2: { uint16_t x = __atomic_load_n((uint16_t *)(b + 2 * i), __ATOMIC_RELAXED);
                  memcpy(v, &x, 2); break; }
        case 4: { uint32_t x = __atomic_load_n((uint32_t *)(b + 4 * i), __ATOMIC_RELAXED);
                  memcpy(v, &x, 4); break; }
        case 8: { uint64_t x = __atomic_load_n((uint64_t *)(b + 8 * i), __ATOMIC_RELAXED);
                  memcpy(v, &x, 8); break; }
        default: memcpy(v, b + size * i, size);
        }
        ofl_ctl_ok(r, v, size);
        return;
    case OFL_CTL_SET:
        if (index_of(msg, len, n, &i, r) < 0) return;
        if (len - 5 != size) {
            ofl_ctl_fail(r, -EINVAL, "a value of %zu bytes: elements are %zu", len - 5, size);
            return;
        }
        store(b + size * i, msg + 5, size);
        ++*updates;
        ofl_ctl_ok(r, NULL, 0);
        return;
    default:
        ofl_ctl_fail(r, -EOPNOTSUPP, "request '%c' is not one an array takes (i, g, s)",
                     msg[0] >= 32 && msg[0] < 127 ? msg[0] : '?');
    }
}
