/* The host side of a segment on the xdp target (xdp_run.h). */
#include "xdp_run.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>

#include "offlow/gen.h"
#include "offlow/lifeline.h"
#include "offlow/live.h"
#include "offlow/live_file.h"
#include "offlow/stop.h"
#include "xdp_chan.h"
#include "xdp_cross.h"
#include "xdp_net.h"
#include "xdp_tables.h"
#include "xdp_vlog.h"

/* How long a frame may take through the kernel before the run gives up on it. */
#define OFL_XDP_WAIT_NS 2000000000ull

/* What libbpf says while load() runs, held rather than printed: a failed load is then
 * one error (the verifier's reason, or libbpf's lines in it), not that error beside
 * libbpf's own three lines. libbpf's print callback takes no context pointer, so this
 * record is the file's one piece of state; load() runs before any thread starts. */
static struct libbpf_said {
    bool hold;
    size_t len;
    char text[2048];
} said;

/* Prints libbpf's warnings on stderr (held in `said` while load() runs); debug ones
 * not. (The verifier's log is not among them: load() gives the program a log buffer of
 * its own, so libbpf never prints it.) */
static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_DEBUG) return 0;
    if (!said.hold) return vfprintf(stderr, fmt, ap);
    size_t room = sizeof said.text - said.len;
    int w = room > 1 ? vsnprintf(said.text + said.len, room, fmt, ap) : 0;
    if (w > 0) said.len += (size_t)w < room ? (size_t)w : room - 1;
    return 0;
}

/* libbpf's lines held in `said`, each without its "libbpf: " and joined by "; ", into
 * `buf` ("" when it said nothing). */
static void said_lines(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (const char *t = said.text; *t && n + 1 < cap;) {
        if (strncmp(t, "libbpf: ", 8) == 0) t += 8;
        size_t len = strcspn(t, "\n");
        int w = snprintf(buf + n, cap - n, "%s%.*s", n ? "; " : "", (int)len, t);
        if (w < 0) break;
        n += (size_t)w < cap - n ? (size_t)w : cap - n - 1;
        t += len + (t[len] == '\n');
    }
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Say why the run cannot start: the run's one error (ofl_start_failf) with the run's
 * options `a`; with none (--check) on stderr. */
static void start_fail(const struct ofl_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void start_fail(const struct ofl_args *a, const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (a)
        ofl_start_failf(a, "%s", text);
    else
        fprintf(stderr, "offlow xdp: %s\n", text);
}

/* Open `path` for program `prog` (only it will load), its frame buffers one per
 * CPU; returns the object, not yet loaded, or NULL (said why: start_fail with `a`). */
static struct bpf_object *open_obj(const char *path, const char *prog,
                                   const struct ofl_args *a)
{
    struct bpf_object *obj = bpf_object__open_file(path, NULL);
    if (!obj) {
        start_fail(a, "cannot open the XDP object %s: %s", path, strerror(errno));
        return NULL;
    }
    struct bpf_program *p;
    int found = 0;
    bpf_object__for_each_program(p, obj) {
        int mine = strcmp(bpf_program__name(p), prog) == 0;
        found |= mine;
        bpf_program__set_autoload(p, mine || strcmp(bpf_program__name(p), OFL_XDP_PASS) == 0);
    }
    struct bpf_map *frames = bpf_object__find_map_by_name(obj, "ofl_frames");
    int ncpus = libbpf_num_possible_cpus();
    if (frames && ncpus > 0) bpf_map__set_max_entries(frames, (unsigned)ncpus);
    if (!found) {
        start_fail(a, "%s has no program %s", path, prog);
        bpf_object__close(obj);
        return NULL;
    }
    return obj;
}

/* The elements of `d`, "a, b, c", into `buf` (`cap` bytes; cut short with "...").  */
static void element_list(const struct ofl_xdp_desc *d, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < d->nel && n < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", d->el_names[i]);
        if (w < 0 || (size_t)w >= cap - n) {
            snprintf(buf + (cap > 4 ? cap - 4 : 0), cap > 4 ? 4 : cap, "...");
            return;
        }
        n += (size_t)w;
    }
}

/* Say that the verifier refused `d`'s program (the load failed with -`err`), from its
 * log `log`, kept whole in file `keep` (NULL: nowhere). With the run's options `a`: the
 * run's one error quoting the log's reason (xdp_vlog.h) and the file; without (--check):
 * the log on stderr, where the compiler reads it (offlow/targets/verifier.py). */
static void refused(const struct ofl_xdp_desc *d, const char *keep, const char *log,
                    int err, const struct ofl_args *a)
{
    int rc = keep ? ofl_xdp_vlog_save(keep, log) : -ENAMETOOLONG;
    char kept[4096 + 128];
    if (rc == 0)
        snprintf(kept, sizeof kept, "full log: %s", keep);
    else
        snprintf(kept, sizeof kept, "its full log could not be kept in %s: %s",
                 keep ? keep : "a file beside the object", strerror(-rc));
    if (!a) {
        fputs(log, stderr);
        if (rc < 0 && keep) fprintf(stderr, "offlow xdp: %s\n", kept);
        return;
    }
    char why[512], els[256];
    if (!ofl_xdp_vlog_reason(log, why, sizeof why))
        snprintf(why, sizeof why, "%s (the log's end gives no reason)", strerror(err));
    element_list(d, els, sizeof els);
    start_fail(a, "the kernel's verifier refused the XDP program of segment `%s` (%s): %s "
               "(%s)", d->segment, els, why, kept);
}

/* Load `obj` (the verifier checks its program `d->prog`); on failure closes it and
 * returns NULL. A refusal by the verifier is said from its log, kept in file `keep`
 * (NULL: nowhere; refused); any other failure with libbpf's words, as the run's error
 * with the run's options `a` (start_fail). */
static struct bpf_object *load(struct bpf_object *obj, const struct ofl_xdp_desc *d,
                               const char *keep, const struct ofl_args *a)
{
    if (!obj) return NULL;
    /* (libbpf writes the log here only when the load fails: it asks for none at first,
     * then loads again with log level 1; with a buffer of ours it prints none) */
    char *log = malloc(OFL_XDP_VLOG_CAP);
    struct bpf_program *prog = bpf_object__find_program_by_name(obj, d->prog);
    if (log) {
        log[0] = '\0';
        if (prog && bpf_program__set_log_buf(prog, log, OFL_XDP_VLOG_CAP) < 0) log[0] = '\0';
    }
    said.len = 0;
    said.text[0] = '\0';
    said.hold = true;
    int rc = bpf_object__load(obj);
    said.hold = false;
    /* a failed run's one error says why (libbpf's lines would repeat it); what a load
     * that worked was told, and --check's every line (its reader wants the log), shown */
    if (rc == 0 || !a) fputs(said.text, stderr);
    if (rc < 0) {
        char lines[sizeof said.text];
        said_lines(lines, sizeof lines);
        if (log && log[0])
            refused(d, keep, log, -rc, a);
        else if (lines[0] && a)
            start_fail(a, "the kernel refused the XDP program: %s (libbpf: %s)",
                       strerror(-rc), lines);
        else
            start_fail(a, "the kernel refused the XDP program: %s", strerror(-rc));
        bpf_object__close(obj);
        obj = NULL;
    }
    free(log);
    return obj;
}

/* The program's counters, summed over the CPUs. */
struct counters {
    struct bpf_object *obj;  /* the loaded program (its table maps) */
    int fd;             /* the per-CPU array map */
    int ncpus;
    unsigned n;         /* counters */
    uint64_t *percpu;   /* ncpus values of one counter */
};

static uint64_t counter(struct counters *c, uint32_t k)
{
    uint64_t sum = 0;
    if (bpf_map_lookup_elem(c->fd, &k, c->percpu) < 0) return 0;
    for (int i = 0; i < c->ncpus; i++) sum += c->percpu[i];
    return sum;
}

/* Wait until counter `k` reaches `want` (the frame sent was processed): spin a
 * little, then sleep between reads. 0, or -ETIMEDOUT. */
static int await(struct counters *c, uint32_t k, uint64_t want)
{
    uint64_t t0 = now_ns();
    for (unsigned spins = 0; counter(c, k) < want; spins++) {
        if (now_ns() - t0 > OFL_XDP_WAIT_NS) return -ETIMEDOUT;
        if (spins > 64) usleep(50);
    }
    return 0;
}

/* Take the next frame arriving at the socket into `p` (at most `cap` bytes). The
 * kernel takes a frame's outer VLAN tag off on its way in (into the packet's
 * metadata, which the socket gives as auxdata): it is put back, as libpcap does, so
 * the frame is the one XDP_TX sent. */
static int receive(int sock, struct ofl_pkt *p, uint32_t cap)
{
    struct pollfd pfd = { .fd = sock, .events = POLLIN };
    int rc = poll(&pfd, 1, (int)(OFL_XDP_WAIT_NS / 1000000));
    if (rc <= 0) return rc < 0 ? -errno : -ETIMEDOUT;
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(struct tpacket_auxdata))]; } ctl;
    struct iovec iov = { .iov_base = p->data, .iov_len = cap };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                        .msg_controllen = sizeof ctl };
    ssize_t n = recvmsg(sock, &m, MSG_TRUNC);
    if (n < 0) return -errno;
    if ((size_t)n > cap) return -EMSGSIZE;
    p->len = (uint32_t)n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
        struct tpacket_auxdata aux;
        memcpy(&aux, CMSG_DATA(c), sizeof aux);
        if (!(aux.tp_status & TP_STATUS_VLAN_VALID)) continue;
        if (p->len < 12 || p->len + 4 > cap) return -EMSGSIZE;
        uint16_t tpid = (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux.tp_vlan_tpid
                                                                     : 0x8100;
        memmove(p->data + 16, p->data + 12, p->len - 12);
        ofl_put_be16(p->data + 12, tpid);
        ofl_put_be16(p->data + 14, aux.tp_vlan_tci);
        p->len += 4;
    }
    return 0;
}

/* Add `by` to `*w`, a word only this thread writes and the live-stats thread reads
 * (a relaxed atomic store: the reader sees the old value or the new one). */
static void bump(uint64_t *w, uint64_t by)
{
    __atomic_store_n(w, *w + by, __ATOMIC_RELAXED);
}

/* What the run counted beside the program's counters. The main thread writes the
 * core's times and counts and `unsent` (bump, relaxed atomic stores); the live-stats
 * thread reads them with relaxed atomic loads (report_body). */
struct run {
    struct ofl_core core;      /* elapsed time, packets and bytes in (the stats' core) */
    struct ofl_src *src;
    struct ofl_sink *sink;
    uint64_t unsent;           /* frames the kernel would not take (shorter than a header) */
    uint64_t veth_dropped;     /* frames the sink sent back that the veth's receive dropped
                                  (the program counted them: never waited for) */
    struct ofl_xdp_cross *cross;  /* the crossing to host segments, or NULL */
    int spread;                /* the replay sends from each CPU of `allowed` in turn */
    int spread_at;             /* the CPU it sent the last frame from */
    cpu_set_t allowed;         /* the CPUs this process may run on */
};

/* --opt xdp.spread=1: the replay sends each frame from the next CPU this process may
 * run on, as a NIC's receive-side scaling spreads flows over CPUs, so that XDP runs on
 * each (and each CPU's copy of a per-CPU array is added to); 0, the default: from
 * the CPU it runs on. 0, or -EINVAL (said: ofl_start_failf). */
static int spread_open(struct run *r, const struct ofl_args *a)
{
    const char *v = ofl_args_get(a, "xdp", "spread", "0");
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
        ofl_start_failf(a, "--opt xdp.spread=%s: expected 0 or 1", v);
        return -EINVAL;
    }
    r->spread = v[0] == '1' && sched_getaffinity(0, sizeof r->allowed, &r->allowed) == 0;
    r->spread_at = sched_getcpu();
    return 0;
}

/* Move to the next CPU of r->allowed (xdp.spread), or stay where the run is. */
static void spread_next(struct run *r)
{
    for (int k = 1; r->spread && k <= CPU_SETSIZE; k++) {
        int c = (r->spread_at + k) % CPU_SETSIZE;
        if (!CPU_ISSET(c, &r->allowed)) continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof one, &one) == 0) r->spread_at = c;
        return;
    }
}

/* Frames the program sent up to the AF_XDP socket so far (every crossing's). */
static uint64_t sent_up(const struct ofl_xdp_desc *d, struct counters *c)
{
    uint64_t n = 0;
    for (unsigned k = 0; k < d->ncross; k++)
        n += counter(c, d->cross_base + k * (1 + d->ncross_why));
    return n;
}

/* Send every frame of the source through the program, one at a time (xdp_run.h). */
static int replay(const struct ofl_xdp_desc *d, struct run *r, struct counters *c, int sock)
{
    uint8_t *buf = malloc(d->mtu), *back = malloc(d->mtu);
    if (!buf || !back) return free(buf), free(back), -ENOMEM;
    uint32_t src_in = d->source_el * OFL_XDP_COUNTERS;
    uint32_t sink_in = d->sink_el * OFL_XDP_COUNTERS, sink_drop = sink_in + 1;
    uint64_t sent = 0, tx = 0, veth = 0;
    int rc = 0;
    __atomic_store_n(&r->core.t_start, now_ns(), __ATOMIC_RELAXED);
    while (!ofl_stop_requested()) {
        struct ofl_pkt p;
        int n = ofl_src_next(r->src, &p, buf, 1);
        if (n == OFL_SRC_DONE) break;
        if (n < 0) { rc = n; break; }
        if (n == 0) continue;
        bump(&r->core.pkts_in, 1);
        bump(&r->core.bytes_in, p.len);
        spread_next(r);
        if (send(sock, p.data, p.len, 0) < 0) {  /* shorter than an Ethernet header... */
            bump(&r->unsent, 1);
            continue;
        }
        sent++;
        if ((rc = await(c, src_in, sent)) < 0) {
            fprintf(stderr, "offlow xdp: frame %llu never reached the XDP program\n",
                    (unsigned long long)sent);
            break;
        }
        if (r->cross) {  /* what went up reaches its queue before the next frame */
            r->cross->ts_ns = p.ts_ns;
            if ((rc = ofl_xdp_cross_drain(r->cross, sent_up(d, c), OFL_XDP_WAIT_NS)) < 0) {
                if (rc == -ETIMEDOUT)
                    fprintf(stderr, "offlow xdp: a frame sent up (AF_XDP) never arrived at "
                            "the socket\n");
                else
                    fprintf(stderr, "offlow xdp: a queue to the host failed: %s\n",
                            ofl_strerror(rc));
                break;
            }
        }
        if (!d->sink) continue;
        uint64_t now_tx = counter(c, sink_in) - counter(c, sink_drop);
        /* read after the sink's: the program counts these first (bpf.py) */
        uint64_t now_veth = counter(c, d->veth_drops);
        for (; tx < now_tx; tx++) {
            if (veth < now_veth) {  /* the kernel dropped it on the veth: never comes */
                veth++;
                bump(&r->veth_dropped, 1);
                continue;
            }
            struct ofl_pkt out = { .data = back, .cap = d->mtu, .ts_ns = p.ts_ns };
            if ((rc = receive(sock, &out, d->mtu)) < 0) {
                fprintf(stderr, "offlow xdp: a frame the program sent back (XDP_TX) never "
                        "arrived: %s\n", strerror(-rc));
                goto out;
            }
            ofl_sink_write(r->sink, 0, &out);
        }
    }
out:
    __atomic_store_n(&r->core.t_end, now_ns(), __ATOMIC_RELAXED);
    if (r->spread) sched_setaffinity(0, sizeof r->allowed, &r->allowed);
    free(buf);
    free(back);
    return rc;
}

/* What a stats report reads: the run, the program's counters and the channels'
 * counts of full maps and each map's control (its staged requests dropped; NULL:
 * none). The exit report and the live copies share it. */
struct reporter {
    const struct ofl_xdp_desc *d;
    const struct ofl_args *a;
    struct run *r;
    struct counters *c;
    const uint64_t *ctl_full;
    const struct ofl_xdp_mapctl *ctl_maps;
};

/* "ctl_dropped": each map's requests staged on its control channel whose client went
 * away before running them (ctl_stage.h), as gen.c writes a generated process's; only
 * when some were. */
static void report_ctl_dropped(struct ofl_json *j, const struct reporter *rp)
{
    bool any = false;
    for (size_t i = 0; rp->ctl_maps && rp->d->maps && rp->d->maps[i].name; i++) {
        uint64_t n = rp->d->maps[i].ctl_chan ? ofl_ctl_stage_dropped(&rp->ctl_maps[i].stage)
                                             : 0;
        if (!n) continue;
        if (!any) ofl_json_begin_obj(j, "ctl_dropped");
        any = true;
        ofl_json_u64(j, rp->d->maps[i].name, n);
    }
    if (any) ofl_json_end_obj(j);
}

/* The stats object's members after "device" (the schema of every device's,
 * docs/run-result.schema.json): one core of the segment with the program's counters
 * per element, the crossing's queues, the source; the tables; the sink. The one
 * reader of the counters for the stats file at exit and for its live copies while the
 * run goes on: the program's counters and tables are read from the kernel's maps (a
 * syscall each, into `rp->c`'s own buffer), the run's own words with relaxed atomic
 * loads (struct run), the source's, sink's and rings' counters as every process's
 * live report reads them (live.h: 64-bit words, each written by one thread).
 * `contents`: the tables' elements (an array's, a map's pairs), else their lengths and
 * counters only (a live read without OFL_LIVE_TABLES, as gen.c's report_body). */
static void report_body(struct ofl_json *j, const struct reporter *rp, bool contents)
{
    const struct ofl_xdp_desc *d = rp->d;
    struct run *r = rp->r;
    struct counters *c = rp->c;
    uint64_t unsent_now = __atomic_load_n(&r->unsent, __ATOMIC_RELAXED);
    uint64_t veth_now = __atomic_load_n(&r->veth_dropped, __ATOMIC_RELAXED);
    struct ofl_core core = r->core;  /* (its words written while it runs, loaded below) */
    core.t_start = __atomic_load_n(&r->core.t_start, __ATOMIC_RELAXED);
    core.t_end = __atomic_load_n(&r->core.t_end, __ATOMIC_RELAXED);
    core.pkts_in = __atomic_load_n(&r->core.pkts_in, __ATOMIC_RELAXED);
    core.bytes_in = __atomic_load_n(&r->core.bytes_in, __ATOMIC_RELAXED);
    if (!r->src && !core.t_end)  /* --iface, still serving: what the program took so far */
        core.pkts_in = counter(c, d->source_el * OFL_XDP_COUNTERS);
    ofl_json_begin_arr(j, "cores");
    ofl_stats_core(j, &core);
    ofl_json_begin_obj(j, "elements");
    for (unsigned i = 0; i < d->nel; i++) {
        uint32_t k = i * OFL_XDP_COUNTERS;
        uint64_t in = counter(c, k);
        if (!in && !(i == d->source_el && unsent_now)) continue;
        ofl_json_begin_obj(j, d->el_names[i]);
        /* frames the kernel would not send (shorter than an Ethernet header) never
         * reached the program: dropped at the source, where they entered; frames the
         * sink sent back that the veth dropped: dropped at the sink */
        uint64_t unsent = i == d->source_el ? unsent_now : 0;
        uint64_t veth = d->sink && i == d->sink_el ? veth_now : 0;
        ofl_json_u64(j, "in", in + unsent);
        ofl_json_u64(j, "drop", counter(c, k + 1) + unsent + veth);
        ofl_json_u64(j, "consumed", counter(c, k + 2));
        if (unsent || veth || d->why_n[i]) {
            ofl_json_begin_obj(j, "why");
            if (unsent) ofl_json_u64(j, "runt", unsent);
            if (veth) ofl_json_u64(j, "veth_dropped", veth);
            for (unsigned w = 0; w < d->why_n[i]; w++) {
                uint32_t at = d->why_base[i] + w;
                ofl_json_u64(j, d->why_names[at - OFL_XDP_COUNTERS * d->nel], counter(c, at));
            }
            ofl_json_end_obj(j);
        }
        ofl_json_end_obj(j);
    }
    ofl_json_end_obj(j);
    if (r->cross) {
        uint64_t *why = calloc((size_t)d->ncross * d->ncross_why + 1, sizeof *why);
        for (unsigned k = 0; why && k < d->ncross * d->ncross_why; k++)
            why[k] = counter(c, d->cross_base + (k / d->ncross_why) * (1 + d->ncross_why) + 1 +
                                    k % d->ncross_why);
        if (why) ofl_xdp_cross_report(r->cross, j, why);
        free(why);
    } else {
        ofl_json_begin_arr(j, "queues");
        ofl_json_end_arr(j);
    }
    ofl_json_begin_obj(j, "sources");
    if (r->src) {
        ofl_stats_source(j, d->source, r->src);
    } else {  /* --iface: what the interface gave the program */
        ofl_json_begin_obj(j, d->source);
        ofl_json_u64(j, "packets", core.pkts_in);
        ofl_json_u64(j, "dropped", 0);
        ofl_json_end_obj(j);
    }
    ofl_json_end_obj(j);
    ofl_json_end_obj(j); /* the core */
    ofl_json_end_arr(j);
    ofl_json_begin_obj(j, "tables");
    ofl_xdp_arrays_report(j, d, c->obj, contents);
    ofl_xdp_maps_report(j, d, c->obj, rp->ctl_full, contents);
    ofl_json_end_obj(j);
    ofl_json_begin_obj(j, "sinks");
    if (d->sink && r->sink) ofl_stats_sink(j, d->sink, r->sink);
    ofl_json_end_obj(j);
    report_ctl_dropped(j, rp);
}

/* Every table's contents (the last counts' body; `arg`: the reporter). */
static void last_body(struct ofl_json *j, const void *arg)
{
    report_body(j, arg, true);
}

/* At exit: the stats file (--stats) and its last live copy (live_final), from one
 * serialization (gen.h: ofl_stats_write_last). */
static void report_last(const struct reporter *rp)
{
    ofl_stats_write_last(rp->a, last_body, rp);
}

/* A live answer's reporter, and whether it carries the tables' elements. */
struct live_ask {
    const struct reporter *rp;
    bool contents;
};

/* The live copy's body (ofl_live_body_fn; `arg`: a struct live_ask). */
static void live_body(struct ofl_json *j, const void *arg)
{
    const struct live_ask *ask = arg;
    report_body(j, ask->rp, ask->contents);
}

/* The stats file's live copy (live_file.h), answering request `seq` (live.h), as the
 * generated processes write theirs: the tables' elements when the request has
 * OFL_LIVE_TABLES or the copy is the last; `final`: the process is about to exit,
 * these are the last counts. Nothing without --stats. 0, or a negative errno. */
static int report_live(const struct reporter *rp, uint32_t seq, bool final)
{
    struct live_ask ask = { rp, final || (seq & OFL_LIVE_TABLES) };
    return ofl_live_write(rp->a->stats, rp->a->device, seq, final, live_body, &ask);
}

/* Answer a live-stats request (ofl_live_fn; `arg`: the live thread's reporter). */
static void answer_live(void *arg, uint32_t seq)
{
    const struct reporter *rp = arg;
    int rc = report_live(rp, seq, false);
    if (rc < 0)
        fprintf(stderr, "offlow %s: live stats: %s\n", rp->a->device, ofl_strerror(rc));
}

/* Attach program `prog` to interface `ifname` in `mode` ("generic" or "native") as a
 * BPF link: the kernel detaches it when this process exits, however it exits.
 * Returns the link's descriptor, or -1 (said why: ofl_start_failf). */
static int attach(const struct ofl_args *a, int prog, const char *ifname, const char *mode)
{
    int ifindex = ofl_xdp_ifindex(ifname);
    if (ifindex < 0) {
        ofl_start_failf(a, "no interface %s in this network namespace", ifname);
        return -1;
    }
    int native = strcmp(mode, "native") == 0;
    LIBBPF_OPTS(bpf_link_create_opts, o,
                .flags = native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE);
    int fd = bpf_link_create(prog, ifindex, BPF_XDP, &o);
    if (fd >= 0) return fd;
    const char *why = "";
    if (native && fd == -ERANGE)
        why = " (its MTU is too large for native XDP, which takes one page per frame on a "
              "veth: use --xdp-mode generic, or frames of at most about 3,500 bytes)";
    else if (native && (fd == -EOPNOTSUPP || fd == -EINVAL))
        why = " (its driver has no native XDP: use --xdp-mode generic)";
    ofl_start_failf(a, "interface %s refused the XDP program in %s mode: %s%s", ifname, mode,
                    strerror(-fd), why);
    return -1;
}

/* With --iface, the source's one option: its duration_ns (0: until a stop) into `*ns`.
 * 0, or -EINVAL (said: ofl_start_failf). */
static int duration_open(const struct ofl_xdp_desc *d, const struct ofl_args *a, uint64_t *ns)
{
    const char *v = ofl_args_get(a, d->source, "duration_ns", NULL);
    char *end = NULL;
    errno = 0;
    *ns = v ? strtoull(v, &end, 10) : 0;
    if (v && (!*v || *end || *v == '-' || errno)) {
        ofl_start_failf(a, "source %s: duration_ns=%s is not a number", d->source, v);
        return -EINVAL;
    }
    return 0;
}

/* With --iface: the interface's own traffic goes through the program until a stop
 * (Ctrl-C, SIGTERM, the runner gone) or `dur_ns`, the source's duration_ns (0: none);
 * what the source counted is what the program took in. */
static void serve(const struct ofl_xdp_desc *d, uint64_t dur_ns, struct run *r,
                  struct counters *c)
{
    uint64_t start = now_ns();
    __atomic_store_n(&r->core.t_start, start, __ATOMIC_RELAXED);
    uint64_t end = dur_ns ? start + dur_ns : UINT64_MAX;
    for (unsigned idle = 0; !ofl_stop_requested() && now_ns() < end;) {
        if (!r->cross) {
            usleep(10000);
            continue;
        }
        int n = ofl_xdp_cross_poll(r->cross);
        if (n < 0) break;
        /* (a bounded spin, then waits on the socket of up to 1 ms) */
        idle = n ? 0 : idle + 1;
        if (idle > 256) ofl_xsk_wait(&r->cross->xsk, 1);
    }
    if (r->cross) ofl_xdp_cross_poll(r->cross);  /* what arrived before the end */
    __atomic_store_n(&r->core.pkts_in, counter(c, d->source_el * OFL_XDP_COUNTERS),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&r->core.t_end, now_ns(), __ATOMIC_RELAXED);
}

/* Start answering live-stats requests (live.h) with `rp`'s counters: those of the
 * window's stats_req word, `win` (the crossing's or the channels'), or, when there is
 * none, of the run's window mapped into `own` (an xdp run alone still has one: the
 * runner has it made, --init). Without a window or a thread the run goes on without
 * live stats (printed). */
static void live_start(struct ofl_live *l, struct reporter *rp, struct ofl_window *win,
                       struct ofl_window *own)
{
    const struct ofl_args *a = rp->a;
    if (!win && a->window && a->stats) {
        int rc = ofl_window_open(own, a->window);
        if (rc < 0) {
            fprintf(stderr, "offlow %s: no live stats (cannot open the window %s: %s)\n",
                    a->device, a->window, ofl_strerror(rc));
            return;
        }
        win = own;
    }
    if (!win) return;
    if (ofl_live_start(l, &((struct ofl_window_hdr *)win->base)->stats_req, answer_live,
                       rp) < 0)
        fprintf(stderr, "offlow %s: no live stats (cannot start a thread)\n", a->device);
}

static int run(const struct ofl_xdp_desc *d, const char *obj_path, struct ofl_args *a)
{
    char err[256] = "";
    const char *iface = ofl_args_get(a, "xdp", "iface", NULL);
    const char *mode = ofl_args_get(a, "xdp", "mode", "generic");
    uint32_t ring = (uint32_t)strtoul(ofl_args_get(a, "xdp", "ring", "1024"), NULL, 10);
    /* (XDP runs on whichever CPU takes the frame: the one this process sends from) */
    struct run r = { .core = { .segment = d->segment, .cpu = sched_getcpu() } };
    struct ofl_xdp_cross cross = { 0 };
    struct ofl_xdp_chans chans;
    static volatile uint32_t abort_word;  /* (the window's, when there is one) */
    volatile uint32_t *abort_at = &abort_word;
    if (d->ncross) {
        if (ofl_xdp_cross_open(&cross, d, a) < 0) {
            ofl_xdp_cross_end(&cross, 1);  /* (the consumers stop, if the window opened) */
            return ofl_xdp_cross_close(&cross), 1;
        }
        r.cross = &cross;
        abort_at = ofl_xdp_cross_abort(&cross);
    }
    if (ofl_xdp_chans_open(&chans, d, a, d->ncross ? &cross.win : NULL) < 0) {
        ofl_xdp_cross_end(&cross, 1);
        ofl_xdp_chans_close(&chans);
        ofl_xdp_cross_close(&cross);
        return 1;
    }
    struct ofl_window *win = d->ncross ? &cross.win : chans.win;  /* (NULL: none) */
    if (win) abort_at = &((struct ofl_window_hdr *)win->base)->abort;
    static struct ofl_lifeline life;
    if (ofl_lifeline_start(&life, a->runner_fd, abort_at, win ? a->window : NULL,
                           a->stats, NULL) < 0) {
        ofl_start_failf(a, "--runner-fd %d is not a pipe", a->runner_fd);
        if (win) ofl_window_abort(win);
        ofl_xdp_chans_close(&chans);
        ofl_xdp_cross_close(&cross);
        return 1;
    }
    /* a user's option that the source, sink or a table never read is refused, as in
     * every process (ofl_args_check_unread); with --iface the source reads only its
     * duration_ns (the packets are the interface's) */
    uint64_t dur_ns = 0;
    if (spread_open(&r, a) < 0) goto early;
    if (iface ? duration_open(d, a, &dur_ns) < 0
              : ofl_source_open(&r.src, a, d->source, 0, 1, d->mtu) < 0)
        goto early;
    if (ofl_args_check_unread(a, "source", d->source) < 0) goto early;
    if (d->sink && (ofl_sink_open(&r.sink, a, d->sink, 1) < 0 ||
                    ofl_args_check_unread(a, "sink", d->sink) < 0))
        goto early;
    int status = 1, sock = -1, link = -1, peer_link = -1;
    struct counters c = { .ncpus = libbpf_num_possible_cpus() };
    /* live stats: the live thread's reporter reads through counters of its own (counter()
     * writes into their buffer), the main thread's through `c` */
    struct counters live_c = c;
    struct ofl_live live = { 0 };
    struct ofl_window live_win = { 0 };  /* the window, when nothing else maps it */
    struct ofl_xdp_tables tables = { 0 };
    struct bpf_object *obj = open_obj(obj_path, d->prog, a);
    if (!obj || ofl_xdp_tables_open(&tables, d, a, obj) < 0) goto done;
    if (!iface && ofl_xdp_net_create(d->mtu, err, sizeof err) < 0) {
        ofl_start_failf(a, "%s", err);
        goto done;
    }
    char keep[4096];  /* the verifier's log, if it refuses the program: beside the object */
    obj = load(obj, d, ofl_xdp_vlog_path(obj_path, keep, sizeof keep) == 0 ? keep : NULL, a);
    if (!obj || ofl_xdp_tables_fill(&tables, d, obj) < 0) goto done;
    /* the channels answered from before the first packet, as on the NIC */
    if (ofl_xdp_chans_start(&chans, obj) < 0) goto done;
    /* the socket in the program's XSKMAP before any frame can go up */
    if (r.cross && ofl_xdp_cross_socket(&cross, iface ? iface : OFL_XDP_IN, ring,
                                        bpf_map__fd(bpf_object__find_map_by_name(
                                            obj, "ofl_xsks"))) < 0)
        goto done;
    int prog = bpf_program__fd(bpf_object__find_program_by_name(obj, d->prog));
    if ((link = attach(a, prog, iface ? iface : OFL_XDP_IN, mode)) < 0) goto done;
    /* in native mode a veth hands what XDP_TX sends to its peer only when the peer runs
     * XDP too: it gets a program that passes every frame on */
    if (!iface && strcmp(mode, "native") == 0) {
        int pass = bpf_program__fd(bpf_object__find_program_by_name(obj, OFL_XDP_PASS));
        if ((peer_link = attach(a, pass, OFL_XDP_PEER, mode)) < 0) goto done;
    }
    if (!iface && (sock = ofl_xdp_packet_socket(OFL_XDP_PEER)) < 0) {
        ofl_start_failf(a, "cannot open a packet socket on %s: %s", OFL_XDP_PEER,
                        strerror(-sock));
        goto done;
    }
    c.obj = obj;
    c.fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "ofl_counts"));
    c.percpu = calloc((size_t)(c.ncpus > 0 ? c.ncpus : 1), sizeof *c.percpu);
    live_c = c;
    live_c.percpu = calloc((size_t)(c.ncpus > 0 ? c.ncpus : 1), sizeof *c.percpu);
    if (!c.percpu || !live_c.percpu) {
        ofl_start_failf(a, "out of memory (the program's counters)");
        goto done;
    }
    struct reporter rep = { d, a, &r, &c, chans.ctl_full, chans.maps };
    struct reporter live_rep = { d, a, &r, &live_c, chans.ctl_full, chans.maps };
    live_start(&live, &live_rep, win, &live_win);
    if (iface) {
        serve(d, dur_ns, &r, &c);
        status = r.cross && d->core->err ? 1 : 0;
    } else if (replay(d, &r, &c, sock) == 0) {
        status = 0;
    }
    if (ofl_xdp_cross_end(&cross, status) < 0) status = 1;
    /* --serve: the channels answered after the packets, until the session stops */
    if (win && a->serve && status == 0 && ofl_serve_until_stopped(win) < 0) status = 1;
    ofl_xdp_chans_stop(&chans);  /* (no handler runs while the tables are reported) */
    ofl_live_stop(&live);
    report_last(&rep);  /* the last counts: the stats file and, for readers after the
                           exit, the last live copy */
done:
    ofl_live_stop(&live);  /* (nothing when stopped above, or never started) */
    if (live_win.base) ofl_window_close(&live_win);
    free(live_c.percpu);
    if (status && win) ofl_window_abort(win);  /* (the consumers and peers stop: the run
                                                  failed) */
    free(c.percpu);
    if (sock >= 0) close(sock);
    if (peer_link >= 0) close(peer_link);
    if (link >= 0) close(link);  /* (detaches the program) */
    ofl_xdp_chans_close(&chans);
    ofl_lifeline_finish(&life);  /* (before the window, whose abort word it watches, goes) */
    ofl_xdp_cross_close(&cross);
    bpf_object__close(obj);  /* (the namespace and the veth pair, if ours, go with us) */
    ofl_xdp_tables_free(&tables);
    ofl_sink_close(r.sink);
    ofl_src_close(r.src);
    return status;
early:
    if (win) ofl_window_abort(win);
    ofl_xdp_chans_close(&chans);
    ofl_lifeline_finish(&life);
    ofl_xdp_cross_close(&cross);
    ofl_sink_close(r.sink);
    ofl_src_close(r.src);
    return 1;
}

int ofl_xdp_main(const struct ofl_xdp_desc *d, int argc, char **argv)
{
    libbpf_set_print(print_libbpf);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "--check") == 0) {
        struct bpf_object *obj = load(open_obj(argv[2], d->prog, NULL), d,
                                      argc == 4 ? argv[3] : NULL, NULL);
        bpf_object__close(obj);
        return obj ? 0 : 1;
    }
    struct ofl_args a;
    if (argc >= 2 && strcmp(argv[1], "--init") == 0) {  /* the run's window */
        if (ofl_args_parse(&a, argc, argv, "xdp") < 0) return 2;
        return d->init(&a);
    }
    if (argc < 3 || strcmp(argv[1], "--obj") != 0) {
        fprintf(stderr, "usage: %s --check OBJ [LOG] | --init --window W | --obj OBJ "
                "OPTIONS...\n", argv[0]);
        return 2;
    }
    const char *obj = argv[2];
    argv[2] = argv[0];
    if (ofl_args_parse(&a, argc - 2, argv + 2, "xdp") < 0) return 2;
    if (ofl_stop_signals_block() < 0) return ofl_fatal("cannot block SIGINT and SIGTERM");
    /* what the run asks of its options, recorded: a user's key nothing asks for is
     * refused (run: ofl_args_check_unread), as in the generated processes */
    struct ofl_opt_use *use = calloc(1, sizeof *use);
    if (!use) return ofl_fatal("out of memory");
    a.use = use;
    int status = run(d, obj, &a);
    free(use);
    return status;
}
