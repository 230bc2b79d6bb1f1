/* The tables of a segment on the xdp target (xdp_tables.h). */
#include "xdp_tables.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "offlow/lpm_tables.h"

/* lpm_bpf.h's layout: 256-entry blocks, the group flag of lpm4.h. */
_Static_assert(OFL_LPM4_BLOCK == 256u && OFL_LPM4_GROUP == 0x8000u,
               "offlow/lpm_bpf.h copies lpm4.h's block size and group flag");

/* Map `maps`+`suffix` of `obj`, or NULL (printed). */
static struct bpf_map *map_of(struct bpf_object *obj, const char *maps, const char *suffix)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s", maps, suffix);
    struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
    if (!m) fprintf(stderr, "offlow xdp: the program has no map %s\n", name);
    return m;
}

int ofl_xdp_tables_open(struct ofl_xdp_tables *t, const struct ofl_xdp_desc *d,
                        const struct ofl_args *a, struct bpf_object *obj)
{
    size_t n = 0;
    while (d->lpm4 && d->lpm4[n].name) n++;
    t->lpm4 = n ? calloc(n, sizeof *t->lpm4) : NULL;  /* (freed: the NULLs too) */
    t->n = t->lpm4 ? n : 0;
    if (n && !t->lpm4) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct ofl_xdp_table *x = &d->lpm4[i];
        int rc = ofl_lpm4_open_opts(&t->lpm4[i], a, x->name);
        if (rc < 0) return rc;
        const struct ofl_lpm4 *l = t->lpm4[i];
        struct bpf_map *b24 = map_of(obj, x->maps, "_tbl24");
        struct bpf_map *b8 = map_of(obj, x->maps, "_tbl8");
        if (!b24 || !b8) return -ENOENT;
        /* (an array map has at least one value) */
        rc = bpf_map__set_max_entries(b24, l->blocks ? l->blocks : 1);
        if (rc == 0) rc = bpf_map__set_max_entries(b8, l->groups ? l->groups : 1);
        if (rc < 0) return rc;
    }
    return 0;
}

/* The values of mmapable array map `m`, at a stride of its value size rounded up to
 * 8 bytes; NULL (printed) if it cannot be mapped. `*len`: the mapping's length. */
static uint8_t *map_mem(struct bpf_map *m, size_t *len, size_t *stride)
{
    *stride = (bpf_map__value_size(m) + 7u) & ~(size_t)7u;
    *len = *stride * bpf_map__max_entries(m);
    void *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
    if (p != MAP_FAILED) return p;
    fprintf(stderr, "offlow xdp: cannot map %s: %s\n", bpf_map__name(m), strerror(errno));
    return NULL;
}

/* Copy `n` entries of 16 bits from `src` into map `m`, `per` entries per value. */
static int copy_in(struct bpf_map *m, const uint16_t *src, size_t n, size_t per)
{
    size_t len, stride;
    uint8_t *mem = map_mem(m, &len, &stride);
    if (!mem) return -EIO;
    for (size_t v = 0; v * per < n; v++)
        memcpy(mem + v * stride, src + v * per, per * sizeof *src);
    munmap(mem, len);
    return 0;
}

int ofl_xdp_tables_fill(const struct ofl_xdp_tables *t, const struct ofl_xdp_desc *d,
                        struct bpf_object *obj)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct ofl_lpm4 *l = t->lpm4[i];
        const char *maps = d->lpm4[i].maps;
        struct bpf_map *dir = map_of(obj, maps, "_dir"), *b24 = map_of(obj, maps, "_tbl24");
        struct bpf_map *b8 = map_of(obj, maps, "_tbl8");
        if (!dir || !b24 || !b8) return -ENOENT;
        int rc = copy_in(dir, l->dir, OFL_LPM4_DIR_ENTRIES, 1);
        if (rc == 0) rc = copy_in(b24, l->tbl24, (size_t)l->blocks * OFL_LPM4_BLOCK,
                                  OFL_LPM4_BLOCK);
        if (rc == 0) rc = copy_in(b8, l->tbl8, (size_t)l->groups * OFL_LPM4_BLOCK,
                                  OFL_LPM4_BLOCK);
        if (rc < 0) return rc;
    }
    return 0;
}

void ofl_xdp_arrays_report(struct ofl_json *j, const struct ofl_xdp_desc *d,
                           struct bpf_object *obj)
{
    for (const struct ofl_xdp_array *x = d->arrays; x && x->name; x++) {
        struct bpf_map *m = bpf_object__find_map_by_name(obj, x->map);
        void *v = calloc(x->n ? x->n : 1, x->size);
        uint32_t zero = 0;
        if (m && v && bpf_map_lookup_elem(bpf_map__fd(m), &zero, v) == 0)
            ofl_stats_table(j, x->name, v, x->n, x->size, x->is_signed);
        else
            fprintf(stderr, "offlow xdp: cannot read shared array %s\n", x->name);
        free(v);
    }
}

void ofl_xdp_tables_free(struct ofl_xdp_tables *t)
{
    for (size_t i = 0; i < t->n; i++) ofl_lpm4_free(t->lpm4[i]);
    free(t->lpm4);
    t->lpm4 = NULL;
    t->n = 0;
}
