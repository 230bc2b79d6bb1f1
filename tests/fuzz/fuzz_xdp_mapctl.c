/* libFuzzer target: control messages of a shared hash map on the xdp target
 * (runtime/tools/xdp_mapctl.c: the ops over a real BPF hash map's fd, made with
 * bpf_map_create), checked against a model of the map kept here.
 *
 * Four maps of odd key and value sizes and few entries are made once (the first byte
 * chooses one; it is emptied first): two preallocated, as offlow makes its maps, two
 * not (BPF_F_NO_PREALLOC), whose fullness the kernel says alike. Then each byte chooses
 * a step: the low 3 bits its kind, the rest a key (one of 32 made from that number, so
 * that keys meet again):
 *   0 get, 1 set (the next byte makes the value), 2 delete, 3 'n' at the next byte's
 *   position (high bit: at the next 4 bytes'), 4 'n' at the last walk's position + 1 (a
 *   walk going on), 5 info, 6 layout at the next byte's offset, 7 the next byte's
 *   length of bytes sent as they are (any message).
 * Every reply must fit a direct message with a status of 0 or a negative errno, and
 * agree with the model: a get gives the model's value or -ENOENT; a set succeeds unless
 * the key is new and the map holds `entries` keys (then -ENOSPC, and only then does the
 * full counter rise: the kernel's E2BIG) or the kernel is out of memory for it (then
 * -ENOMEM: the map unchanged, nothing counted), after which a get gives the model's
 * value; a delete succeeds when the key is held, after which a get is -ENOENT; a walk
 * gives held keys with their values at positions >= the one asked; info gives the
 * model's count, updates and full count; a malformed request is refused and changes
 * nothing. At the end a walk from position 0 must give each held key exactly once, at
 * most `entries` keys.
 *
 * Where the kernel refuses to make a BPF map (no root or CAP_BPF), the target prints
 * "SKIP: ..." with the reason and exits 79 (tests/test_fuzz.py skips it). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "xdp_mapctl.h"

#define KV_MAX 16
#define HELD_MAX 8

/* The maps' shapes: key and value bytes, entries. */
static const struct ofl_xdp_map SHAPES[] = {
    {"three", "three_map", 3, 5, 4, "ctl.three", "a:uint8_t,b:uint16_t;bytes5", 'u'},
    {"seven", "seven_map", 7, 1, 1, "ctl.seven", "k:bytes7;uint8_t", 'u'},
    {"thirteen", "thirteen_map", 13, 11, 6, "ctl.thirteen", "k:bytes13;bytes11", 'i'},
    {"one", "one_map", 1, 2, 3, "ctl.one", "k:uint8_t;uint16_t", 'u'},
};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])
/* Each map's flags: preallocated or not. */
static const uint32_t FLAGS[NSHAPES] = {0, BPF_F_NO_PREALLOC, 0, BPF_F_NO_PREALLOC};

/* The made maps' fds (made once: the kernel frees a map's memory later than close). */
static int map_fd[NSHAPES];

/* What the map should hold, what control should have counted, and the walk: the
 * position of the last key an 'n' gave (walk_on: the last 'n' gave one), whether the
 * map changed under that walk since it last started afresh (stale: its positions no
 * longer number the keys in order), and the key given at each position since the map
 * last changed (`known`: a bit per position). */
struct model {
    uint32_t ks, vs, entries, n;
    uint8_t key[HELD_MAX][KV_MAX], value[HELD_MAX][KV_MAX];
    uint64_t updates, full;
    int walk_on, stale;
    uint32_t walk_at, known;
    uint8_t at_pos[HELD_MAX][KV_MAX];
};

static int find(const struct model *m, const uint8_t *key)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (!memcmp(m->key[i], key, m->ks)) return (int)i;
    return -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (size_t i = 0; i < NSHAPES; i++) {
        const struct ofl_xdp_map *x = &SHAPES[i];
        LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = FLAGS[i]);
        map_fd[i] = bpf_map_create(BPF_MAP_TYPE_HASH, x->map, x->key_size, x->value_size,
                                   x->entries, &opts);
        if (map_fd[i] < 0) {
            int e = errno;
            printf("SKIP: the kernel refuses to make a BPF hash map: %s (errno %d; making one "
                   "needs root or CAP_BPF)\n", strerror(e), e);
            fflush(stdout);
            exit(79);
        }
    }
    return 0;
}

/* Run `msg` and check the reply's frame: its status. */
static int32_t call(struct ofl_xdp_mapctl *s, const uint8_t *msg, size_t len,
                    struct ofl_ctl_reply *r)
{
    int32_t st;
    ofl_map_ctl_msg(&s->ops, msg, len, r);
    if (r->n < 4 || r->n > OFL_CTL_MSG_MAX) abort();
    memcpy(&st, r->b, 4);
    if (st > 0) abort();
    return st;
}

/* A get of `key` through control: the model's value, or -ENOENT when it holds none. */
static void check_get(struct ofl_xdp_mapctl *s, const struct model *m, const uint8_t *key)
{
    uint8_t msg[1 + KV_MAX] = {OFL_CTL_GET};
    struct ofl_ctl_reply r;
    memcpy(msg + 1, key, m->ks);
    int32_t st = call(s, msg, 1 + m->ks, &r);
    int i = find(m, key);
    if (i < 0 ? st != -ENOENT : st != 0 || r.n != 4 + m->vs || memcmp(r.b + 4, m->value[i], m->vs))
        abort();
}

/* The map changed: a walk under way goes on from a key whose position is stale. */
static void changed(struct model *m)
{
    m->updates++;
    m->known = 0;
    if (m->walk_on) m->stale = 1;
}

/* An 'n' reply at position `at`: a held key and its value at a position >= at; unless
 * the map changed under the walk, exactly at `at` while `at` < the keys held, else
 * -ENOENT, and each key at one position only. */
static void check_next(struct model *m, uint32_t at, int32_t st, const struct ofl_ctl_reply *r)
{
    if (!m->walk_on || at != m->walk_at + 1) m->stale = 0;  /* a walk started afresh */
    m->walk_on = st == 0;
    if (st < 0) {
        if (st != -ENOENT || (!m->stale && at < m->n)) abort();
        return;
    }
    uint32_t pos;
    memcpy(&pos, r->b + 4, 4);
    int i = find(m, r->b + 8);
    if (pos < at || r->n != 8 + m->ks + m->vs || i < 0 ||
        memcmp(r->b + 8 + m->ks, m->value[i], m->vs))
        abort();
    m->walk_at = pos;
    if (m->stale) return;
    if (pos != at || pos >= m->n) abort();
    for (uint32_t q = 0; q < m->n; q++)
        if (m->known >> q & 1 && (q == pos) != !memcmp(m->at_pos[q], m->key[i], m->ks))
            abort();
    memcpy(m->at_pos[pos], m->key[i], m->ks);
    m->known |= 1u << pos;
}

static void check_info(const struct model *m, int32_t st, const struct ofl_ctl_reply *r)
{
    struct ofl_ctl_info in;
    uint32_t more[2];
    uint64_t full;
    if (st != 0 || r->n != 4 + sizeof in + 16) abort();
    memcpy(&in, r->b + 4, sizeof in);
    memcpy(more, r->b + 4 + sizeof in, 8);
    memcpy(&full, r->b + 4 + sizeof in + 8, 8);
    if (in.kind != OFL_CTL_MAP || in.size != m->vs || in.length != m->n ||
        in.updates != m->updates || more[0] != m->entries || more[1] != m->ks || full != m->full)
        abort();
}

/* Check any message's reply against the model, and change the model as it did. */
static void check(struct ofl_xdp_mapctl *s, struct model *m, const uint8_t *msg, size_t len)
{
    struct ofl_ctl_reply r;
    int32_t st = call(s, msg, len, &r);
    size_t ks = m->ks, vs = m->vs;
    int op = len ? msg[0] : -1;
    int sized = (op == OFL_CTL_GET || op == OFL_CTL_MAP_DEL) ? len == 1 + ks
              : op == OFL_CTL_SET ? len == 1 + ks + vs
              : op == OFL_CTL_MAP_NEXT ? len == 5
              : op == OFL_CTL_MAP_LAYOUT ? len == 3 : 1;
    if (op < 0 || !sized) {
        if (st != -EINVAL) abort();
    } else if (op == OFL_CTL_GET) {
        int i = find(m, msg + 1);
        if (i < 0 ? st != -ENOENT
                  : st != 0 || r.n != 4 + vs || memcmp(r.b + 4, m->value[i], vs))
            abort();
    } else if (op == OFL_CTL_SET) {
        int i = find(m, msg + 1);
        if (st == -ENOMEM) {
            /* the kernel out of memory (not the map full): nothing stored, nothing counted */
        } else if (i < 0 && m->n == m->entries) {  /* a new key, the map full: counted */
            if (st != -ENOSPC) abort();
            m->full++;
        } else {
            if (st != 0) abort();
            if (i < 0) i = (int)m->n++;
            memcpy(m->key[i], msg + 1, ks);
            memcpy(m->value[i], msg + 1 + ks, vs);
            changed(m);
        }
        check_get(s, m, msg + 1);
    } else if (op == OFL_CTL_MAP_DEL) {
        int i = find(m, msg + 1);
        if (i < 0 ? st != -ENOENT : st != 0) abort();
        if (i >= 0) {
            m->n--;
            memmove(m->key[i], m->key[m->n], ks);
            memmove(m->value[i], m->value[m->n], vs);
            changed(m);
        }
        check_get(s, m, msg + 1);
    } else if (op == OFL_CTL_MAP_NEXT) {
        uint32_t at;
        memcpy(&at, msg + 1, 4);
        check_next(m, at, st, &r);
    } else if (op == OFL_CTL_INFO) {
        check_info(m, st, &r);
    } else if (op == OFL_CTL_MAP_LAYOUT) {
        uint16_t at;
        memcpy(&at, msg + 1, 2);
        size_t n = strlen(s->x->layout), want = n - at;
        if (at <= n && want > OFL_CTL_MSG_MAX - 4) want = OFL_CTL_MSG_MAX - 4;
        if (at > n ? st != -ERANGE
                   : st != 0 || r.n != 4 + want || memcmp(r.b + 4, s->x->layout + at, want))
            abort();
    } else if (st != -EOPNOTSUPP) {
        abort();
    }
    /* control's counts move only as the model's did */
    if (s->updates != m->updates || *s->full != m->full) abort();
}

/* The input's next byte (0 past its end). */
static uint8_t next_byte(const uint8_t *data, size_t size, size_t *at)
{
    return *at < size ? data[(*at)++] : 0;
}

/* Step `kind` with key number `k`, its arguments from the input at *at; the message it
 * sends, in `msg`, and its length. */
static size_t step(const struct model *m, int kind, unsigned k, const uint8_t *data,
                   size_t size, size_t *at, uint8_t *msg)
{
    uint8_t key[KV_MAX];
    for (uint32_t j = 0; j < m->ks; j++) key[j] = (uint8_t)(k * 37u + j);
    switch (kind) {
    case 0:
    case 2:
        msg[0] = kind ? OFL_CTL_MAP_DEL : OFL_CTL_GET;
        memcpy(msg + 1, key, m->ks);
        return 1 + m->ks;
    case 1: {
        uint8_t v = next_byte(data, size, at);
        msg[0] = OFL_CTL_SET;
        memcpy(msg + 1, key, m->ks);
        for (uint32_t j = 0; j < m->vs; j++) msg[1 + m->ks + j] = (uint8_t)(v + j);
        return 1 + m->ks + m->vs;
    }
    case 3: {
        uint8_t a = next_byte(data, size, at);
        uint32_t pos = a & 0x7fu;
        if (a & 0x80u && size - *at >= 4) {
            memcpy(&pos, data + *at, 4);
            *at += 4;
        }
        msg[0] = OFL_CTL_MAP_NEXT;
        memcpy(msg + 1, &pos, 4);
        return 5;
    }
    case 4: {
        uint32_t pos = m->walk_at + 1;
        msg[0] = OFL_CTL_MAP_NEXT;
        memcpy(msg + 1, &pos, 4);
        return 5;
    }
    case 5:
        msg[0] = OFL_CTL_INFO;
        return 1;
    case 6:
        msg[0] = OFL_CTL_MAP_LAYOUT;
        msg[1] = next_byte(data, size, at);
        msg[2] = 0;
        return 3;
    default: {
        size_t n = next_byte(data, size, at);
        if (n > size - *at) n = size - *at;
        if (n > OFL_CTL_MSG_MAX) n = OFL_CTL_MSG_MAX;
        memcpy(msg, data + *at, n);
        *at += n;
        return n;
    }
    }
}

/* Empty map `fd` (its keys are `ks` bytes). */
static void empty(int fd)
{
    uint8_t key[KV_MAX];
    while (bpf_map_get_next_key(fd, NULL, key) == 0)
        if (bpf_map_delete_elem(fd, key) != 0) abort();
}

/* A whole walk from position 0: each held key once (check_next), at most `entries`. */
static void check_walk(struct ofl_xdp_mapctl *s, struct model *m)
{
    uint32_t seen = 0;
    for (uint32_t at = 0;; at = m->walk_at + 1) {
        uint8_t msg[5] = {OFL_CTL_MAP_NEXT};
        memcpy(msg + 1, &at, 4);
        check(s, m, msg, 5);
        if (!m->walk_on) break;
        if (++seen > m->entries) abort();
    }
    if (seen != m->n || m->stale) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    size_t shape = data[0] % NSHAPES;
    const struct ofl_xdp_map *x = &SHAPES[shape];
    uint64_t full = 0;
    struct ofl_xdp_mapctl s;
    struct model m = {.ks = x->key_size, .vs = x->value_size, .entries = x->entries};
    empty(map_fd[shape]);
    ofl_xdp_mapctl_init(&s, x, map_fd[shape], NULL, &full);
    for (size_t at = 1; at < size;) {
        uint8_t b = data[at++], msg[OFL_CTL_MSG_MAX];
        size_t len = step(&m, b & 7, b >> 3, data, size, &at, msg);
        check(&s, &m, msg, len);
    }
    check_walk(&s, &m);
    return 0;
}
