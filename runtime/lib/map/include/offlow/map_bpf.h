/* Shared hash maps (offlow/map.h) in XDP: a BPF_MAP_TYPE_HASH keyed by the map's packed
 * key struct, and the same body calls as on every device (ofl_map_lookup, _update,
 * _delete), with the same results: an update the hash map has no room for (-E2BIG, or
 * -ENOMEM when the kernel cannot allocate) is -ENOSPC, counted `full` in a per-CPU
 * counter the host side sums. Include only from generated XDP programs (after
 * offlow/bpf.h). */
#ifndef OFL_MAP_BPF_H
#define OFL_MAP_BPF_H

#ifndef ENOENT
#define ENOENT 2
#endif
#ifndef ENOMEM
#define ENOMEM 12
#endif
#ifndef E2BIG
#define E2BIG 7
#endif
#ifndef ENOSPC
#define ENOSPC 28
#endif

/* An element's name for a map in XDP: the hash map and its `full` counter. */
struct ofl_map_bpf {
    void *map;
    void *full;
};

/* The maps of shared map NAME: the hash map NAME and its counter NAME_full. */
#define OFL_MAP_BPF_MAPS(NAME, KEY, VALUE, ENTRIES)                                 \
    struct {                                                                        \
        __uint(type, BPF_MAP_TYPE_HASH);                                            \
        __uint(max_entries, ENTRIES);                                               \
        __type(key, KEY);                                                           \
        __type(value, VALUE);                                                       \
    } NAME SEC(".maps");                                                            \
    struct {                                                                        \
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                    \
        __uint(max_entries, 1);                                                     \
        __type(key, uint32_t);                                                      \
        __type(value, uint64_t);                                                    \
    } NAME##_full SEC(".maps")

/* Store `value` under `key` in `map`: 0, or -ENOSPC counted in `full` when the map
 * has no room for a new key; another error as the kernel gives it. */
static __always_inline int ofl_map_bpf_update(void *map, void *full, const void *key,
                                              const void *value)
{
    long rc = bpf_map_update_elem(map, key, value, BPF_ANY);
    if (rc == -E2BIG || rc == -ENOMEM) {
        uint32_t zero = 0;
        uint64_t *n = bpf_map_lookup_elem(full, &zero);
        if (n) *n += 1;
        return -ENOSPC;
    }
    return (int)rc;
}

/* The body calls (offlow/map.h's, with an element's struct ofl_map_bpf `t`). */
#define ofl_map_lookup(t, key) bpf_map_lookup_elem((t).map, (key))
#define ofl_map_update(t, key, value) ofl_map_bpf_update((t).map, (t).full, (key), (value))
#define ofl_map_delete(t, key) ((int)bpf_map_delete_elem((t).map, (key)))

#endif
