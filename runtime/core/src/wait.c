/* Bounded spin, then yield, then short naps, with peer liveness checks (see wait.h). */
#include "offlow/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

uint64_t ofl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ofl_sleep_ns(uint64_t ns)
{
    struct timespec t = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&t, NULL);
}

void ofl_waiter_init(struct ofl_waiter *w, const int *peer_fds, int npeers,
                     const volatile uint32_t *abort_flag)
{
    if (npeers < 0) npeers = 0;
    if (npeers > OFL_WAIT_MAX_PEERS) npeers = OFL_WAIT_MAX_PEERS;
    for (int i = 0; i < OFL_WAIT_MAX_PEERS; i++) w->peer_fds[i] = i < npeers ? peer_fds[i] : -1;
    w->npeers = npeers;
    w->intr_fd = -1;
    w->abort_flag = abort_flag;
    w->assist = NULL;
    w->assist_arg = NULL;
    w->spins = 0;
    w->calls = 0;
    w->dead = 0;
    w->dead_peers = 0;
    w->idle_since = 0;
    w->next_check_ns = ofl_now_ns() + OFL_WAIT_CHECK_NS;
    w->timed = w->in_wait = false;
    w->wait_t0 = w->waited_ns = 0;
}

void ofl_waiter_progress(struct ofl_waiter *w)
{
    w->spins = 0;
    w->idle_since = 0;
    if (w->in_wait) {
        w->waited_ns += ofl_now_ns() - w->wait_t0;
        w->in_wait = false;
    }
}

/* Poll the peer fds and the interrupt fd, for up to `timeout_ns` (0: a look).
 * EOF or hang-up on a peer fd means that peer died (-EPIPE; each such peer's bit set
 * in w->dead_peers, so that a consumer can tell whether its producer is the one
 * gone); a readable interrupt fd is -EINTR. */
static int poll_fds(struct ofl_waiter *w, uint64_t timeout_ns)
{
    struct pollfd p[OFL_WAIT_MAX_PEERS + 1];
    nfds_t n = 0;
    for (int i = 0; i < w->npeers; i++) p[n++] = (struct pollfd){w->peer_fds[i], POLLIN, 0};
    if (w->intr_fd >= 0) p[n++] = (struct pollfd){w->intr_fd, POLLIN, 0};
    if (n == 0 && timeout_ns == 0) return 0;
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull),
                          (long)(timeout_ns % 1000000000ull)};
    int rc = ppoll(p, n, &ts, NULL);
    if (rc < 0) return errno == EINTR ? 0 : -errno;
    int dead = 0;
    for (int i = 0; i < w->npeers && rc > 0; i++) {
        if (p[i].revents & POLLNVAL) return -EBADF;
        int gone = (p[i].revents & (POLLHUP | POLLERR)) != 0;
        if (!gone && (p[i].revents & POLLIN)) {
            /* Readable with nothing to read is end-of-file; peers never write, but a
             * byte that shows up is not a death. */
            int avail = 0;
            gone = ioctl(p[i].fd, FIONREAD, &avail) == 0 && avail == 0;
        }
        if (gone) w->dead_peers |= 1u << i;
        dead |= gone;
    }
    if (dead) return -EPIPE;
    if (w->intr_fd >= 0 && (p[n - 1].revents & (POLLIN | POLLHUP | POLLERR))) return -EINTR;
    return 0;
}

/* What a poll found: a death stays found; an interrupt is told each time. */
static int found(struct ofl_waiter *w, int rc)
{
    if (rc == -EPIPE || rc == -EBADF) w->dead = rc;
    return rc;
}

/* The peers, when their check is due at `now`. */
static int check_at(struct ofl_waiter *w, uint64_t now)
{
    if (w->dead) return w->dead;
    if (now < w->next_check_ns) return 0;
    w->next_check_ns = now + OFL_WAIT_CHECK_NS;
    return found(w, poll_fds(w, 0));
}

static int check_abort(const struct ofl_waiter *w)
{
    if (w->dead) return w->dead;
    if (w->abort_flag && __atomic_load_n(w->abort_flag, __ATOMIC_ACQUIRE)) return -ECANCELED;
    return 0;
}

int ofl_waiter_check(struct ofl_waiter *w)
{
    int rc = check_abort(w);
    if (rc < 0) return rc;
    if (++w->calls & 63u) return 0;
    return check_at(w, ofl_now_ns());
}

int ofl_wait(struct ofl_waiter *w)
{
    int rc = check_abort(w);
    if (rc < 0) return rc;
    if (w->timed && !w->in_wait) {
        w->in_wait = true;
        w->wait_t0 = ofl_now_ns();
    }
    if (w->spins < OFL_WAIT_SPINS) {
        w->spins++;
        ofl_cpu_relax();
        /* Spinning is short; read the clock only now and then. */
        if (w->spins & 63u) return 0;
        return check_at(w, ofl_now_ns());
    }
    uint64_t now = ofl_now_ns();
    if (!w->idle_since) w->idle_since = now;
    uint64_t idle = now - w->idle_since;
    if (idle < OFL_WAIT_NAP_AFTER_NS) {
        sched_yield();
        return check_at(w, now);
    }
    /* Idle for a while: sleep a sixteenth of the idle time so far (bounded), woken
     * early by a peer's death or an interrupt; the peers are looked at meanwhile. */
    uint64_t nap = idle / 16;
    if (nap < OFL_WAIT_NAP_MIN_NS) nap = OFL_WAIT_NAP_MIN_NS;
    if (nap > OFL_WAIT_NAP_MAX_NS) nap = OFL_WAIT_NAP_MAX_NS;
    w->next_check_ns = now + OFL_WAIT_CHECK_NS;
    rc = found(w, poll_fds(w, nap));
    return rc < 0 ? rc : check_abort(w);
}

/* A process that exited but was not reaped yet (kill(pid, 0) still succeeds). */
static bool proc_gone(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold anything, so find the last ')'. */
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return false;
    return p[2] == 'Z' || p[2] == 'X';
}

int ofl_pid_alive(pid_t pid, int *pidfd)
{
    if (pid <= 0) return 0;
    if (pid == getpid()) return 1;
    if (pidfd && *pidfd == -1) {
        long fd = syscall(SYS_pidfd_open, pid, 0);
        if (fd >= 0)
            *pidfd = (int)fd;
        else if (errno == ESRCH)
            return 0;
        else
            *pidfd = -2;
    }
    if (pidfd && *pidfd >= 0) {
        /* A pidfd turns readable when the process exits (zombies included). */
        struct pollfd p = {.fd = *pidfd, .events = POLLIN};
        int rc = poll(&p, 1, 0);
        if (rc > 0) return 0;
        if (rc == 0) return 1;
    }
    if (kill(pid, 0) < 0 && errno == ESRCH) return 0;
    return !proc_gone(pid);
}
