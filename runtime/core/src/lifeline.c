/* Watching the runner's liveness pipe (see lifeline.h). */
#include "offlow/lifeline.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "offlow/wait.h"

/* Block in poll() until the runner's end closes. A byte that shows up is not a
 * death (the runner never writes; a reader that cannot read any more is). */
static void wait_for_eof(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        p.revents = 0;
        int rc = poll(&p, 1, -1);
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL))) return;
        char b;
        ssize_t n = read(fd, &b, 1);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return;
    }
}

static void *watch(void *arg)
{
    struct ofl_lifeline *l = arg;
    wait_for_eof(l->fd);
    __atomic_store_n(&l->gone, 1u, __ATOMIC_RELEASE);
    /* Stop as on SIGTERM: the process blocks it, so it stays pending (stop.h). */
    kill(getpid(), SIGTERM);
    uint64_t grace = __atomic_load_n(&l->grace_ns, __ATOMIC_RELAXED);
    ofl_sleep_ns(grace);
    if (l->abort) __atomic_store_n(l->abort, 1u, __ATOMIC_RELEASE);
    ofl_sleep_ns(grace);
    /* Still here: nobody can wait for this process any more, so it ends itself. */
    fprintf(stderr, "offlow: the runner is gone and this process did not stop; exiting\n");
    ofl_lifeline_finish(l);
    _exit(1);
}

int ofl_lifeline_start(struct ofl_lifeline *l, int fd, volatile uint32_t *abort_word,
                       const char *window, const char *stats, const char *also)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    if (fd < 0) return 0;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) return -EBADF;
    l->fd = fd;
    l->abort = abort_word;
    l->window = window;
    l->stats = stats;
    l->also = also;
    l->grace_ns = OFL_LIFELINE_GRACE_NS;
    l->parent = (int)getppid();
    int rc = pthread_create(&l->thread, NULL, watch, l);
    if (rc) return -rc;
    l->started = 1;
    return 0;
}

int ofl_lifeline_gone(const struct ofl_lifeline *l)
{
    return l->fd >= 0 && __atomic_load_n(&l->gone, __ATOMIC_ACQUIRE);
}

/* Remove the folder of `path` if it is an empty run folder (offlow-run-...). */
static void remove_run_folder(const char *path)
{
    char copy[PATH_MAX];
    if (snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy) return;
    const char *dir = dirname(copy);
    const char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    if (!strncmp(base, "offlow-run-", 11)) rmdir(dir);   /* ENOTEMPTY: a sibling's turn */
}

/* Remove the file named `path` followed by `suffix`. */
static void remove_with_suffix(const char *path, const char *suffix)
{
    char name[PATH_MAX];
    if (snprintf(name, sizeof name, "%s%s", path, suffix) < (int)sizeof name) unlink(name);
}

/* The runner's end of the pipe is closed, or closes within `ms` milliseconds. A
 * process may see the runner go by another way (getppid, a peer that stopped) before
 * the watching thread wakes from poll(). */
static int runner_closed(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc;
    do {
        p.revents = 0;
        rc = poll(&p, 1, ms);
    } while (rc < 0 && errno == EINTR);
    return rc == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

void ofl_lifeline_finish(struct ofl_lifeline *l)
{
    if (l->fd < 0) return;
    if (!ofl_lifeline_gone(l) && !runner_closed(l->fd, 0)) {
        /* The runner's pid is no longer our parent's: the thread that forked us has
         * exited, and the kernel reparents children as each thread goes, so its
         * other threads may still hold the pipe for a moment (SIGKILL: all exit). */
        if (getppid() == l->parent || !runner_closed(l->fd, OFL_LIFELINE_CLOSE_MS)) return;
    }
    if (l->window) unlink(l->window);
    if (l->also) unlink(l->also);
    if (l->stats) {
        unlink(l->stats);
        remove_with_suffix(l->stats, ".live");      /* its live copy (live.h) */
        remove_with_suffix(l->stats, ".live.tmp");
        remove_run_folder(l->stats);
    }
}
