/* A remote device's server (`offlow serve-device`, docs/remote.md): listens on the
 * address it is given for one run at a time. A host that proves the shared secret
 * (OFFLOW_REMOTE_SECRET in its environment) sends the device's executable and
 * arguments; the server makes a window of the program's layout here (the executable's
 * --init), carries the rings that cross, starts the device process on it with liveness
 * pipes standing in for the host's processes, and sends its exit status, its stats
 * file and what it wrote to stderr back. A run whose link fails has its process
 * stopped (its lifeline closed) and its files removed; then the server listens again.
 *
 * offlow-remote-serve ADDR PORT */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "offlow/remote_auth.h"
#include "offlow/remote_setup.h"
#include "remote_part.h"
#include "tool_io.h"


extern char **environ;

/* Each run's folder, in the work folder (argv[3], default /tmp: offlow/remote.py's
 * DEV_DIRS): WORK/offlow-remote-dev-PID-XXXXXX. */
#define DEV_DIR_NAME "offlow-remote-dev-"

struct serve {
    struct part p;
    struct ofl_setup setup;
    bool have_setup;
    uint8_t *exe;
    uint64_t exe_got;
    bool bad;                      /* a setup message broke the rules */
    int peer_w[OFL_SETUP_MAX_PEERS], life_w;  /* the write ends the device process watches */
    pid_t child;
    ino_t live_ino;                /* the live stats file last sent */
    struct timespec live_mtime;
    uint32_t chans[PART_CHANS_MAX], nchans;   /* the channels the device serves */
};

static volatile sig_atomic_t quit;

static void on_signal(int sig) { quit = sig; }

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void on_msg(void *arg, uint32_t kind, const void *hdr, size_t hlen, const void *data,
                   size_t len)
{
    struct serve *s = arg;
    if (kind == PART_CHAN_MSG || kind == PART_CHAN_BULK) {
        if (s->p.chans_on) part_chans_on_msg(&s->p.chans, kind, hdr, hlen, data, len);
        else s->bad = true;
    } else if (kind == PART_CHANS && !s->nchans && len && len % sizeof(uint32_t) == 0 &&
               len <= sizeof s->chans && s->have_setup && !s->p.bridging) {
        memcpy(s->chans, data, len);   /* (checked against the window when it is made) */
        s->nchans = (uint32_t)(len / sizeof(uint32_t));
    } else if (kind < PART_SETUP) {
        if (s->p.bridging) ofl_bridge_on_msg(&s->p.bridge, kind, hdr, hlen, data, len);
    } else if (kind == PART_SETUP && !s->have_setup) {
        char err[160];
        if (ofl_setup_parse(&s->setup, hdr, hlen, data, len, err, sizeof err) < 0) {
            fprintf(stderr, "offlow serve-device: a bad setup: %s\n", err);
            s->bad = true;
        } else if (!(s->exe = malloc(s->setup.hdr.exe_size))) {
            s->bad = true;
        } else {
            s->have_setup = true;
        }
    } else if (kind == PART_EXE && s->have_setup && len <= s->setup.hdr.exe_size - s->exe_got) {
        memcpy(s->exe + s->exe_got, data, len);
        s->exe_got += len;
    } else if (kind == PART_FLAGS && hlen == sizeof(struct part_flags)) {
        struct part_flags f;
        memcpy(&f, hdr, sizeof f);
        part_flags_take(&s->p, &f, true);
    } else if (kind == PART_PEER && hlen == sizeof(uint32_t)) {
        uint32_t i;
        memcpy(&i, hdr, sizeof i);
        if (i == PART_LIFELINE) close_fd(&s->life_w);
        else if (i < OFL_SETUP_MAX_PEERS) close_fd(&s->peer_w[i]);
    } else if (kind == PART_SIGNAL && hlen == sizeof(int32_t)) {
        int32_t sig;
        memcpy(&sig, hdr, sizeof sig);
        if (s->child > 0 && (sig == SIGINT || sig == SIGTERM)) kill(s->child, sig);
    } else {
        s->bad = true;
    }
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Run `argv` (the window's --init) and wait for it while the link goes on (its
 * heartbeats keep the host's silence limit from firing while a loaded machine makes the
 * window: waited for without the link, an init over the limit ended the run). Returns
 * its exit status, or -1 (it did not run, or the link failed meanwhile: it is killed).
 * The test hook OFFLOW_REMOTE_TEST_SLOW_INIT_MS=N waits N ms more after it ended, as for
 * a slow one (never set it otherwise). */
static int run_wait(struct serve *s, char **argv)
{
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ)) return -1;
    const char *slow = getenv("OFFLOW_REMOTE_TEST_SLOW_INIT_MS");
    uint64_t until = now_ms() + (slow && *slow ? strtoull(slow, NULL, 10) : 0);
    int st = 0;
    bool ended = false;
    while (!ended || now_ms() < until) {
        pid_t r = ended ? 0 : waitpid(pid, &st, WNOHANG);
        if (r < 0 && errno != EINTR) return -1;
        ended = ended || r == pid;
        if (ofl_link_progress(s->p.link) == OFL_LINK_FAILED) {
            if (!ended) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
            }
            return -1;
        }
        part_idle(&s->p, 0);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Start the device process: its pipes, its argv (ours, then the host's). */
static int spawn_device(struct serve *s, const char *exe, const char *window, const char *stats,
                        const char *errpath)
{
    static char nums[OFL_SETUP_MAX_PEERS + 1][16];
    char *argv[7 + 2 * OFL_SETUP_MAX_PEERS + OFL_SETUP_MAX_ARGS + 1];
    int argc = 0, life[2], keep[OFL_SETUP_MAX_PEERS + 1], nkeep = 0;
    argv[argc++] = (char *)exe;
    argv[argc++] = "--window";
    argv[argc++] = (char *)window;
    argv[argc++] = "--stats";
    argv[argc++] = (char *)stats;
    if (pipe2(life, O_CLOEXEC) < 0) return -errno;
    s->life_w = life[1];
    snprintf(nums[0], sizeof nums[0], "%d", life[0]);
    argv[argc++] = "--runner-fd";
    argv[argc++] = nums[0];
    keep[nkeep++] = life[0];
    for (uint32_t i = 0; i < s->setup.hdr.npeers; i++) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0) return -errno;
        s->peer_w[i] = fds[1];
        keep[nkeep++] = fds[0];
        snprintf(nums[i + 1], sizeof nums[i + 1], "%d", fds[0]);
        argv[argc++] = "--peer-fd";
        argv[argc++] = nums[i + 1];
    }
    for (uint32_t i = 0; i < s->setup.argc; i++) argv[argc++] = s->setup.argv[i];
    argv[argc] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < nkeep; i++)   /* dup2 onto itself clears FD_CLOEXEC */
        posix_spawn_file_actions_adddup2(&fa, keep[i], keep[i]);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    /* started with SIGINT and SIGTERM blocked, as the runner starts its processes: a
     * stop that comes before the process takes them stays pending (stop.h) */
    posix_spawnattr_t at;
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    posix_spawnattr_init(&at);
    posix_spawnattr_setsigmask(&at, &mask);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawn(&s->child, exe, &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < nkeep; i++) close(keep[i]);
    return -rc;
}

static void send_fail(struct serve *s, const char *why)
{
    fprintf(stderr, "offlow serve-device: %s\n", why);
    ofl_link_send(s->p.link, PART_FAIL, NULL, 0, why, strlen(why));
}

/* The error the device's process wrote beside its stats (STATS.error: its failure
 * before its first packet, gen.c), moved to the end of its stderr as its last line,
 * which the host's stand-in says in the run's error. */
static void error_to_stderr(const char *stats, const char *errpath)
{
    char path[4300];
    snprintf(path, sizeof path, "%s.error", stats);
    size_t len = 0;
    uint8_t *text = part_read(path, &len);
    FILE *f = text ? fopen(errpath, "a") : NULL;
    if (f) {
        fprintf(f, "offlow: %.*s\n", (int)len, (const char *)text);
        fclose(f);
    }
    free(text);
    unlink(path);
}

/* Send the device's exit status, its stats file and its stderr: [u32 stats len]
 * [stats][stderr]. */
static void send_done(struct serve *s, int32_t status, const char *stats, const char *errpath)
{
    error_to_stderr(stats, errpath);
    size_t slen = 0, elen = 0;
    uint8_t *sb = part_read(stats, &slen), *eb = part_read(errpath, &elen);
    if (!sb) slen = 0;
    if (!eb) elen = 0;
    uint8_t *msg = malloc(sizeof(uint32_t) + slen + elen);
    if (msg) {
        uint32_t n = (uint32_t)slen;
        memcpy(msg, &n, sizeof n);
        if (slen) memcpy(msg + sizeof n, sb, slen);
        if (elen) memcpy(msg + sizeof n + slen, eb, elen);
        ofl_link_send(s->p.link, PART_DONE, &status, sizeof status, msg, sizeof n + slen + elen);
    }
    free(msg);
    free(sb);
    free(eb);
}

/* What this end could not deliver by the run's end (its channels drained and stopped
 * first), sent to the host for the run's report, after the credit for every entry the
 * device's process took (it has ended: the host then knows exactly what was taken
 * here); the entries the device produced and never sent (an aborted run) are said in
 * the device's stderr too (it crosses with PART_DONE). A counted drop, not a silent
 * one. */
static void send_drops(struct serve *s, const char *errpath)
{
    if (s->p.bridging) ofl_bridge_credit_all(&s->p.bridge);   /* (a failure: the host says it) */
    struct part_drops d = part_end(&s->p, true, true);
    ofl_link_send(s->p.link, PART_DROPS, &d, sizeof d, NULL, 0);
    FILE *f = d.unsent ? fopen(errpath, "a") : NULL;
    if (!f) return;
    fprintf(f, "offlow serve-device: the run was aborted: %llu ring entries (packets) the "
            "device produced were never sent to the host (dropped)\n",
            (unsigned long long)d.unsent);
    fclose(f);
}

/* Send the device process's live stats (live.h) when it has written them anew since
 * last sent (a new file: it writes them whole and renames). Returns 0 or -EPIPE. */
static int send_live(struct serve *s, const char *stats)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.live", stats);
    struct stat st;
    if (stat(path, &st) < 0 || (st.st_ino == s->live_ino &&
                                st.st_mtim.tv_nsec == s->live_mtime.tv_nsec &&
                                st.st_mtim.tv_sec == s->live_mtime.tv_sec))
        return 0;
    s->live_ino = st.st_ino;
    s->live_mtime = st.st_mtim;
    size_t len;
    uint8_t *data = part_read(path, &len);
    if (!data) return 0;
    int rc = ofl_link_send(s->p.link, PART_LIVE, NULL, 0, data, len);
    free(data);
    return rc;
}

/* Stop the device process (its lifeline closed: it aborts and removes its files), and
 * kill it when it has not ended two seconds later. */
static void reap(struct serve *s)
{
    if (s->child <= 0) return;
    close_fd(&s->life_w);
    for (int i = 0; i < 200; i++) {
        pid_t r = waitpid(s->child, NULL, WNOHANG);
        if (r == s->child || (r < 0 && errno != EINTR)) break;
        if (i == 199) {
            kill(s->child, SIGKILL);
            waitpid(s->child, NULL, 0);
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    s->child = 0;
}

/* Serve one run over an authenticated link; returns when it has ended. */
static void serve_run(struct serve *s, const char *dir, const char *window)
{
    char exe[4200], stats[4200], errpath[4200];
    snprintf(exe, sizeof exe, "%s/device", dir);
    snprintf(stats, sizeof stats, "%s/stats.json", dir);
    snprintf(errpath, sizeof errpath, "%s/stderr", dir);
    while (!s->bad && !quit && !(s->have_setup && s->exe_got == s->setup.hdr.exe_size)) {
        if (ofl_link_progress(s->p.link) == OFL_LINK_FAILED) return;
        part_idle(&s->p, 0);
    }
    if (s->bad || quit) {
        send_fail(s, quit ? "serve-device was stopped" : "the host sent a setup that breaks "
                  "the rules");
        return;
    }
    int fd = open(exe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    bool wrote = fd >= 0 && write(fd, s->exe, s->setup.hdr.exe_size) == (ssize_t)s->setup.hdr.exe_size;
    if (fd >= 0) close(fd);
    char *init[] = {exe, "--init", "--window", (char *)window, NULL};
    char err[256];
    if (!wrote || run_wait(s, init) != 0) {
        if (ofl_link_progress(s->p.link) == OFL_LINK_FAILED) return;   /* (no one to tell) */
        send_fail(s, "cannot make the program's window there (its executable does not run "
                  "on that machine?)");
        return;
    }
    if (ofl_window_open(&s->p.win, window) < 0 ||
        part_bridge(&s->p, s->setup.dirs, s->setup.hdr.nrings, true, err, sizeof err) < 0) {
        send_fail(s, "cannot carry the program's rings there");
        return;
    }
    if (part_chans(&s->p, s->chans, s->nchans, OFL_CHAN_A, err, sizeof err) < 0) {
        send_fail(s, err);
        return;
    }
    if (ofl_link_send(s->p.link, PART_READY, NULL, 0, NULL, 0) < 0) return;
    int rc = spawn_device(s, exe, window, stats, errpath);
    if (rc < 0) {
        send_fail(s, "cannot start the device process there");
        return;
    }
    int32_t status = 0;
    bool exited = false, chans_up = false;
    for (uint64_t n = 0;; n++) {
        int moved = ofl_bridge_poll(&s->p.bridge);
        if (s->p.chans_on && !chans_up && part_chans_peers_up(&s->p.chans)) {
            chans_up = true;   /* (before any of their messages) */
            if (ofl_link_send(s->p.link, PART_CHANS_UP, NULL, 0, NULL, 0) < 0) moved = -EPIPE;
        }
        int cm = chans_up ? part_chans_poll(&s->p.chans) : 0;
        if (cm == -EBADMSG) {   /* (the host says it as the run's error) */
            send_fail(s, s->p.chans.err);
            reap(s);
            return;
        }
        if (moved < 0 || cm < 0 || part_flags_send(&s->p) < 0 || quit) {
            ofl_bridge_break(&s->p.bridge);   /* (done by a failed poll already) */
            fprintf(stderr, "offlow serve-device: the run ended: %s\n",
                    quit ? "stopped" : s->p.bridge.err[0] ? s->p.bridge.err
                                                         : ofl_link_error(s->p.link));
            reap(s);
            return;
        }
        moved += cm;
        if ((n & 1023) == 0 && send_live(s, stats) < 0) continue;   /* (the poll says why) */
        if (!exited && (n & 63) == 0) {
            int st;
            if (waitpid(s->child, &st, WNOHANG) == s->child) {
                exited = true;
                s->child = 0;
                status = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
            }
        }
        /* an aborted run's rings are never finished: its end is the process's */
        if (exited && (status != 0 || part_aborted(&s->p) || ofl_bridge_done(&s->p.bridge))) {
            ofl_bridge_poll(&s->p.bridge);   /* the last credit */
            send_drops(s, errpath);
            part_flags_send(&s->p);
            send_live(s, stats);             /* its last word (live_final) */
            send_done(s, status, stats, errpath);
            return;
        }
        part_idle(&s->p, moved);
    }
}

static void reset(struct serve *s)
{
    if (s->p.bridging) ofl_bridge_free(&s->p.bridge);
    if (s->p.chans_on) part_chans_stop(&s->p.chans);
    ofl_window_close(&s->p.win);
    free(s->exe);
    memset(s, 0, sizeof *s);
    s->p.win.fd = -1;
    s->life_w = -1;
    for (int i = 0; i < OFL_SETUP_MAX_PEERS; i++) s->peer_w[i] = -1;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: offlow-remote-serve ADDR PORT [WORK_DIR]\n");
        return 2;
    }
    const char *work = argc == 4 ? argv[3] : "/tmp";
    if (strlen(work) > 3000) {
        fprintf(stderr, "offlow serve-device: the work folder's name is too long\n");
        return 2;
    }
    uint16_t port = (uint16_t)tool_number("offlow-remote-serve", argv[2], 0, 65535);
    static uint8_t key[OFL_AUTH_SECRET_MAX];
    size_t slen = part_take_secret(key);
    if (!slen) {
        fprintf(stderr, "offlow serve-device: no shared secret (OFFLOW_REMOTE_SECRET)\n");
        return 2;
    }
    part_on_stop(on_signal);
    static struct serve s;
    for (unsigned run = 0; !quit; run++) {
        reset(&s);
        char err[256] = "";
        int rc = ofl_link_listen(&s.p.link, argv[1], port, key, slen, on_msg, &s, err, sizeof err);
        if (rc < 0) {
            fprintf(stderr, "offlow serve-device: cannot listen on %s:%u: %s\n", argv[1], port, err);
            return 1;
        }
        port = ofl_link_port(s.p.link);
        if (!run) fprintf(stderr, "offlow serve-device: listening on %s:%u\n", argv[1], port);
        enum ofl_link_state st = OFL_LINK_WAITING;
        while (!quit && (st = ofl_link_progress(s.p.link)) != OFL_LINK_UP) {
            if (st == OFL_LINK_FAILED) break;   /* a refused peer: listen again */
            part_idle(&s.p, 0);
        }
        if (!quit && st == OFL_LINK_UP) {
            char dir[3100], window[128];   /* (named by our pid: serve-device sweeps those
                                            * of servers gone before their run ended) */
            snprintf(dir, sizeof dir, "%s/%s%d-XXXXXX", work, DEV_DIR_NAME, (int)getpid());
            snprintf(window, sizeof window, "/dev/shm/offlow-remote-%d-%08x", (int)getpid(), run);
            if (mkdtemp(dir)) {
                fprintf(stderr, "offlow serve-device: a run starts\n");
                serve_run(&s, dir, window);
                reap(&s);
                if (s.p.chans_on) part_chans_stop(&s.p.chans);   /* (their ends close) */
                s.p.chans_on = false;
                char path[3200];
                const char *names[] = {"device", "stats.json", "stats.json.live",
                                       "stats.json.error", "stderr"};
                for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
                    unlink(path);
                }
                rmdir(dir);
            } else {   /* (said here and to the host, whose run ends on it) */
                char why[3300];
                snprintf(why, sizeof why, "cannot make a run's folder in %s: %s", work,
                         strerror(errno));
                send_fail(&s, why);
            }
            unlink(window);
        }
        ofl_link_close(s.p.link);
        s.p.link = NULL;
        for (int i = 0; i < OFL_SETUP_MAX_PEERS; i++) close_fd(&s.peer_w[i]);
        close_fd(&s.life_w);
    }
    return 0;
}
