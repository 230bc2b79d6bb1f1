#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "offlow/reload.h"
#include "offlow/wait.h"

/* Load the shared object at `path` and check its entry against `r`; its turns, or
 * NULL with the reason in `rep`. */
static const struct ofl_reload_entry *load(struct ofl_reload *r, const char *path,
                                           struct ofl_ctl_reply *rep)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        ofl_ctl_fail(rep, -ENOENT, "%s", dlerror());
        return NULL;
    }
    const struct ofl_reload_entry *e = dlsym(h, "ofl_reload_entry");
    if (!e) {
        ofl_ctl_fail(rep, -ENOENT, "no ofl_reload_entry in %s", path);
    } else if (e->layout != r->layout) {
        ofl_ctl_fail(rep, -EPROTO, "layout %016llx, not this process's %016llx",
                     (unsigned long long)e->layout, (unsigned long long)r->layout);
    } else if (e->nturns != r->nturns) {
        ofl_ctl_fail(rep, -EINVAL, "%u segment cores, not %u", e->nturns, r->nturns);
    } else {
        return e;  /* kept loaded for good: a thread may still be in its code */
    }
    dlclose(h);
    return NULL;
}

/* Wait until every thread has started a turn in epoch `e` or ended. */
static int wait_threads(struct ofl_reload *r, uint64_t e, uint64_t wait_ns)
{
    uint64_t end = ofl_now_ns() + wait_ns;
    for (;;) {
        unsigned behind = 0;
        for (uint32_t t = 0; t < r->nthreads; t++)
            behind += __atomic_load_n(&r->seen[t], __ATOMIC_ACQUIRE) < e;
        if (!behind)
            return 0;
        if (ofl_now_ns() > end)
            return -ETIMEDOUT;
        ofl_sleep_ns(20000);  /* an idle core naps up to 1 ms between turns */
    }
}

void ofl_reload_msg(struct ofl_reload *r, const uint8_t *msg, size_t len, uint64_t wait_ns,
                    struct ofl_ctl_reply *rep)
{
    if (len >= 1 && msg[0] == 'i') {
        uint64_t v[2] = {r->layout, r->reloads};
        ofl_ctl_ok(rep, v, sizeof v);
        return;
    }
    if (len < 2 || msg[0] != 'l' || len > OFL_CTL_MSG_MAX) {
        ofl_ctl_fail(rep, -EINVAL, "want l PATH or i (a message of %zu bytes)", len);
        return;
    }
    char path[OFL_CTL_MSG_MAX + 1];
    memcpy(path, msg + 1, len - 1);
    path[len - 1] = '\0';
    if (strlen(path) != len - 1) {
        ofl_ctl_fail(rep, -EINVAL, "a path with a NUL byte");
        return;
    }
    const struct ofl_reload_entry *e = load(r, path, rep);
    if (!e)
        return;
    for (uint32_t i = 0; i < r->nturns; i++)
        __atomic_store_n(&r->turns[i], e->turns[i], __ATOMIC_RELEASE);
    uint64_t epoch = __atomic_add_fetch(&r->epoch, 1, __ATOMIC_ACQ_REL);
    r->reloads++;
    if (wait_threads(r, epoch, wait_ns) < 0) {
        ofl_ctl_fail(rep, -ETIMEDOUT, "a core has not taken the new code yet");
        return;
    }
    uint64_t v[2] = {epoch, r->reloads};
    ofl_ctl_ok(rep, v, sizeof v);
}
