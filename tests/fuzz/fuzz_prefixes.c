/* libFuzzer target: the prefix-file reader and the size-mix parser on arbitrary text.
 *
 * The text is fed in two pieces split where its first byte says; the counts must
 * add up to the lines seen, every prefix must be canonical, and feeding the text
 * whole must give the same set. The whole input, as a string, also goes to the
 * size-mix parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/synth.h"

static void check_set(const struct ofl_prefixes *ps)
{
    if (ps->lines != ps->n + ps->v6 + ps->blank + ps->bad) abort();
    for (size_t i = 0; i < ps->n; i++) {
        const struct ofl_prefix4 *p = &ps->v[i];
        if (p->len > 32) abort();
        uint32_t host = p->len == 32 ? 0 : (uint32_t)(0xFFFFFFFFull >> p->len);
        if (p->addr & host) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    size_t cut = size ? data[0] % (size + 1) : 0;
    struct ofl_prefixes a, b;
    ofl_prefixes_init(&a);
    ofl_prefixes_init(&b);
    if (ofl_prefixes_feed(&a, text, cut) || ofl_prefixes_feed(&a, text + cut, size - cut) ||
        ofl_prefixes_finish(&a))
        abort();
    if (ofl_prefixes_feed(&b, text, size) || ofl_prefixes_finish(&b)) abort();
    check_set(&a);
    if (a.n != b.n || a.lines != b.lines || a.bad != b.bad || a.v6 != b.v6) abort();
    for (size_t i = 0; i < a.n; i++)
        if (a.v[i].addr != b.v[i].addr || a.v[i].len != b.v[i].len) abort();
    ofl_prefixes_free(&a);
    ofl_prefixes_free(&b);

    uint32_t addr;
    uint8_t len;
    int rc = ofl_prefix_parse_line(text, size, &addr, &len);
    if (rc == OFL_PREFIX_V4 && len > 32) abort();

    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    struct ofl_size_mix m;
    char err[256];
    if (ofl_size_mix_parse(&m, s, err) == 0) {
        if (m.n == 0 || m.n > OFL_SIZE_MIX_MAX) abort();
        for (uint32_t i = 0; i < m.n; i++) {
            if (m.size[i] < OFL_SYNTH_MIN_SIZE || m.size[i] > OFL_SYNTH_MAX_SIZE) abort();
            if (i && m.cum[i] <= m.cum[i - 1]) abort();
        }
        struct ofl_rng r = {size};
        uint32_t pick = ofl_size_mix_pick(&m, &r);
        if (pick < OFL_SYNTH_MIN_SIZE || pick > OFL_SYNTH_MAX_SIZE) abort();
    }
    free(s);
    return 0;
}
