/* reload.h: a reload message swaps a running loop's turn function between turns, and
 * every refusal (a bad message, a missing object, another layout, another number of
 * turns) leaves the turns and the epoch as they were.
 * Usage: test_reload GOOD.so OTHER_LAYOUT.so OTHER_TURNS.so NOT_AN_OBJECT */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "offlow/reload.h"
#include "offlow/wait.h"

#define LAYOUT 0x1234abcdull

static int turn_old(void *loop)
{
    __atomic_fetch_add(&((uint64_t *)loop)[0], 1, __ATOMIC_RELAXED);
    return 1;
}

struct loop {
    struct ofl_reload *r;
    uint64_t counts[2];  /* turns of the old code, of the new */
    int stop;
};

/* A segment thread: enter, then one turn, until stopped. */
static void *run(void *arg)
{
    struct loop *l = arg;
    while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
        ofl_reload_enter(l->r, 0);
        ofl_reload_turn(l->r, 0)(l->counts);
        ofl_sleep_ns(10000);
    }
    ofl_reload_leave(l->r, 0);
    return NULL;
}

static int status(const struct ofl_ctl_reply *rep)
{
    int32_t s;
    memcpy(&s, rep->b, sizeof s);
    return s;
}

static int send(struct ofl_reload *r, const char *path, uint64_t wait_ns)
{
    uint8_t msg[OFL_CTL_MSG_MAX];
    size_t n = strlen(path);
    if (n + 1 > sizeof msg) return -E2BIG;  /* the test's paths must be short */
    msg[0] = 'l';
    memcpy(msg + 1, path, n);
    struct ofl_ctl_reply rep;
    ofl_reload_msg(r, msg, n + 1, wait_ns, &rep);
    if (status(&rep) < 0) printf("     reply: %.*s\n", (int)(rep.n - 4), (const char *)rep.b + 4);
    return status(&rep);
}

static uint64_t count(struct loop *l, int which)
{
    return __atomic_load_n(&l->counts[which], __ATOMIC_RELAXED);
}

int main(int argc, char **argv)
{
    if (argc != 5) return 2;
    ofl_turn_fn turns[2] = {turn_old, turn_old};
    uint64_t seen[2] = {0, OFL_RELOAD_DONE};  /* thread 1 runs no turns */
    struct ofl_reload r = {.layout = LAYOUT, .nturns = 2, .nthreads = 2, .turns = turns,
                           .seen = seen};
    struct ofl_ctl_reply rep;

    ofl_reload_msg(&r, (const uint8_t *)"i", 1, 0, &rep);
    uint64_t info[2];
    memcpy(info, rep.b + 4, sizeof info);
    CHECK(status(&rep) == 0 && info[0] == LAYOUT && info[1] == 0, "info: layout, no reloads");
    ofl_reload_msg(&r, (const uint8_t *)"x", 1, 0, &rep);
    CHECK(status(&rep) == -EINVAL, "an unknown message is refused");
    ofl_reload_msg(&r, (const uint8_t *)"l", 1, 0, &rep);
    CHECK(status(&rep) == -EINVAL, "a reload without a path is refused");
    ofl_reload_msg(&r, (const uint8_t *)"l/a\0b", 5, 0, &rep);
    CHECK(status(&rep) == -EINVAL, "a path with a NUL byte is refused");
    CHECK(send(&r, "/nonexistent/x.so", 0) == -ENOENT, "a missing object is refused");
    CHECK(send(&r, argv[4], 0) == -ENOENT, "a file that is no shared object is refused");
    CHECK(send(&r, argv[2], 0) == -EPROTO, "an object of another layout is refused");
    CHECK(send(&r, argv[3], 0) == -EINVAL, "an object with another number of turns is refused");
    CHECK(turns[0] == turn_old && turns[1] == turn_old && r.epoch == 0 && r.reloads == 0,
          "after the refusals: the same turns, epoch and count");

    struct loop l = {.r = &r};
    pthread_t t;
    if (pthread_create(&t, NULL, run, &l)) return 2;
    while (count(&l, 0) < 10) ofl_sleep_ns(100000);
    CHECK(send(&r, argv[1], 5000000000ull) == 0, "the object is taken");
    uint64_t old = count(&l, 0), fresh = count(&l, 1);
    while (count(&l, 1) < fresh + 10) ofl_sleep_ns(100000);
    CHECK(count(&l, 0) == old, "after the reply no turn of the old code runs (%llu)",
          (unsigned long long)old);
    CHECK(r.epoch == 1 && r.reloads == 1 && turns[1] != turn_old, "epoch 1, one reload");
    __atomic_store_n(&l.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK(seen[0] == OFL_RELOAD_DONE, "a thread that ended is done");

    seen[1] = 0;  /* a thread that never takes a turn again */
    CHECK(send(&r, argv[1], 20000000ull) == -ETIMEDOUT, "a thread that does not move: timeout");
    return CHECK_DONE();
}
