/* The tables of a segment on the xdp target (xdp_tables.h). */
#include "xdp_tables.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "offlow/lpm_bpf_layout.h"
#include "offlow/lpm_tables.h"
#include "offlow/map.h"

/* lpm_bpf.h's layout: lpm4.h's blocks and group flag, a directory flag beside any
 * block index; lpm6.h's trie (its strides, leaf flag and node layout). */
_Static_assert(OFL_LPM4_BLOCK == OFL_LPM4_BPF_BLOCK && OFL_LPM4_GROUP == OFL_LPM4_BPF_GROUP,
               "offlow/lpm_bpf_layout.h copies lpm4.h's block size and group flag");
_Static_assert(OFL_LPM4_DIR_ENTRIES <= OFL_LPM4_BPF_LEAF,
               "a block index never has the directory's leaf flag");
_Static_assert(OFL_LPM6_TOP_BITS == OFL_LPM6_BPF_TOP_BITS &&
               OFL_LPM6_STRIDE == OFL_LPM6_BPF_STRIDE && OFL_LPM6_TLEAF == OFL_LPM6_BPF_TLEAF,
               "offlow/lpm_bpf_layout.h copies lpm6.h's trie strides and leaf flag");
_Static_assert(sizeof(struct ofl_lpm6_pnode) == 24 &&
               offsetof(struct ofl_lpm6_pnode, leafvec) == 8 &&
               offsetof(struct ofl_lpm6_pnode, base1) == 16 &&
               offsetof(struct ofl_lpm6_pnode, base0) == 20,
               "offlow/lpm_bpf.h's struct ofl_lpm6_bpf_node is lpm6.h's ofl_lpm6_pnode");

/* Map `maps`+`suffix` of `obj`, or NULL (printed). */
static struct bpf_map *map_of(struct bpf_object *obj, const char *maps, const char *suffix)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s", maps, suffix);
    struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
    if (!m) fprintf(stderr, "offlow xdp: the program has no map %s\n", name);
    return m;
}

/* Size maps `maps`+`a` and `maps`+`b` of `obj` to `na` and `nb` values (an array map
 * has at least one). */
static int size_maps(struct bpf_object *obj, const char *maps, const char *a, size_t na,
                     const char *b, size_t nb)
{
    struct bpf_map *ma = map_of(obj, maps, a), *mb = map_of(obj, maps, b);
    if (!ma || !mb) return -ENOENT;
    if (na > UINT32_MAX || nb > UINT32_MAX) return -E2BIG;
    int rc = bpf_map__set_max_entries(ma, na ? (uint32_t)na : 1);
    return rc < 0 ? rc : bpf_map__set_max_entries(mb, nb ? (uint32_t)nb : 1);
}

/* The trie of IPv6 table `t` (a handle opened for updates, which nothing updates
 * during an xdp run: its current table stays). */
static const struct ofl_lpm6_trie *trie_of(const struct ofl_lpm6 *t)
{
    unsigned slot;
    const struct ofl_lpm6 *cur = ofl_lpm6_enter(t, &slot);
    ofl_lpm6_leave(t, slot);
    return &cur->trie;
}

/* Entries of a table list (up to the one named NULL). */
static size_t count(const struct ofl_xdp_table *x)
{
    size_t n = 0;
    while (x && x[n].name) n++;
    return n;
}

int ofl_xdp_lpm4_size(struct bpf_object *obj, const char *maps, const struct ofl_lpm4 *t)
{
    return size_maps(obj, maps, "_tbl24", t->blocks, "_tbl8", t->groups);
}

int ofl_xdp_lpm6_size(struct bpf_object *obj, const char *maps, const struct ofl_lpm6_trie *p)
{
    return size_maps(obj, maps, "_node", p->nnodes, "_leaf", p->nleaves);
}

int ofl_xdp_tables_open(struct ofl_xdp_tables *t, const struct ofl_xdp_desc *d,
                        const struct ofl_args *a, struct bpf_object *obj)
{
    size_t n = count(d->lpm4), n6 = count(d->lpm6);
    t->lpm4 = n ? calloc(n, sizeof *t->lpm4) : NULL;  /* (freed: the NULLs too) */
    t->n = t->lpm4 ? n : 0;
    t->lpm6 = n6 ? calloc(n6, sizeof *t->lpm6) : NULL;
    t->n6 = t->lpm6 ? n6 : 0;
    if ((n && !t->lpm4) || (n6 && !t->lpm6))
        return ofl_start_failf(a, "the xdp segment's tables: out of memory"), -ENOMEM;
    /* each table opened from its options, then a user's key it never read refused */
    for (size_t i = 0; i < n; i++) {
        int rc = ofl_lpm4_open_opts(&t->lpm4[i], a, d->lpm4[i].name);
        if (rc == 0) rc = ofl_args_check_unread(a, "table", d->lpm4[i].name);
        if (rc == 0) rc = ofl_xdp_lpm4_size(obj, d->lpm4[i].maps, t->lpm4[i]);
        if (rc < 0) return rc;
    }
    for (size_t i = 0; i < n6; i++) {
        int rc = ofl_lpm6_open_opts(&t->lpm6[i], a, d->lpm6[i].name);
        if (rc == 0) rc = ofl_args_check_unread(a, "table", d->lpm6[i].name);
        if (rc == 0) rc = ofl_xdp_lpm6_size(obj, d->lpm6[i].maps, trie_of(t->lpm6[i]));
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

/* Copy `n` values of `bytes` bytes each from `src` into the first values of map
 * `maps`+`suffix` of `obj`. */
static int copy_in(struct bpf_object *obj, const char *maps, const char *suffix,
                   const void *src, size_t n, size_t bytes)
{
    struct bpf_map *m = map_of(obj, maps, suffix);
    if (!m) return -ENOENT;
    if (n > bpf_map__max_entries(m) || bytes != bpf_map__value_size(m)) {
        fprintf(stderr, "offlow xdp: map %s takes %u values of %u bytes, not %zu of %zu\n",
                bpf_map__name(m), bpf_map__max_entries(m), bpf_map__value_size(m), n, bytes);
        return -EINVAL;
    }
    size_t len, stride;
    uint8_t *mem = map_mem(m, &len, &stride);
    if (!mem) return -EIO;
    for (size_t v = 0; v < n; v++)
        memcpy(mem + v * stride, (const uint8_t *)src + v * bytes, bytes);
    munmap(mem, len);
    return 0;
}

/* lpm_bpf.h's directory of `t`: each /16's block, or its hop with OFL_LPM4_BPF_LEAF
 * when the block holds that one hop (no group) in all its entries. NULL: no memory. */
static uint32_t *bpf_dir(const struct ofl_lpm4 *t)
{
    uint32_t *d = malloc(OFL_LPM4_DIR_ENTRIES * sizeof *d);
    if (!d) return NULL;
    for (uint32_t i = 0; i < OFL_LPM4_DIR_ENTRIES; i++) {
        const uint16_t *b = &t->tbl24[(size_t)t->dir[i] * OFL_LPM4_BLOCK];
        uint32_t k = 1;
        while (k < OFL_LPM4_BLOCK && b[k] == b[0]) k++;
        d[i] = k == OFL_LPM4_BLOCK && !(b[0] & OFL_LPM4_GROUP) ? OFL_LPM4_BPF_LEAF | b[0]
                                                                : t->dir[i];
    }
    return d;
}

int ofl_xdp_lpm4_fill(struct bpf_object *obj, const char *maps, const struct ofl_lpm4 *t)
{
    const size_t block = OFL_LPM4_BLOCK * sizeof(uint16_t);
    uint32_t *dir = bpf_dir(t);
    if (!dir) return -ENOMEM;
    int rc = copy_in(obj, maps, "_dir", dir, OFL_LPM4_DIR_ENTRIES / OFL_LPM4_BLOCK,
                     OFL_LPM4_BLOCK * sizeof *dir);
    free(dir);
    if (rc == 0) rc = copy_in(obj, maps, "_tbl24", t->tbl24, t->blocks, block);
    if (rc == 0) rc = copy_in(obj, maps, "_tbl8", t->tbl8, t->groups, block);
    return rc;
}

int ofl_xdp_lpm6_fill(struct bpf_object *obj, const char *maps, const struct ofl_lpm6_trie *p)
{
    int rc = copy_in(obj, maps, "_top", p->top, (size_t)1 << OFL_LPM6_TOP_BITS,
                     sizeof *p->top);
    if (rc == 0) rc = copy_in(obj, maps, "_node", p->node, p->nnodes, sizeof *p->node);
    if (rc == 0) rc = copy_in(obj, maps, "_leaf", p->leaf, p->nleaves, sizeof *p->leaf);
    return rc;
}

int ofl_xdp_tables_fill(const struct ofl_xdp_tables *t, const struct ofl_xdp_desc *d,
                        struct bpf_object *obj)
{
    for (size_t i = 0; i < t->n; i++) {
        int rc = ofl_xdp_lpm4_fill(obj, d->lpm4[i].maps, t->lpm4[i]);
        if (rc < 0) return rc;
    }
    for (size_t i = 0; i < t->n6; i++) {
        int rc = ofl_xdp_lpm6_fill(obj, d->lpm6[i].maps, trie_of(t->lpm6[i]));
        if (rc < 0) return rc;
    }
    return 0;
}

/* Add integer `i` of `src` to that of `dst`, both arrays of `size`-byte integers,
 * wrapping as unsigned integers of that size do. */
static void add_int(void *dst, const void *src, unsigned i, unsigned size)
{
    switch (size) {
    case 1: ((uint8_t *)dst)[i] = (uint8_t)(((uint8_t *)dst)[i] + ((const uint8_t *)src)[i]);
        break;
    case 2: ((uint16_t *)dst)[i] =
            (uint16_t)(((uint16_t *)dst)[i] + ((const uint16_t *)src)[i]);
        break;
    case 4: ((uint32_t *)dst)[i] += ((const uint32_t *)src)[i]; break;
    default: ((uint64_t *)dst)[i] += ((const uint64_t *)src)[i]; break;
    }
}

/* Read shared array `x` from its map `fd` into `v` (x->n integers): the map's one
 * value, or for a per-CPU map the sum of every possible CPU's copy (the kernel
 * returns them one after another, each rounded up to 8 bytes). 0 or a negative errno. */
static int read_array(const struct ofl_xdp_array *x, int fd, void *v)
{
    uint32_t zero = 0;
    if (!x->percpu) return bpf_map_lookup_elem(fd, &zero, v) < 0 ? -errno : 0;
    int ncpus = libbpf_num_possible_cpus();
    if (ncpus < 0) return ncpus;
    size_t stride = ((size_t)x->n * x->size + 7u) & ~(size_t)7u;
    uint8_t *all = calloc((size_t)ncpus, stride);
    if (!all) return -ENOMEM;
    int rc = bpf_map_lookup_elem(fd, &zero, all) < 0 ? -errno : 0;
    memset(v, 0, (size_t)x->n * x->size);
    for (int c = 0; rc == 0 && c < ncpus; c++)
        for (unsigned i = 0; i < x->n; i++) add_int(v, all + (size_t)c * stride, i, x->size);
    free(all);
    return rc;
}

void ofl_xdp_arrays_report(struct ofl_json *j, const struct ofl_xdp_desc *d,
                           struct bpf_object *obj, bool contents)
{
    for (const struct ofl_xdp_array *x = d->arrays; x && x->name; x++) {
        if (!contents) {
            ofl_stats_table_length(j, x->name, x->n);
            continue;
        }
        struct bpf_map *m = bpf_object__find_map_by_name(obj, x->map);
        void *v = calloc(x->n ? x->n : 1, x->size);
        if (m && v && read_array(x, bpf_map__fd(m), v) == 0)
            ofl_stats_table(j, x->name, v, x->n, x->size, x->is_signed);
        else
            fprintf(stderr, "offlow xdp: cannot read shared array %s\n", x->name);
        free(v);
    }
}

/* A hash map's keys and values read out of the kernel, handed to ofl_map_json. */
struct held {
    uint8_t *keys, *values;
    uint32_t n, at, key_size, value_size;
};

static int held_next(void *it, const void **key, const void **value)
{
    struct held *h = it;
    if (h->at == h->n) return 0;
    *key = h->keys + (size_t)h->at * h->key_size;
    *value = h->values + (size_t)h->at * h->value_size;
    h->at++;
    return 1;
}

/* Read every key and value of hash map `fd` (at most x->entries) into `h`. */
static int read_map(const struct ofl_xdp_map *x, int fd, struct held *h)
{
    *h = (struct held){ .key_size = x->key_size, .value_size = x->value_size };
    h->keys = calloc(x->entries + 1u, x->key_size);
    h->values = calloc(x->entries + 1u, x->value_size);
    if (!h->keys || !h->values) return -ENOMEM;
    const void *prev = NULL;
    while (h->n < x->entries) {
        uint8_t *k = h->keys + (size_t)h->n * x->key_size;
        if (bpf_map_get_next_key(fd, prev, k) < 0)
            return errno == ENOENT ? 0 : -errno;
        /* (after a replay nothing changes the map; with --iface the interface's
         * traffic may, and a key deleted under the walk restarts it from the first:
         * the loop reads at most `entries` keys, a snapshot) */
        if (bpf_map_lookup_elem(fd, k, h->values + (size_t)h->n * x->value_size) < 0)
            return -errno;
        prev = k;
        h->n++;
    }
    return 0;
}

/* Count the keys of hash map `fd` (at most x->entries) into `n`, reading no value: a
 * live read of the counters (the map's items, not its pairs). */
static int count_map(const struct ofl_xdp_map *x, int fd, uint32_t *n)
{
    uint8_t *keys = calloc(2, x->key_size);
    if (!keys) return -ENOMEM;
    int rc = 0;
    const void *prev = NULL;
    for (*n = 0; *n < x->entries; ++*n) {
        uint8_t *k = keys + (size_t)(*n & 1u) * x->key_size;
        if (bpf_map_get_next_key(fd, prev, k) < 0) {
            rc = errno == ENOENT ? 0 : -errno;
            break;
        }
        prev = k;
    }
    free(keys);
    return rc;
}

int ofl_xdp_map_full(struct bpf_object *obj, const struct ofl_xdp_map *x, uint64_t *full)
{
    struct ofl_xdp_array counter = { x->name, NULL, 1u, 8u, 0, 1, NULL };
    char name[160];
    snprintf(name, sizeof name, "%s_full", x->map);
    struct bpf_map *f = bpf_object__find_map_by_name(obj, name);
    *full = 0;
    return f ? read_array(&counter, bpf_map__fd(f), full) : -ENOENT;
}

void ofl_xdp_maps_report(struct ofl_json *j, const struct ofl_xdp_desc *d,
                         struct bpf_object *obj, const uint64_t *ctl_full, bool contents)
{
    for (const struct ofl_xdp_map *x = d->maps; x && x->name; x++) {
        struct bpf_map *m = bpf_object__find_map_by_name(obj, x->map);
        uint64_t nfull = 0;
        struct held h = {0};
        if (m && ofl_xdp_map_full(obj, x, &nfull) == 0 &&
            (contents ? read_map(x, bpf_map__fd(m), &h) : count_map(x, bpf_map__fd(m), &h.n))
                == 0)
            ofl_map_json(j, x->name, x->key_size, x->value_size, x->entries, h.n,
                         nfull + (ctl_full ? ctl_full[x - d->maps] : 0), contents, held_next,
                         &h);
        else
            fprintf(stderr, "offlow xdp: cannot read shared map %s\n", x->name);
        free(h.keys);
        free(h.values);
    }
}

void ofl_xdp_tables_free(struct ofl_xdp_tables *t)
{
    for (size_t i = 0; i < t->n; i++) ofl_lpm4_free(t->lpm4[i]);
    for (size_t i = 0; i < t->n6; i++) ofl_lpm6_free(t->lpm6[i]);
    free(t->lpm4);
    free(t->lpm6);
    *t = (struct ofl_xdp_tables){0};
}
