/* Control messages of a shared hash map, and the mailbox to its owning core
 * (offlow/map_ctl.h). */
#include "offlow/map_ctl.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#include "offlow/wait.h"

/* Mailbox states (box_state). */
enum { BOX_IDLE, BOX_POSTED, BOX_BUSY, BOX_DONE };

/* The message's size is 1 + `want`, or fail. */
static int sized(const uint8_t *msg, size_t len, size_t want, struct ofl_ctl_reply *r)
{
    if (len == 1 + want) return 0;
    ofl_ctl_fail(r, -EINVAL, "'%c' of %zu bytes: want %zu", msg[0], len - 1, want);
    return -EINVAL;
}

static void info(const struct ofl_map_ctl_ops *o, struct ofl_ctl_reply *r)
{
    uint32_t count;
    uint64_t full;
    o->counts(o->self, &count, &full);
    uint8_t type = (uint8_t)(o->type ? o->type : 'u');
    struct ofl_ctl_info in = {OFL_CTL_MAP, type, (uint16_t)o->value_size, 0, count,
                              *o->updates};
    uint8_t b[sizeof in + 16];
    uint32_t more[2] = {o->entries, o->key_size};
    memcpy(b, &in, sizeof in);
    memcpy(b + sizeof in, more, 8);
    memcpy(b + sizeof in + 8, &full, 8);
    ofl_ctl_ok(r, b, sizeof b);
}

static void layout(const struct ofl_map_ctl_ops *o, const uint8_t *msg, size_t len,
                   struct ofl_ctl_reply *r)
{
    uint16_t at;
    if (sized(msg, len, 2, r) < 0) return;
    memcpy(&at, msg + 1, 2);
    const char *text = o->layout ? o->layout : "";
    size_t n = strlen(text);
    if (at > n) {
        ofl_ctl_fail(r, -ERANGE, "layout offset %u: it has %zu bytes", at, n);
        return;
    }
    ofl_ctl_ok(r, text + at, n - at);
}

/* The first key at a position >= the message's. */
static void next(const struct ofl_map_ctl_ops *o, const uint8_t *msg, size_t len,
                 struct ofl_ctl_out *out, struct ofl_ctl_reply *r)
{
    uint32_t at;
    if (sized(msg, len, 4, r) < 0) return;
    memcpy(&at, msg + 1, 4);
    uint8_t b[OFL_MAP_CTL_STAGE(OFL_MAP_KEY_MAX, OFL_MAP_CTL_VALUE_MAX)];
    if (o->next(o->self, &at, b + 4, b + 4 + o->key_size) < 0) {
        ofl_ctl_fail(r, -ENOENT, "no more keys");
        return;
    }
    memcpy(b, &at, 4);
    ofl_ctl_ok_out(r, out, b, 4 + o->key_size + o->value_size);
}

void ofl_map_ctl_msg(const struct ofl_map_ctl_ops *o, const uint8_t *msg, size_t len,
                     struct ofl_ctl_reply *r)
{
    ofl_map_ctl_msg_out(o, msg, len, NULL, r);
}

void ofl_map_ctl_msg_out(const struct ofl_map_ctl_ops *o, const uint8_t *msg, size_t len,
                         struct ofl_ctl_out *out, struct ofl_ctl_reply *r)
{
    size_t ks = o->key_size, vs = o->value_size;
    if (len == 0) {
        ofl_ctl_fail(r, -EINVAL, "empty message");
        return;
    }
    if (msg[0] != OFL_CTL_INFO && (ks > OFL_MAP_KEY_MAX || vs > OFL_MAP_CTL_VALUE_MAX)) {
        ofl_ctl_fail(r, -EMSGSIZE, "keys of %zu and values of %zu bytes: too long", ks, vs);
        return;
    }
    switch (msg[0]) {
    case OFL_CTL_INFO:
        info(o, r);
        return;
    case OFL_CTL_MAP_LAYOUT:
        layout(o, msg, len, r);
        return;
    case OFL_CTL_MAP_NEXT:
        next(o, msg, len, out, r);
        return;
    case OFL_CTL_GET: {
        if (sized(msg, len, ks, r) < 0) return;
        uint8_t v[OFL_MAP_CTL_VALUE_MAX];
        if (o->get(o->self, msg + 1, v) == 0) ofl_ctl_ok_out(r, out, v, vs);
        else ofl_ctl_fail(r, -ENOENT, "no such key");
        return;
    }
    case OFL_CTL_SET: {
        if (sized(msg, len, ks + vs, r) < 0) return;
        int rc = o->set(o->self, msg + 1, msg + 1 + ks);
        if (rc < 0) {
            if (rc == -ENOSPC) ofl_ctl_fail(r, rc, "the map is full (%u keys)", o->entries);
            /* (a reply's text holds 52 bytes) */
            else if (rc == -ENOMEM)
                ofl_ctl_fail(r, rc, "the kernel is out of memory for the map: try later");
            else ofl_ctl_fail(r, rc, "the update failed");
            return;
        }
        (*o->updates)++;
        ofl_ctl_ok(r, NULL, 0);
        return;
    }
    case OFL_CTL_MAP_DEL:
        if (sized(msg, len, ks, r) < 0) return;
        if (o->del(o->self, msg + 1) < 0) {
            ofl_ctl_fail(r, -ENOENT, "no such key");
            return;
        }
        (*o->updates)++;
        ofl_ctl_ok(r, NULL, 0);
        return;
    default:
        ofl_ctl_fail(r, -EOPNOTSUPP, "request '%c' is not one a map takes (i k g s d n)",
                     msg[0] >= 32 && msg[0] < 127 ? msg[0] : '?');
    }
}

/* struct ofl_map's answers (ofl_map_ctl). */
static void map_counts(void *self, uint32_t *count, uint64_t *full)
{
    const struct ofl_map *m = self;
    *count = m->count;
    *full = m->full;
}

static int map_get(void *self, const void *key, void *value)
{
    struct ofl_map *m = self;
    const void *v = ofl_map_lookup(m, key);
    if (!v) return -ENOENT;
    memcpy(value, v, m->value_size);
    return 0;
}

static int map_set(void *self, const void *key, const void *value)
{
    return ofl_map_update(self, key, value);
}

static int map_del(void *self, const void *key)
{
    return ofl_map_delete(self, key);
}

static int map_next(void *self, uint32_t *at, void *key, void *value)
{
    const struct ofl_map *m = self;
    const void *k, *v;
    if (!ofl_map_next(m, at, &k, &v)) return -ENOENT;
    (*at)--;   /* ofl_map_next leaves it past the slot it gave */
    memcpy(key, k, m->key_size);
    memcpy(value, v, m->value_size);
    return 0;
}

void ofl_map_ctl(struct ofl_map *m, const uint8_t *msg, size_t len,
                 struct ofl_ctl_reply *r)
{
    ofl_map_ctl_out(m, msg, len, NULL, r);
}

void ofl_map_ctl_out(struct ofl_map *m, const uint8_t *msg, size_t len,
                     struct ofl_ctl_out *out, struct ofl_ctl_reply *r)
{
    struct ofl_map_ctl_ops o = {m, m->key_size, m->value_size, m->entries, m->layout,
                                m->ctl_type, &m->ctl_updates, map_counts, map_get, map_set,
                                map_del, map_next};
    ofl_map_ctl_msg_out(&o, msg, len, out, r);
}

/* Run the posted request (the caller moved the box from POSTED to BUSY). */
static void run_box(struct ofl_map *m)
{
    struct ofl_ctl_reply r;
    ofl_map_ctl_out(m, m->box_msg, m->box_len, m->box_out, &r);
    memcpy(m->box_reply, r.b, r.n);
    m->box_reply_len = (uint32_t)r.n;
    __atomic_store_n(&m->box_state, BOX_DONE, __ATOMIC_RELEASE);
}

/* Take a posted request to run it (exactly one of the owner and the manager does). */
static int take(struct ofl_map *m)
{
    uint32_t posted = BOX_POSTED;
    return __atomic_compare_exchange_n(&m->box_state, &posted, BOX_BUSY, 0,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

void ofl_map_ctl_serve(struct ofl_map *m)
{
    if (__atomic_load_n(&m->box_state, __ATOMIC_RELAXED) == BOX_POSTED && take(m))
        run_box(m);
}

void ofl_map_ctl_owner_done(struct ofl_map *m)
{
    __atomic_store_n(&m->box_owner_gone, 1, __ATOMIC_SEQ_CST);
    ofl_map_ctl_serve(m);
}

void ofl_map_ctl_call(struct ofl_map *m, const uint8_t *msg, size_t len,
                      struct ofl_ctl_reply *r)
{
    ofl_map_ctl_call_out(m, msg, len, NULL, r);
}

void ofl_map_ctl_call_out(struct ofl_map *m, const uint8_t *msg, size_t len,
                          struct ofl_ctl_out *out, struct ofl_ctl_reply *r)
{
    if (len <= sizeof m->box_copy) {   /* one message: copied, as it always was */
        memcpy(m->box_copy, msg, len);
        msg = m->box_copy;
    }
    m->box_msg = msg;
    m->box_len = (uint32_t)len;
    m->box_out = out;
    __atomic_store_n(&m->box_state, BOX_POSTED, __ATOMIC_SEQ_CST);
    for (uint64_t spins = 0;; spins++) {
        if (__atomic_load_n(&m->box_state, __ATOMIC_ACQUIRE) == BOX_DONE) break;
        if (__atomic_load_n(&m->box_owner_gone, __ATOMIC_SEQ_CST) && take(m)) {
            run_box(m);
            break;
        }
        if (spins < OFL_WAIT_SPINS) ofl_cpu_relax();
        else if (spins < 2 * OFL_WAIT_SPINS) sched_yield();
        else ofl_sleep_ns(50000);   /* the owner naps up to OFL_WAIT_NAP_MAX_NS idle */
    }
    memcpy(r->b, m->box_reply, m->box_reply_len);
    r->n = m->box_reply_len;
    __atomic_store_n(&m->box_state, BOX_IDLE, __ATOMIC_RELAXED);
}
