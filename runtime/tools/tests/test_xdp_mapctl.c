/* Tests of the xdp target's map control (runtime/tools/xdp_mapctl.c): which kernel
 * errors of a set count the map `full` (E2BIG only: the kernel's hash map with no room
 * for a new key) and which are said otherwise (ENOMEM: the kernel out of memory, the map
 * not full, nothing counted), checked through the control messages' replies with the
 * kernel's errno given (no kernel can be made to run out of memory here); then a real
 * BPF hash map of 2 entries, preallocated as offlow makes its maps and not, filled
 * through control: the third key refused, counted once (where the kernel refuses to
 * make a map: "skip:" with the reason). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "check.h"
#include "ctl_reply.h"
#include "xdp_mapctl.h"

static const struct ofl_xdp_map X = {"two", "two_map", 4, 2, 2, "ctl.two",
                                     "k:uint32_t;uint16_t", 'u'};

/* The errno the next set's kernel call "gave" (the set below stands in for
 * bpf_map_update_elem's failure), and the map control whose `full` it counts in. */
struct given {
    int e;
    struct ofl_xdp_mapctl *s;
};

static int set_given(void *self, const void *key, const void *value)
{
    struct given *g = self;
    (void)key;
    (void)value;
    return ofl_xdp_mapctl_set_error(g->e, g->s->full);
}

/* Send set of key `k` (value 7) through `ops`; the reply in `r`, its status returned. */
static int32_t set(const struct ofl_map_ctl_ops *ops, uint32_t k, struct ofl_ctl_reply *r)
{
    uint8_t msg[1 + 4 + 2] = {OFL_CTL_SET};
    uint16_t v = 7;
    memcpy(msg + 1, &k, 4);
    memcpy(msg + 5, &v, 2);
    ofl_map_ctl_msg(ops, msg, sizeof msg, r);
    return reply_status(r);
}

/* The reply's text (after its status), NUL-terminated in `text`. */
static const char *text_of(const struct ofl_ctl_reply *r, char *text, size_t cap)
{
    size_t n = r->n > 4 ? r->n - 4 : 0;
    if (n >= cap) n = cap - 1;
    memcpy(text, r->b + 4, n);
    text[n] = 0;
    return text;
}

static void test_kernel_errors_of_a_set(void)
{
    uint64_t full = 0;
    CHECK(ofl_xdp_mapctl_set_error(E2BIG, &full) == -ENOSPC && full == 1,
          "E2BIG (no room for a new key): -ENOSPC, counted full");
    CHECK(ofl_xdp_mapctl_set_error(ENOMEM, &full) == -ENOMEM && full == 1,
          "ENOMEM (the kernel out of memory): -ENOMEM, not counted full");
    CHECK(ofl_xdp_mapctl_set_error(EBUSY, &full) == -EBUSY && full == 1,
          "another error (EBUSY) as the kernel gave it, not counted");

    struct ofl_xdp_mapctl s;
    struct ofl_ctl_reply r;
    char text[OFL_CTL_MSG_MAX + 1];
    full = 0;
    ofl_xdp_mapctl_init(&s, &X, -1, NULL, &full);
    struct given g = {ENOMEM, &s};
    struct ofl_map_ctl_ops ops = s.ops;
    ops.self = &g;
    ops.set = set_given;
    int32_t st = set(&ops, 1, &r);
    CHECK(st == -ENOMEM && full == 0 && s.updates == 0 &&
          !strcmp(text_of(&r, text, sizeof text),
                  "the kernel is out of memory for the map: try later"),
          "a set the kernel had no memory for: said so, not counted full (%d, \"%s\")", st,
          text);
    g.e = E2BIG;
    st = set(&ops, 1, &r);
    CHECK(st == -ENOSPC && full == 1 && s.updates == 0 &&
          !strcmp(text_of(&r, text, sizeof text), "the map is full (2 keys)"),
          "a set the map had no room for: full, counted (%d, \"%s\")", st, text);
}

/* A real map of 2 entries (`flags`: 0, preallocated as offlow's, or BPF_F_NO_PREALLOC)
 * filled through control: 2 keys stored, the third refused -ENOSPC and counted once, a
 * held key still replaced. */
static void test_a_real_full_map(uint32_t flags, const char *what)
{
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);
    int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "two_map", 4, 2, 2, &opts);
    if (fd < 0) {
        printf("skip: %s: the kernel refuses to make a BPF hash map: %s\n", what,
               strerror(errno));
        return;
    }
    uint64_t full = 0;
    struct ofl_xdp_mapctl s;
    struct ofl_ctl_reply r;
    ofl_xdp_mapctl_init(&s, &X, fd, NULL, &full);
    CHECK(set(&s.ops, 1, &r) == 0 && set(&s.ops, 2, &r) == 0 && full == 0, "%s: 2 keys", what);
    CHECK(set(&s.ops, 3, &r) == -ENOSPC && full == 1, "%s: a third refused, counted full",
          what);
    CHECK(set(&s.ops, 2, &r) == 0 && full == 1 && s.updates == 3,
          "%s: a held key replaced when full", what);
    close(fd);
}

int main(void)
{
    test_kernel_errors_of_a_set();
    test_a_real_full_map(0, "preallocated");
    test_a_real_full_map(BPF_F_NO_PREALLOC, "not preallocated");
    return CHECK_DONE();
}
