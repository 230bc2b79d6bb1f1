/* The host's stand-in for a remote device (docs/remote.md): the process the runner
 * starts, watches and stops for a device on `device="remote:NAME"`. It connects to the
 * device's `offlow serve-device`, proves the shared secret (OFFLOW_REMOTE_SECRET in
 * its environment), sends the device's executable and arguments, then carries the rings
 * that cross between the run's window here and the device's window there, with the
 * header's words, its peers' liveness and the runner's signals. Its exit is the
 * device's: the device's status, its stats file written here. When the link fails it
 * writes why, with what had crossed, to STATS.error and exits 1.
 *
 * The channels the device serves (--chan NAME each) cross too (remote_chan.h): this
 * process serves their side B here, the device's server their side A there.
 *
 * offlow-remote-host --device NAME --connect ADDR:PORT --window W --stats S --exe EXE
 *     --rings DIRS --runner-fd FD [--peer-fd FD]... [--chan NAME]... -- DEVICE-ARGS... */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offlow/remote_auth.h"
#include "offlow/remote_setup.h"
#include "remote_part.h"
#include "tool_io.h"

#define MAX_PEERS 32

struct host {
    struct part p;
    const char *device, *addr;
    uint16_t port;
    bool ready, done, failed_there;
    int32_t status;            /* the device process's exit (-signal when killed) */
    uint8_t *done_data;        /* its stats and stderr (PART_DONE) */
    size_t done_len;
    char why[512];             /* PART_FAIL's reason */
    const char *stats, *dirs;  /* --stats, --rings */
    uint32_t chans[PART_CHANS_MAX], nchans;   /* the channels' ids in the window */
    struct part_drops far;     /* what the device's end could not deliver (PART_DROPS) */
    char chan_err[256];        /* why they could not be carried */
    bool counted;              /* the device's stats came back (its own counts) */
};

static volatile sig_atomic_t pending_sig;

static void on_signal(int sig) { pending_sig = sig; }

/* The device's live stats, where live readers look: STATS.live (written whole, then
 * renamed, as the processes do). */
static void write_live(const struct host *h, const void *data, size_t len)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s.live", h->stats);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    bool ok = fwrite(data, 1, len, f) == len;
    if (fclose(f) == 0 && ok) rename(tmp, path);
    else unlink(tmp);
}

static void on_msg(void *arg, uint32_t kind, const void *hdr, size_t hlen, const void *data,
                   size_t len)
{
    struct host *h = arg;
    if (kind == PART_CHAN_MSG || kind == PART_CHAN_BULK) {
        if (h->p.chans_on) part_chans_on_msg(&h->p.chans, kind, hdr, hlen, data, len);
    } else if (kind < PART_SETUP) {
        if (h->p.bridging) ofl_bridge_on_msg(&h->p.bridge, kind, hdr, hlen, data, len);
    } else if (kind == PART_READY) {
        h->ready = true;
    } else if (kind == PART_CHANS_UP && !h->p.chans_on) {
        /* the device's process serves its channels: its messages may follow at once */
        if (h->nchans &&
            part_chans(&h->p, h->chans, h->nchans, OFL_CHAN_B, h->chan_err,
                       sizeof h->chan_err) < 0) {
            snprintf(h->why, sizeof h->why, "%s", h->chan_err);
            h->failed_there = true;
        }
    } else if (kind == PART_FLAGS && hlen == sizeof(struct part_flags)) {
        struct part_flags f;
        memcpy(&f, hdr, sizeof f);
        part_flags_take(&h->p, &f, false);
    } else if (kind == PART_DONE && hlen == sizeof(int32_t) && !h->done) {
        memcpy(&h->status, hdr, sizeof h->status);
        h->done_data = malloc(len + 1);
        if (h->done_data) {
            memcpy(h->done_data, data, len);
            h->done_len = len;
        }
        h->done = true;
    } else if (kind == PART_DROPS && hlen == sizeof h->far) {
        memcpy(&h->far, hdr, sizeof h->far);
    } else if (kind == PART_LIVE) {
        write_live(h, data, len);
    } else if (kind == PART_FAIL) {
        snprintf(h->why, sizeof h->why, "%.*s", (int)(len < 400 ? len : 400), (const char *)data);
        h->failed_there = true;
    }
}

/* What crossed the link and was not delivered, for the run's report: STATS.link, a
 * JSON object of counts (docs/remote.md), each entry once: for the device, what it
 * was not seen to take (its last credit comes before its counts), of them what came
 * to it and was not taken there; from the device, what it never sent and what came
 * here and was not taken here (no credit is waited for: the host counts those
 * itself). When the device's own counts never came (its link ended first), what
 * the host knows stands for them: the entries the device was seen to take (their
 * fate unknown here) and those that came from it or that it made and its server never
 * sent (a device process killed while its server lived on). `ended`: the run ended without
 * finishing its rings. Ends this side's channels first. */
static void write_link(struct host *h, bool ended)
{
    struct part_drops d = part_end(&h->p, ended, false);
    uint64_t taken = 0;
    for (uint32_t i = 0; h->p.bridging && i < h->p.bridge.n; i++)
        if (h->p.bridge.rings[i].out) taken += h->p.bridge.rings[i].credit;
    uint64_t came = h->p.bridging ? h->p.bridge.entries_in + h->p.bridge.dropped_in : 0;
    char path[4096];
    snprintf(path, sizeof path, "%s.link", h->stats);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "{\"entries_to_device\": %llu, \"entries_from_device\": %llu, "
            "\"chan_to_device\": %llu, \"chan_from_device\": %llu, \"lost_sends\": %llu, "
            "\"dropped_in_device\": %llu, \"dropped_in_host\": %llu, "
            "\"in_device_uncounted\": %llu, \"from_device_uncounted\": %llu}\n",
            (unsigned long long)d.entries,
            (unsigned long long)(h->far.unsent + d.dropped_in + d.untaken),
            (unsigned long long)(d.chan_unsent + h->far.chan_unhanded),
            (unsigned long long)(d.chan_unhanded + h->far.chan_unsent),
            (unsigned long long)(d.lost_sends + h->far.lost_sends),
            (unsigned long long)(h->far.dropped_in + h->far.untaken),
            (unsigned long long)(d.dropped_in + d.untaken),
            (unsigned long long)(h->counted ? 0 : taken),
            (unsigned long long)(h->counted ? 0 : came + h->far.unsent));
    fclose(f);
}

/* The run fails here: the bridge's rings break (ofl_bridge_break: the local consumers
 * take what came, the local producers stop and count what never went; their cores'
 * errors are secondary: the run's one error is this one);
 * `text` goes to STATS.error (the runner's error for this device, said once); exit 1. */
static _Noreturn void fail(struct host *h, const char *text)
{
    char err[256];
    struct ofl_bridge *b = &h->p.bridge;
    bool rings = h->p.win.base &&   /* (no window yet: nothing to end) */
                 (h->p.bridging || part_bridge(&h->p, h->dirs, (uint32_t)strlen(h->dirs), false,
                                               err, sizeof err) == 0);
    if (rings) ofl_bridge_break(b);
    if (h->p.link) write_link(h, true);
    char path[4096];
    snprintf(path, sizeof path, "%s.error", h->stats);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0) fprintf(stderr, "offlow: %s\n", text);   /* (else lost) */
    if (f) fclose(f);
    exit(1);
}

static _Noreturn void link_failed(struct host *h)
{
    char msg[1024];
    const struct ofl_bridge *b = &h->p.bridge;
    snprintf(msg, sizeof msg, "remote device %s (%s:%u): %s; %llu ring entries (packets) had "
             "come from it and %llu gone to it", h->device, h->addr, h->port,
             b->err[0] ? b->err : ofl_link_error(h->p.link),
             (unsigned long long)b->entries_in, (unsigned long long)b->entries_out);
    fail(h, msg);
}

/* Wait for the handshake; a refusal or no answer is the run's one error. */
static void connect_device(struct host *h, const uint8_t *secret, size_t slen)
{
    char err[256] = "";
    if (ofl_link_connect(&h->p.link, h->addr, h->port, secret, slen, on_msg, h, err,
                         sizeof err) < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "remote device %s (%s:%u): cannot connect: %s", h->device,
                 h->addr, h->port, err);
        fail(h, msg);
    }
    enum ofl_link_state st;
    while ((st = ofl_link_progress(h->p.link)) == OFL_LINK_WAITING)   /* (a stop waits) */
        part_idle(&h->p, 0);
    if (st == OFL_LINK_FAILED) {
        char msg[768];
        snprintf(msg, sizeof msg, "remote device %s (%s:%u): refused before any packet moved "
                 "(no offlow serve-device there, or it holds another shared secret): %s",
                 h->device, h->addr, h->port, ofl_link_error(h->p.link));
        fail(h, msg);
    }
}

static void send_setup(struct host *h, const char *exe, int npeers, char **args, int nargs)
{
    char buf[OFL_SETUP_MAX_DATA];
    size_t n = strlen(h->dirs);
    memcpy(buf, h->dirs, n);
    for (int i = 0; i < nargs; i++) {
        size_t k = strlen(args[i]) + 1;
        if (n + k > sizeof buf) fail(h, "the device's arguments are too long");
        memcpy(buf + n, args[i], k);
        n += k;
    }
    size_t exe_len;
    uint8_t *bytes = part_read(exe, &exe_len);
    if (!bytes) fail(h, "cannot read the device's executable");
    struct ofl_setup_hdr s = {(uint32_t)strlen(h->dirs), (uint32_t)npeers, exe_len};
    int rc = ofl_link_send(h->p.link, PART_SETUP, &s, sizeof s, buf, n);
    /* the channels before the executable: the server starts the run once the last piece
     * of it is in, and must know them by then */
    if (!rc && h->nchans)
        rc = ofl_link_send(h->p.link, PART_CHANS, NULL, 0, h->chans, h->nchans * sizeof *h->chans);
    for (size_t off = 0; !rc && off < exe_len; off += PART_CHUNK) {
        size_t k = exe_len - off < PART_CHUNK ? exe_len - off : PART_CHUNK;
        rc = ofl_link_send(h->p.link, PART_EXE, NULL, 0, bytes + off, k);
    }
    free(bytes);
    if (rc) link_failed(h);
}

/* A local peer's pipe closed: tell the device once every ring it closed has crossed,
 * so the device's side sees the peer gone after its last entry (a producer that died
 * without closing its rings is passed on at once). */
static bool closes_crossed(const struct part *p)
{
    for (uint32_t i = 0; i < p->bridge.n; i++) {
        const struct ofl_bridge_ring *r = &p->bridge.rings[i];
        if (r->out && !r->closed && __atomic_load_n(&r->ring.shm->closed, __ATOMIC_ACQUIRE))
            return false;
    }
    return true;
}

/* The last line the device's process wrote to its stderr (`err`, `n` bytes: what its
 * server adds, "offlow serve-device: ...", skipped) into `out`, without the
 * "offlow DEVICE: " or "offlow: " its runtime puts first; "" when it said nothing.
 * Returns where that line starts in `err` and sets `*end` to where it ends (both n
 * when it said nothing). */
static size_t last_said(const struct host *h, const uint8_t *err, size_t n, char *out,
                        size_t cap, size_t *end)
{
    static const char server[] = "offlow serve-device: ";
    char prefix[160];
    snprintf(prefix, sizeof prefix, "offlow %s: ", h->device);
    const char *prefixes[2] = {prefix, "offlow: "};
    const size_t all = n;
    out[0] = '\0';
    *end = all;
    while (n) {
        while (n && (err[n - 1] == '\n' || err[n - 1] == '\r' || err[n - 1] == ' ')) n--;
        size_t from = n;
        while (from && err[from - 1] != '\n') from--;
        const char *line = (const char *)err + from;
        size_t len = n - from;
        *end = n < all ? n + 1 : n;   /* (its newline with it) */
        n = from;
        if (!len || (len >= sizeof server - 1 && !memcmp(line, server, sizeof server - 1)))
            continue;
        for (int i = 0; i < 2; i++) {
            size_t k = strlen(prefixes[i]);
            if (len > k && !memcmp(line, prefixes[i], k)) {
                line += k;
                len -= k;
                break;
            }
        }
        snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), line);
        return from;
    }
    *end = all;
    return all;
}

/* Whether the device's process ended without its counts: killed, or failed without
 * writing its stats (its server survived: the link held, its counts did not); the run's
 * error then says why, with the last line it wrote. */
static bool lost_it(const struct host *h)
{
    return h->status < 0 || (h->status > 0 && !h->counted);
}

static void finish(struct host *h)
{
    char said[320] = "";
    if (h->done_data && h->done_len >= sizeof(uint32_t)) {
        uint32_t slen;
        memcpy(&slen, h->done_data, sizeof slen);
        if (slen <= h->done_len - sizeof slen) {
            const uint8_t *s = h->done_data + sizeof slen;
            if (slen) {
                FILE *f = fopen(h->stats, "w");
                if (f) {
                    h->counted = fwrite(s, 1, slen, f) == slen;
                    h->counted &= fclose(f) == 0;
                }
            }
            size_t elen = h->done_len - sizeof slen - slen;
            const uint8_t *err = s + slen;
            size_t to, from = last_said(h, err, elen, said, sizeof said, &to);
            /* its stderr: all of it, but for the line the run's error below says (a
             * process that failed without writing its stats) */
            if (!lost_it(h)) from = to = elen;
            fwrite(err, 1, from, stderr);
            fwrite(err + to, 1, elen - to, stderr);
        }
    }
    /* A process killed, or one that failed without writing its stats (its own fatal
     * error: a file it could not open, no memory at start), is the run's failure
     * (below), said here: nothing else knows why. Its rings break first, as in fail(),
     * so that what never left a local ring is its producer's to count (ring_broken),
     * not also the link's. One that wrote its stats (a failed core) says why there.
     * Any run that ended without finishing its rings breaks them too, before they are
     * counted: a local producer still running could otherwise commit a batch after
     * this end read its ring's tail, counted by neither end (unaccounted 32 in one of
     * five runs of the toll gate's FAIL under CI's load). */
    bool ended = h->status != 0 || part_aborted(&h->p);   /* (so whenever lost_it) */
    if (ended && h->p.bridging) ofl_bridge_break(&h->p.bridge);
    uint64_t lost = part_undelivered(&h->p);
    write_link(h, ended);
    if (lost)   /* (an aborted run: a counted drop, not a silent one) */
        fprintf(stderr, "offlow: remote device %s: the run was aborted: %llu ring entries "
                "(packets) for it were not taken there (dropped)\n", h->device,
                (unsigned long long)lost);
    ofl_link_close(h->p.link);
    h->p.link = NULL;   /* (fail() below writes no second STATS.link) */
    if (lost_it(h)) {   /* (its server survived: the link held, its counts did not) */
        char how[96], msg[1024];
        if (h->status < 0)
            snprintf(how, sizeof how, "was killed there by signal %d (%s)", -h->status,
                     strsignal(-h->status));
        else
            snprintf(how, sizeof how, "exited there with status %d", h->status);
        snprintf(msg, sizeof msg, "remote device %s (%s:%u): its process %s%s%s; %llu ring "
                 "entries (packets) had come from it and %llu gone to it", h->device, h->addr,
                 h->port, how, said[0] ? ": " : "", said,
                 (unsigned long long)h->p.bridge.entries_in,
                 (unsigned long long)h->p.bridge.entries_out);
        fail(h, msg);
    }
    exit(h->status);
}

int main(int argc, char **argv)
{
    struct host h = {.p.win.fd = -1};
    const char *window = NULL, *exe = NULL, *connect = NULL;
    int runner_fd = -1, peers[MAX_PEERS], npeers = 0, i = 1;
    const char *chan_names[PART_CHANS_MAX];
    uint32_t nchan_names = 0;
    for (; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--")) break;
        if (!v) {
            fprintf(stderr, "offlow-remote-host: %s needs a value\n", k);
            return 2;
        }
        i++;
        if (!strcmp(k, "--device")) h.device = v;
        else if (!strcmp(k, "--connect")) connect = v;
        else if (!strcmp(k, "--window")) window = v;
        else if (!strcmp(k, "--stats")) h.stats = v;
        else if (!strcmp(k, "--exe")) exe = v;
        else if (!strcmp(k, "--rings")) h.dirs = v;
        else if (!strcmp(k, "--runner-fd")) runner_fd = (int)tool_number("offlow-remote-host", v, 0, 1 << 20);
        else if (!strcmp(k, "--chan") && nchan_names < PART_CHANS_MAX)
            chan_names[nchan_names++] = v;
        else if (!strcmp(k, "--peer-fd") && npeers < MAX_PEERS)
            peers[npeers++] = (int)tool_number("offlow-remote-host", v, 0, 1 << 20);
        else {
            fprintf(stderr, "offlow-remote-host: unknown option %s\n", k);
            return 2;
        }
    }
    const char *colon = connect ? strrchr(connect, ':') : NULL;
    if (!h.device || !colon || !window || !h.stats || !exe || !h.dirs || runner_fd < 0) {
        fprintf(stderr, "offlow-remote-host: missing options (see remote_host.c)\n");
        return 2;
    }
    static char addr[256];
    snprintf(addr, sizeof addr, "%.*s", (int)(colon - connect), connect);
    h.addr = addr;
    h.port = (uint16_t)tool_number("offlow-remote-host", colon + 1, 1, 65535);
    static uint8_t key[OFL_AUTH_SECRET_MAX];
    size_t slen = part_take_secret(key);
    if (!slen) fail(&h, "no shared secret (OFFLOW_REMOTE_SECRET)");
    part_on_stop(on_signal);

    int rc = ofl_window_open(&h.p.win, window);
    if (rc < 0) fail(&h, "cannot open the run's window");
    const struct ofl_window_hdr *wh = (const void *)h.p.win.base;
    for (uint32_t c = 0; c < nchan_names; c++) {
        int id = wh->chan_off && wh->chan_off < h.p.win.size
                     ? ofl_chan_lookup(ofl_window_at(&h.p.win, wh->chan_off), chan_names[c])
                     : -ENOENT;
        if (id < 0) fail(&h, "a channel of the device is not in the run's window");
        h.chans[h.nchans++] = (uint32_t)id;
    }
    connect_device(&h, key, slen);
    send_setup(&h, exe, npeers, argv + i + 1, argc - i - 1);
    bool told[MAX_PEERS + 1] = {false};
    for (uint64_t n = 0;; n++) {
        int moved = 0;
        if (!h.ready && ofl_link_progress(h.p.link) == OFL_LINK_FAILED) link_failed(&h);
        if (h.failed_there) {
            char msg[768];
            snprintf(msg, sizeof msg, "remote device %s (%s:%u): %s", h.device, h.addr, h.port,
                     h.why);
            fail(&h, msg);
        }
        if (h.ready && !h.p.bridging) {
            char err[256];
            if (part_bridge(&h.p, h.dirs, (uint32_t)strlen(h.dirs), false, err, sizeof err) < 0)
                fail(&h, err);
        }
        /* an aborted run's rings are never finished: the device's end is the run's */
        if (h.done && (h.status != 0 || part_aborted(&h.p) || ofl_bridge_done(&h.p.bridge)))
            finish(&h);
        /* the words, signals and peers wait for the device's process: it starts right
         * after its side sent ready, and the link keeps the order */
        if (!h.p.bridging) {
            part_idle(&h.p, 0);
            continue;
        }
        moved = ofl_bridge_poll(&h.p.bridge);
        if (moved < 0) link_failed(&h);
        int cm = h.p.chans_on ? part_chans_poll(&h.p.chans) : 0;
        if (cm == -EPIPE) link_failed(&h);
        if (cm < 0) {
            char msg[768];
            snprintf(msg, sizeof msg, "remote device %s (%s:%u): %s", h.device, h.addr, h.port,
                     h.p.chans.err);
            fail(&h, msg);
        }
        moved += cm;
        if (part_flags_send(&h.p) < 0) link_failed(&h);
        if (pending_sig) {
            int32_t sig = pending_sig;
            pending_sig = 0;
            if (ofl_link_send(h.p.link, PART_SIGNAL, &sig, sizeof sig, NULL, 0) < 0)
                link_failed(&h);
        }
        if ((n & 63) == 0 && closes_crossed(&h.p)) {
            for (int k = 0; k <= npeers; k++) {
                int fd = k < npeers ? peers[k] : runner_fd;
                if (told[k] || !part_fd_gone(fd)) continue;
                uint32_t idx = k < npeers ? (uint32_t)k : PART_LIFELINE;
                if (ofl_link_send(h.p.link, PART_PEER, &idx, sizeof idx, NULL, 0) < 0)
                    link_failed(&h);
                told[k] = true;
            }
        }
        part_idle(&h.p, moved);
    }
}
