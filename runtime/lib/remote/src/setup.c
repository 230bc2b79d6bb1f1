/* A remote device's run setup (remote_setup.h). */
#include "offlow/remote_setup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EBADMSG;
}

int ofl_setup_parse(struct ofl_setup *s, const void *hdr, size_t hlen, const void *data,
                    size_t len, char *err, size_t errlen)
{
    s->argc = 0;
    s->argv[0] = NULL;
    if (hlen != sizeof s->hdr) return bad(err, errlen, "a setup header of %zu bytes", hlen);
    memcpy(&s->hdr, hdr, sizeof s->hdr);
    const struct ofl_setup_hdr *h = &s->hdr;
    if (h->nrings > OFL_SETUP_MAX_RINGS || h->npeers > OFL_SETUP_MAX_PEERS ||
        h->exe_size == 0 || h->exe_size > OFL_SETUP_MAX_EXE)
        return bad(err, errlen, "a setup beyond the limits (%u rings, %u peers, %llu bytes of "
                   "executable)", h->nrings, h->npeers, (unsigned long long)h->exe_size);
    if (len > OFL_SETUP_MAX_DATA || len < h->nrings)
        return bad(err, errlen, "%zu bytes of setup data for %u rings", len, h->nrings);
    memcpy(s->buf, data, len);
    s->buf[len] = 0;
    s->dirs = s->buf;
    for (uint32_t i = 0; i < h->nrings; i++)
        if (s->buf[i] != 'o' && s->buf[i] != 'i' && s->buf[i] != '-')
            return bad(err, errlen, "ring %u: direction %#x is not o, i or -", i,
                       (unsigned)(uint8_t)s->buf[i]);
    for (size_t at = h->nrings; at < len;) {
        const char *end = memchr(s->buf + at, 0, len - at);
        if (!end) return bad(err, errlen, "an argument without its NUL");
        if (s->argc == OFL_SETUP_MAX_ARGS)
            return bad(err, errlen, "more than %d arguments", OFL_SETUP_MAX_ARGS);
        s->argv[s->argc++] = s->buf + at;
        at = (size_t)(end - s->buf) + 1;
    }
    s->argv[s->argc] = NULL;
    return 0;
}
