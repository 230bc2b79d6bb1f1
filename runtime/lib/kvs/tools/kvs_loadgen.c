/* kvs_loadgen: a memcached binary-protocol load generator (UDP with the frame
 * header, or TCP), closed or open loop, with Floem's key-value workload by default.
 *
 * usage: kvs_loadgen [-s HOST] -p PORT [options]
 *   --proto udp|tcp     transport (default udp)
 *   --mode closed|open  closed: every connection keeps --depth requests outstanding,
 *                       sending a new one as each answer arrives; latency is from
 *                       its send. open: requests are scheduled at --rate per second
 *                       in all (Poisson arrivals), sent at their scheduled time
 *                       whatever is outstanding, and latency is from the scheduled
 *                       time (so a stalled server cannot hide its queueing:
 *                       no coordinated omission). (default closed)
 *   --threads T         sending threads, each with its own connections (default 1)
 *   --conns C           connections (UDP sockets) per thread (default 1)
 *   --depth D           closed loop: outstanding requests per connection (default 16)
 *   --rate R            open loop: requests per second, all threads (default 100000)
 *   --duration S        measured seconds (default 5)
 *   --keys N            key space (default 100000)
 *   --key-size B        key bytes (default 32, at least 12)
 *   --value-size B      value bytes (default 64; UDP at most 1300)
 *   --zipf S            Zipf exponent of key popularity, 0 = uniform (default 0.9)
 *   --get-ratio F       fraction of GETs, the rest SETs (default 0.9)
 *   --no-warmup         skip the warm-up that SETs every key once before measuring
 *   --timeout-ms MS     an unanswered request is given up and counted as a timeout
 *                       after this long (default 200)
 *   --seed N            random seed (default 1)
 *   --cpus LIST         CPUs to pin threads to, round robin (default: not pinned)
 *   --progress on|off|auto  a progress line every second on stderr (auto: runs
 *                       over 5 s; default auto)
 *   --echo              the server sends each datagram back as it came (udp_echo, the
 *                       benchmark's ceiling): an answer is the request's own bytes,
 *                       counted as done (a GET as a miss), nothing checked but its id
 *
 * GET answers are checked: a hit must carry the key's value (its length and its
 * first 8 bytes, which encode the key's index), a SET must answer status 0, a GET
 * status 0 or NOT_FOUND; anything else counts as an error, as does a malformed
 * answer or a timeout.
 *
 * Prints one JSON object: ops/s over the measured window, hit rate, latency
 * percentiles (log-linear histogram: within 1/128 of the true value), error
 * counts, and the configuration. Exit status 0 unless the run could not start. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "offlow/mcproto.h"
#include "offlow/synth.h"
#include "offlow/thread.h"
#include "offlow/wait.h"

#define MAX_CPUS 64
#define OPEN_WINDOW 4096       /* open loop: most outstanding requests per connection */
#define WARM_DEPTH 64          /* warm-up: outstanding SETs per connection */
#define RX_BATCH 64
#define UDP_VALUE_MAX 1300
#define DRAIN_NS 100000000ull  /* after the window: wait this long for stragglers */
#define HIST_BUCKETS (128 + 57 * 64)

enum { PROTO_UDP, PROTO_TCP };
enum { MODE_CLOSED, MODE_OPEN };
enum { PHASE_WARMUP, PHASE_RUN, PHASE_DRAIN };

struct config {
    struct sockaddr_in server;
    int proto, mode, threads, conns, depth, warmup, progress, echo;
    double rate, duration, zipf, get_ratio;
    uint32_t keys, key_size, value_size;
    uint64_t timeout_ns, seed;
    int cpus[MAX_CPUS], ncpus;
};

/* Latency histogram: exact below 128 ns, then 64 buckets per power of two. */
struct hist {
    uint64_t n[HIST_BUCKETS];
    uint64_t count, sum, max;
};

struct slot {
    uint64_t sched_ns, sent_ns;
    uint32_t key;
    uint16_t gen;
    uint8_t busy, is_get;
};

struct conn {
    int fd;
    struct slot *slots;
    uint32_t nslots;
    uint32_t *free_slots, nfree;    /* open loop and warm-up: slots not in use */
    uint8_t *tx;                    /* TCP: bytes to send; UDP: datagrams to send */
    size_t tx_len, tx_cap;
    uint32_t tx_count;              /* UDP: datagrams queued in tx */
    uint32_t tx_lens[RX_BATCH * 2];
    uint8_t *rx;                    /* TCP: received bytes not yet parsed */
    size_t rx_len, rx_cap;
};

/* Counters read by the progress line while the thread runs. */
struct live {
    atomic_uint_fast64_t ops, hits, gets, errors;
};

struct counters {
    uint64_t ops, gets, sets, hits, misses;
    uint64_t timeouts, bad_status, malformed, wrong_value, stale, backlog, send_errors;
    uint64_t warm_sets, warm_retries, in_flight_at_end;
};

struct thread {
    const struct config *cfg;
    const double *cdf;               /* Zipf CDF over the keys (shared, read-only) */
    pthread_barrier_t *barrier;
    atomic_int *phase;
    int id, cpu;
    pthread_t th;
    uint64_t rng[2];
    struct conn *conns;
    struct hist hist;
    struct counters c;
    struct live live;
    uint32_t warm_lo, warm_hi, warm_next, warm_done;
    uint64_t next_arrival_ns, t_start, t_end;
    uint32_t rr;                     /* open loop: next connection */
    int failed;
};

/* ---- small helpers -------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t a = s[0], b = s[1];
    s[0] = b;
    a ^= a << 23;
    s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return s[1] + b;
}

static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static unsigned hist_index(uint64_t v)
{
    if (v < 128) return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = e - 6;
    return 128 + (e - 7) * 64 + (unsigned)((v >> shift) - 64);
}

/* Midpoint of a bucket. */
static uint64_t hist_value(unsigned i)
{
    if (i < 128) return i;
    unsigned e = (i - 128) / 64 + 7, m = (i - 128) % 64 + 64, shift = e - 6;
    uint64_t lo = (uint64_t)m << shift, hi = ((uint64_t)(m + 1) << shift) - 1;
    return lo + (hi - lo) / 2;
}

static void hist_add(struct hist *h, uint64_t v)
{
    h->n[hist_index(v)]++;
    h->count++;
    h->sum += v;
    if (v > h->max) h->max = v;
}

static uint64_t hist_quantile(const struct hist *h, double q)
{
    if (!h->count) return 0;
    uint64_t want = (uint64_t)ceil(q * (double)h->count), acc = 0;
    if (want == 0) want = 1;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        acc += h->n[i];
        if (acc >= want) return hist_value(i);
    }
    return h->max;
}

/* Key `i`: "key:" and the index, zero-padded to key_size bytes. */
static void make_key(const struct config *cfg, uint32_t i, char *out)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%u", i);
    memcpy(out, "key:", 4);
    memset(out + 4, '0', cfg->key_size - 4);
    memcpy(out + cfg->key_size - (uint32_t)n, tmp, (size_t)n);
}

/* The value of key `i`: its index (8 bytes, little endian) then a fill pattern. */
static void make_value(const struct config *cfg, uint32_t i, uint8_t *out)
{
    for (uint32_t k = 0; k < cfg->value_size; k++) out[k] = (uint8_t)('a' + (i + k) % 26);
    uint64_t tag = (uint64_t)i ^ 0x5a5a5a5a00000000ull;
    for (uint32_t k = 0; k < 8 && k < cfg->value_size; k++) out[k] = (uint8_t)(tag >> (8 * k));
}

static int value_ok(const struct config *cfg, uint32_t i, const uint8_t *v, uint32_t len)
{
    if (len != cfg->value_size) return 0;
    uint64_t tag = (uint64_t)i ^ 0x5a5a5a5a00000000ull;
    for (uint32_t k = 0; k < 8 && k < len; k++)
        if (v[k] != (uint8_t)(tag >> (8 * k))) return 0;
    return 1;
}

static uint32_t zipf_key(struct thread *t)
{
    const struct config *cfg = t->cfg;
    double u = rng_unit(t->rng);
    if (!t->cdf) return (uint32_t)(u * cfg->keys) % cfg->keys;
    uint32_t lo = 0, hi = cfg->keys - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->cdf[mid] >= u) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* ---- connections ---------------------------------------------------------------- */

static int conn_open(const struct config *cfg, struct conn *c, uint32_t nslots)
{
    memset(c, 0, sizeof *c);
    c->fd = socket(AF_INET, (cfg->proto == PROTO_UDP ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC,
                   0);
    if (c->fd < 0) return -errno;
    if (cfg->proto == PROTO_TCP) {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else {
        int sz = 4 << 20;
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    }
    if (connect(c->fd, (const struct sockaddr *)&cfg->server, sizeof cfg->server)) return -errno;
    c->nslots = nslots;
    c->slots = calloc(nslots, sizeof *c->slots);
    c->free_slots = malloc(nslots * sizeof *c->free_slots);
    c->tx_cap = (size_t)RX_BATCH * 2 * (OFL_MC_UDP_HDR_LEN + OFL_MC_HDR_LEN + 8 +
                                        cfg->key_size + cfg->value_size);
    c->tx = malloc(c->tx_cap);
    c->rx_cap = cfg->proto == PROTO_TCP ? 1 << 20 : (size_t)RX_BATCH * 2048;
    c->rx = malloc(c->rx_cap);
    if (!c->slots || !c->free_slots || !c->tx || !c->rx) return -ENOMEM;
    for (uint32_t i = 0; i < nslots; i++) c->free_slots[i] = nslots - 1 - i;
    c->nfree = nslots;
    return 0;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0) close(c->fd);
    free(c->slots);
    free(c->free_slots);
    free(c->tx);
    free(c->rx);
}

/* Send what is queued. UDP datagrams that the socket refuses are dropped (their
 * requests time out). */
static void conn_flush(struct thread *t, struct conn *c)
{
    if (t->cfg->proto == PROTO_UDP) {
        struct mmsghdr m[RX_BATCH * 2];
        struct iovec v[RX_BATCH * 2];
        size_t off = 0;
        for (uint32_t i = 0; i < c->tx_count; i++) {
            v[i] = (struct iovec){c->tx + off, c->tx_lens[i]};
            memset(&m[i], 0, sizeof m[i]);
            m[i].msg_hdr.msg_iov = &v[i];
            m[i].msg_hdr.msg_iovlen = 1;
            off += c->tx_lens[i];
        }
        for (uint32_t sent = 0; sent < c->tx_count;) {
            int k = sendmmsg(c->fd, m + sent, c->tx_count - sent, MSG_DONTWAIT);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                t->c.send_errors += c->tx_count - sent;
                break;
            }
            sent += (uint32_t)k;
        }
        c->tx_count = 0;
        c->tx_len = 0;
        return;
    }
    /* TCP: what the socket does not take now stays queued for the next call. */
    size_t off = 0;
    while (off < c->tx_len) {
        ssize_t k = send(c->fd, c->tx + off, c->tx_len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (k < 0) {
            t->c.send_errors++;
            t->failed = 1;
            off = c->tx_len;
            break;
        }
        off += (size_t)k;
    }
    memmove(c->tx, c->tx + off, c->tx_len - off);
    c->tx_len -= off;
}

/* Queue one request in slot `s` of connection `c`. */
static void issue(struct thread *t, struct conn *c, uint32_t s, uint32_t key, int is_get,
                  uint64_t sched_ns, uint64_t now)
{
    const struct config *cfg = t->cfg;
    size_t need = OFL_MC_UDP_HDR_LEN + OFL_MC_HDR_LEN + 8 + cfg->key_size + cfg->value_size;
    if (c->tx_cap - c->tx_len < need || c->tx_count == RX_BATCH * 2) conn_flush(t, c);
    if (c->tx_cap - c->tx_len < need) {   /* TCP: the socket is full; queue more */
        uint8_t *b = realloc(c->tx, c->tx_cap * 2);
        if (!b) {
            t->c.send_errors++;
            t->failed = 1;
            return;
        }
        c->tx = b;
        c->tx_cap *= 2;
    }
    struct slot *sl = &c->slots[s];
    sl->busy = 1;
    sl->gen++;
    sl->key = key;
    sl->is_get = (uint8_t)is_get;
    sl->sched_ns = sched_ns;
    sl->sent_ns = now;
    char k[256];
    uint8_t v[4096];   /* values longer than this (TCP only) are built on the heap */
    uint8_t *val = cfg->value_size <= sizeof v ? v : malloc(cfg->value_size);
    make_key(cfg, key, k);
    uint8_t *p = c->tx + c->tx_len;
    size_t hdr = 0;
    if (cfg->proto == PROTO_UDP) {
        ofl_mc_udp_write(p, (uint16_t)s, 0, 1);
        hdr = OFL_MC_UDP_HDR_LEN;
    }
    uint32_t opaque = s | (uint32_t)sl->gen << 16;
    ssize_t n;
    if (is_get) {
        n = ofl_mc_write_request(p + hdr, c->tx_cap - c->tx_len - hdr, OFL_MC_OP_GET, opaque, 0,
                                 NULL, 0, k, cfg->key_size, NULL, 0);
    } else {
        uint8_t extras[8] = {0};
        make_value(cfg, key, val);
        n = ofl_mc_write_request(p + hdr, c->tx_cap - c->tx_len - hdr, OFL_MC_OP_SET, opaque, 0,
                                 extras, 8, k, cfg->key_size, val, cfg->value_size);
    }
    if (val != v) free(val);
    if (n < 0) {   /* cannot happen: tx_cap holds two batches of the largest request */
        t->c.send_errors++;
        sl->busy = 0;
        return;
    }
    c->tx_len += hdr + (size_t)n;
    if (cfg->proto == PROTO_UDP) c->tx_lens[c->tx_count++] = (uint32_t)(hdr + (size_t)n);
}

/* ---- request generation --------------------------------------------------------- */

static int phase_of(struct thread *t)
{
    return atomic_load_explicit(t->phase, memory_order_relaxed);
}

/* Give slot `s` of `c` its next request: in the warm-up the next unset key of this
 * thread's slice, in a closed-loop run a random one; otherwise free the slot. */
static void refill(struct thread *t, struct conn *c, uint32_t s, uint64_t now)
{
    int phase = phase_of(t);
    if (phase == PHASE_WARMUP && t->warm_next < t->warm_hi) {
        issue(t, c, s, t->warm_next++, 0, now, now);
        return;
    }
    if (phase == PHASE_RUN && t->cfg->mode == MODE_CLOSED) {
        issue(t, c, s, zipf_key(t), rng_unit(t->rng) < t->cfg->get_ratio, now, now);
        return;
    }
    c->slots[s].busy = 0;
    c->free_slots[c->nfree++] = s;
}

static void count_error(struct thread *t, uint64_t *which)
{
    (*which)++;
    atomic_fetch_add_explicit(&t->live.errors, 1, memory_order_relaxed);
}

/* One answer for connection `c`. */
static void complete(struct thread *t, struct conn *c, const struct ofl_mc_res *res,
                     uint64_t now)
{
    uint32_t s = res->opaque & 0xffff;
    uint16_t gen = (uint16_t)(res->opaque >> 16);
    if (s >= c->nslots || !c->slots[s].busy || c->slots[s].gen != gen) {
        t->c.stale++;   /* the answer to a request that timed out */
        return;
    }
    struct slot *sl = &c->slots[s];
    int phase = phase_of(t);
    uint8_t want_op = sl->is_get ? OFL_MC_OP_GET : OFL_MC_OP_SET;
    if (phase == PHASE_WARMUP) {
        if (res->opcode != want_op || res->status != OFL_MC_ST_OK) {
            t->c.warm_retries++;
            issue(t, c, s, sl->key, 0, now, now);   /* try this key again */
            return;
        }
        t->c.warm_sets++;
        t->warm_done++;
    } else if (phase == PHASE_RUN && now <= t->t_end) {
        if (res->opcode != want_op) {
            count_error(t, &t->c.malformed);
        } else if (sl->is_get) {
            t->c.gets++;
            atomic_fetch_add_explicit(&t->live.gets, 1, memory_order_relaxed);
            if (res->status == OFL_MC_ST_OK) {
                if (value_ok(t->cfg, sl->key, res->value, res->value_len)) {
                    t->c.hits++;
                    atomic_fetch_add_explicit(&t->live.hits, 1, memory_order_relaxed);
                } else {
                    count_error(t, &t->c.wrong_value);
                }
            } else if (res->status == OFL_MC_ST_NOT_FOUND) {
                t->c.misses++;
            } else {
                count_error(t, &t->c.bad_status);
            }
        } else {
            t->c.sets++;
            if (res->status != OFL_MC_ST_OK) count_error(t, &t->c.bad_status);
        }
        t->c.ops++;
        atomic_fetch_add_explicit(&t->live.ops, 1, memory_order_relaxed);
        uint64_t from = t->cfg->mode == MODE_OPEN ? sl->sched_ns : sl->sent_ns;
        hist_add(&t->hist, now > from ? now - from : 0);
    }
    refill(t, c, s, now);
}

/* Read and handle what has arrived on `c`. Returns the answers handled. */
static int conn_receive(struct thread *t, struct conn *c)
{
    int done = 0;
    if (t->cfg->proto == PROTO_UDP) {
        struct mmsghdr m[RX_BATCH];
        struct iovec v[RX_BATCH];
        uint8_t *buf = c->rx;
        uint32_t each = (uint32_t)(c->rx_cap / RX_BATCH);
        for (int i = 0; i < RX_BATCH; i++) {
            v[i] = (struct iovec){buf + (size_t)i * each, each};
            memset(&m[i], 0, sizeof m[i]);
            m[i].msg_hdr.msg_iov = &v[i];
            m[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(c->fd, m, RX_BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) return 0;
        uint64_t now = ofl_now_ns();
        for (int i = 0; i < n; i++) {
            const uint8_t *d = buf + (size_t)i * each;
            size_t len = m[i].msg_len;
            struct ofl_mc_udp_hdr h;
            struct ofl_mc_res res;
            if (t->cfg->echo && !(m[i].msg_hdr.msg_flags & MSG_TRUNC) &&
                len >= OFL_MC_UDP_HDR_LEN + OFL_MC_HDR_LEN) {
                /* our own request back: its opcode and opaque, a done answer */
                memset(&res, 0, sizeof res);
                res.opcode = d[OFL_MC_UDP_HDR_LEN + 1];
                res.status = res.opcode == OFL_MC_OP_GET ? OFL_MC_ST_NOT_FOUND : OFL_MC_ST_OK;
                const uint8_t *o = d + OFL_MC_UDP_HDR_LEN + 12;
                res.opaque = (uint32_t)o[0] << 24 | (uint32_t)o[1] << 16 | (uint32_t)o[2] << 8 | o[3];
                complete(t, c, &res, now);
                done++;
                continue;
            }
            if ((m[i].msg_hdr.msg_flags & MSG_TRUNC) || ofl_mc_udp_parse(d, len, &h) < 0 ||
                ofl_mc_parse_response(d + OFL_MC_UDP_HDR_LEN, len - OFL_MC_UDP_HDR_LEN, &res,
                                      NULL) != (ssize_t)(len - OFL_MC_UDP_HDR_LEN) ||
                h.request_id != (res.opaque & 0xffff)) {
                if (phase_of(t) == PHASE_RUN) count_error(t, &t->c.malformed);
                continue;
            }
            complete(t, c, &res, now);
            done++;
        }
        return done;
    }
    if (c->rx_len == c->rx_cap) {   /* an answer larger than the buffer: give up on it */
        count_error(t, &t->c.malformed);
        t->failed = 1;
        return 0;
    }
    ssize_t n = recv(c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        t->failed = 1;   /* the server closed the connection */
        return 0;
    }
    if (n < 0) return 0;
    c->rx_len += (size_t)n;
    uint64_t now = ofl_now_ns();
    size_t off = 0;
    for (;;) {
        struct ofl_mc_res res;
        ssize_t r = ofl_mc_parse_response(c->rx + off, c->rx_len - off, &res, NULL);
        if (r == 0) break;
        if (r < 0) {   /* the stream is lost */
            count_error(t, &t->c.malformed);
            t->failed = 1;
            off = c->rx_len;
            break;
        }
        off += (size_t)r;
        complete(t, c, &res, now);
        done++;
    }
    memmove(c->rx, c->rx + off, c->rx_len - off);
    c->rx_len -= off;
    return done;
}

/* Give up on requests outstanding longer than the timeout (UDP loses datagrams). */
static void expire(struct thread *t, uint64_t now)
{
    for (int k = 0; k < t->cfg->conns; k++) {
        struct conn *c = &t->conns[k];
        for (uint32_t s = 0; s < c->nslots; s++) {
            struct slot *sl = &c->slots[s];
            /* sent_ns may be later than `now`: requests go out all through a pass */
            if (!sl->busy || now < sl->sent_ns + t->cfg->timeout_ns) continue;
            int phase = phase_of(t);
            if (phase == PHASE_WARMUP) {
                t->c.warm_retries++;
                issue(t, c, s, sl->key, 0, now, now);
                continue;
            }
            if (phase == PHASE_RUN) count_error(t, &t->c.timeouts);
            refill(t, c, s, now);
        }
    }
}

/* Open loop: send every request whose scheduled time has come. */
static void schedule(struct thread *t, uint64_t now)
{
    const struct config *cfg = t->cfg;
    double mean_ns = 1e9 * cfg->threads / cfg->rate;
    while (t->next_arrival_ns <= now && t->next_arrival_ns < t->t_end) {
        uint64_t at = t->next_arrival_ns;
        t->next_arrival_ns += (uint64_t)(-log(1.0 - rng_unit(t->rng)) * mean_ns) + 1;
        struct conn *c = &t->conns[t->rr++ % (uint32_t)cfg->conns];
        if (!c->nfree) {
            count_error(t, &t->c.backlog);
            continue;
        }
        uint32_t s = c->free_slots[--c->nfree];
        issue(t, c, s, zipf_key(t), rng_unit(t->rng) < cfg->get_ratio, at, now);
    }
}

static uint32_t outstanding(const struct thread *t)
{
    uint32_t n = 0;
    for (int k = 0; k < t->cfg->conns; k++) n += t->conns[k].nslots - t->conns[k].nfree;
    return n;
}

/* Idle turns before the polling loop yields the CPU. A turn is a receive system call
 * per connection (about a microsecond), so this is ~16 us: on a machine where the
 * server's busy-polling threads share CPUs with the generator, spinning longer (the
 * runtime's OFL_WAIT_SPINS, 2,000 turns here: ~2 ms) starves them. */
#define IDLE_SPINS 16u

/* The polling loop: until `done` says so. Never blocks: spins, then yields. */
static void poll_loop(struct thread *t, int (*done)(struct thread *, uint64_t))
{
    uint64_t next_expire = 0;
    uint32_t spins = 0;
    for (;;) {
        uint64_t now = ofl_now_ns();
        if (done(t, now) || t->failed) return;
        int progress = 0;
        if (t->cfg->mode == MODE_OPEN && phase_of(t) == PHASE_RUN) schedule(t, now);
        for (int k = 0; k < t->cfg->conns; k++) progress += conn_receive(t, &t->conns[k]);
        if (now >= next_expire) {
            expire(t, now);
            next_expire = now + 1000000;
        }
        for (int k = 0; k < t->cfg->conns; k++)
            if (t->conns[k].tx_len) conn_flush(t, &t->conns[k]);
        if (progress) {
            spins = 0;
        } else if (++spins < IDLE_SPINS) {
            ofl_cpu_relax();
        } else {
            spins = IDLE_SPINS;  /* yield at every idle turn until replies come */
            sched_yield();
        }
    }
}

static int warm_done(struct thread *t, uint64_t now)
{
    (void)now;
    return t->warm_done >= t->warm_hi - t->warm_lo;
}

static int run_done(struct thread *t, uint64_t now)
{
    return now >= t->t_end;
}

static int drain_done(struct thread *t, uint64_t now)
{
    return outstanding(t) == 0 || now >= t->t_end + DRAIN_NS;
}

/* ---- threads -------------------------------------------------------------------- */

static void *thread_main(void *arg)
{
    struct thread *t = arg;
    const struct config *cfg = t->cfg;
    if (t->cpu >= 0) ofl_pin_self(t->cpu);
    uint64_t now = ofl_now_ns();
    /* Warm-up: this thread's slice of the keys, WARM_DEPTH SETs outstanding per
     * connection, spread over its connections. */
    if (cfg->warmup && t->warm_hi > t->warm_lo) {
        for (int k = 0; k < cfg->conns; k++) {
            struct conn *c = &t->conns[k];
            for (uint32_t d = 0; d < WARM_DEPTH && d < c->nslots && t->warm_next < t->warm_hi;
                 d++) {
                uint32_t s = c->free_slots[--c->nfree];
                issue(t, c, s, t->warm_next++, 0, now, now);
            }
            conn_flush(t, c);
        }
        poll_loop(t, warm_done);
    }
    pthread_barrier_wait(t->barrier);   /* everyone warm */
    pthread_barrier_wait(t->barrier);   /* the main thread switched to PHASE_RUN */
    now = ofl_now_ns();
    t->t_start = now;
    t->t_end = now + (uint64_t)(cfg->duration * 1e9);
    t->next_arrival_ns = now;
    if (cfg->mode == MODE_CLOSED) {
        for (int k = 0; k < cfg->conns; k++) {
            struct conn *c = &t->conns[k];
            while (c->nfree) {
                uint32_t s = c->free_slots[--c->nfree];
                issue(t, c, s, zipf_key(t), rng_unit(t->rng) < cfg->get_ratio, now, now);
            }
            conn_flush(t, c);
        }
    }
    poll_loop(t, run_done);
    atomic_store(t->phase, PHASE_DRAIN);   /* every thread ends at the same time */
    poll_loop(t, drain_done);
    t->c.in_flight_at_end = outstanding(t);
    return NULL;
}

/* ---- main ----------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: kvs_loadgen [-s HOST] -p PORT [--proto udp|tcp] [--mode closed|open] "
            "[--threads T] [--conns C] [--depth D] [--rate R] [--duration S] [--keys N] "
            "[--key-size B] [--value-size B] [--zipf S] [--get-ratio F] [--no-warmup] "
            "[--timeout-ms MS] [--seed N] [--cpus LIST] [--progress on|off|auto] [--echo]\n");
    exit(2);
}

static double dbl_arg(const char *name, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "kvs_loadgen: bad %s '%s' (expected %g..%g)\n", name, s, lo, hi);
        exit(2);
    }
    return v;
}

static void parse_args(int argc, char **argv, struct config *cfg)
{
    enum { O_PROTO = 256, O_MODE, O_THREADS, O_CONNS, O_DEPTH, O_RATE, O_DURATION, O_KEYS,
           O_KSIZE, O_VSIZE, O_ZIPF, O_GETS, O_NOWARM, O_TIMEOUT, O_SEED, O_CPUS, O_PROGRESS,
           O_ECHO };
    static const struct option opts[] = {
        {"proto", 1, NULL, O_PROTO},        {"mode", 1, NULL, O_MODE},
        {"threads", 1, NULL, O_THREADS},    {"conns", 1, NULL, O_CONNS},
        {"depth", 1, NULL, O_DEPTH},        {"rate", 1, NULL, O_RATE},
        {"duration", 1, NULL, O_DURATION},  {"keys", 1, NULL, O_KEYS},
        {"key-size", 1, NULL, O_KSIZE},     {"value-size", 1, NULL, O_VSIZE},
        {"zipf", 1, NULL, O_ZIPF},          {"get-ratio", 1, NULL, O_GETS},
        {"no-warmup", 0, NULL, O_NOWARM},   {"timeout-ms", 1, NULL, O_TIMEOUT},
        {"seed", 1, NULL, O_SEED},          {"cpus", 1, NULL, O_CPUS},
        {"progress", 1, NULL, O_PROGRESS},  {"echo", 0, NULL, O_ECHO},
        {NULL, 0, NULL, 0}};
    const char *host = "127.0.0.1";
    int port = -1, c;
    while ((c = getopt_long(argc, argv, "s:p:", opts, NULL)) != -1) {
        switch (c) {
        case 's': host = optarg; break;
        case 'p': port = (int)dbl_arg("port", optarg, 1, 65535); break;
        case O_PROTO:
            if (!strcmp(optarg, "udp")) cfg->proto = PROTO_UDP;
            else if (!strcmp(optarg, "tcp")) cfg->proto = PROTO_TCP;
            else usage();
            break;
        case O_MODE:
            if (!strcmp(optarg, "closed")) cfg->mode = MODE_CLOSED;
            else if (!strcmp(optarg, "open")) cfg->mode = MODE_OPEN;
            else usage();
            break;
        case O_THREADS: cfg->threads = (int)dbl_arg("threads", optarg, 1, 256); break;
        case O_CONNS: cfg->conns = (int)dbl_arg("conns", optarg, 1, 1024); break;
        case O_DEPTH: cfg->depth = (int)dbl_arg("depth", optarg, 1, 4096); break;
        case O_RATE: cfg->rate = dbl_arg("rate", optarg, 1, 1e9); break;
        case O_DURATION: cfg->duration = dbl_arg("duration", optarg, 0.01, 86400); break;
        case O_KEYS: cfg->keys = (uint32_t)dbl_arg("keys", optarg, 1, 1e9); break;
        case O_KSIZE: cfg->key_size = (uint32_t)dbl_arg("key-size", optarg, 12, 250); break;
        case O_VSIZE: cfg->value_size = (uint32_t)dbl_arg("value-size", optarg, 0, 1 << 20); break;
        case O_ZIPF: cfg->zipf = dbl_arg("zipf", optarg, 0, 10); break;
        case O_GETS: cfg->get_ratio = dbl_arg("get-ratio", optarg, 0, 1); break;
        case O_NOWARM: cfg->warmup = 0; break;
        case O_TIMEOUT:
            cfg->timeout_ns = (uint64_t)(dbl_arg("timeout-ms", optarg, 1, 600000) * 1e6);
            break;
        case O_SEED: cfg->seed = (uint64_t)dbl_arg("seed", optarg, 0, 1e18); break;
        case O_CPUS: {
            char *save = NULL, *list = strdup(optarg);
            for (char *tk = strtok_r(list, ",", &save); tk && cfg->ncpus < MAX_CPUS;
                 tk = strtok_r(NULL, ",", &save))
                cfg->cpus[cfg->ncpus++] = (int)dbl_arg("cpu", tk, 0, 4095);
            free(list);
            break;
        }
        case O_ECHO: cfg->echo = 1; break;
        case O_PROGRESS:
            cfg->progress = !strcmp(optarg, "on") ? 1 : !strcmp(optarg, "off") ? 0 : -1;
            break;
        default: usage();
        }
    }
    if (port < 0 || optind != argc) usage();
    if (cfg->proto == PROTO_UDP && cfg->value_size > UDP_VALUE_MAX) {
        fprintf(stderr, "kvs_loadgen: UDP answers must fit one datagram: --value-size at "
                        "most %d\n", UDP_VALUE_MAX);
        exit(2);
    }
    struct addrinfo hints = {.ai_family = AF_INET}, *ai;
    if (getaddrinfo(host, NULL, &hints, &ai)) {
        fprintf(stderr, "kvs_loadgen: cannot resolve '%s'\n", host);
        exit(2);
    }
    cfg->server = *(struct sockaddr_in *)ai->ai_addr;
    cfg->server.sin_port = htons((uint16_t)port);
    freeaddrinfo(ai);
}

/* Zipf CDF over ranks 1..n with exponent s (NULL for s == 0: uniform). */
static double *zipf_cdf(uint32_t n, double s)
{
    if (s == 0) return NULL;
    double *cdf = malloc((size_t)n * sizeof *cdf);
    if (!cdf) return NULL;
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        sum += 1.0 / pow((double)i + 1, s);
        cdf[i] = sum;
    }
    for (uint32_t i = 0; i < n; i++) cdf[i] /= sum;
    cdf[n - 1] = 1.0;
    return cdf;
}

static void sum_live(struct thread *ts, int n, uint64_t *ops, uint64_t *hits, uint64_t *gets,
                     uint64_t *errors)
{
    *ops = *hits = *gets = *errors = 0;
    for (int i = 0; i < n; i++) {
        *ops += atomic_load_explicit(&ts[i].live.ops, memory_order_relaxed);
        *hits += atomic_load_explicit(&ts[i].live.hits, memory_order_relaxed);
        *gets += atomic_load_explicit(&ts[i].live.gets, memory_order_relaxed);
        *errors += atomic_load_explicit(&ts[i].live.errors, memory_order_relaxed);
    }
}

/* Sleep (this thread only prints progress: it is off the request path). */
static void nap_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull),
                          .tv_nsec = (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static void report(const struct config *cfg, struct thread *ts, double warm_s)
{
    struct counters c = {0};
    struct hist *h = calloc(1, sizeof *h);
    if (!h) exit(1);
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int i = 0; i < cfg->threads; i++) {
        struct counters *x = &ts[i].c;
        c.ops += x->ops; c.gets += x->gets; c.sets += x->sets; c.hits += x->hits;
        c.misses += x->misses; c.timeouts += x->timeouts; c.bad_status += x->bad_status;
        c.malformed += x->malformed; c.wrong_value += x->wrong_value; c.stale += x->stale;
        c.backlog += x->backlog; c.send_errors += x->send_errors;
        c.warm_sets += x->warm_sets; c.warm_retries += x->warm_retries;
        c.in_flight_at_end += x->in_flight_at_end;
        for (unsigned b = 0; b < HIST_BUCKETS; b++) h->n[b] += ts[i].hist.n[b];
        h->count += ts[i].hist.count;
        h->sum += ts[i].hist.sum;
        if (ts[i].hist.max > h->max) h->max = ts[i].hist.max;
        if (ts[i].t_start < t0) t0 = ts[i].t_start;
        if (ts[i].t_end > t1) t1 = ts[i].t_end;
    }
    double secs = t1 > t0 ? (double)(t1 - t0) / 1e9 : cfg->duration;
    uint64_t errors = c.timeouts + c.bad_status + c.malformed + c.wrong_value + c.backlog +
                      c.send_errors;
    int failed = 0;
    for (int i = 0; i < cfg->threads; i++) failed |= ts[i].failed;
    printf("{\"ops\": %llu, \"seconds\": %.6f, \"ops_per_s\": %.1f, \"gets\": %llu, "
           "\"sets\": %llu, \"hits\": %llu, \"misses\": %llu, \"hit_rate\": %.6f, "
           "\"latency_ns\": {\"p50\": %llu, \"p90\": %llu, \"p99\": %llu, \"p999\": %llu, "
           "\"mean\": %.1f, \"max\": %llu}, "
           "\"errors\": %llu, \"error_counts\": {\"timeouts\": %llu, \"bad_status\": %llu, "
           "\"malformed\": %llu, \"wrong_value\": %llu, \"backlog\": %llu, "
           "\"send_errors\": %llu}, \"late_answers\": %llu, \"in_flight_at_end\": %llu, "
           "\"connection_failed\": %s, "
           "\"warmup\": {\"sets\": %llu, \"retries\": %llu, \"seconds\": %.3f}, "
           "\"config\": {\"proto\": \"%s\", \"mode\": \"%s\", \"threads\": %d, \"conns\": %d, "
           "\"depth\": %d, \"rate\": %.1f, \"duration\": %.3f, \"keys\": %u, \"key_size\": %u, "
           "\"value_size\": %u, \"zipf\": %.3f, \"get_ratio\": %.3f, \"timeout_ms\": %.1f, "
           "\"seed\": %llu}}\n",
           (unsigned long long)c.ops, secs, (double)c.ops / secs, (unsigned long long)c.gets,
           (unsigned long long)c.sets, (unsigned long long)c.hits,
           (unsigned long long)c.misses, c.gets ? (double)c.hits / (double)c.gets : 0.0,
           (unsigned long long)hist_quantile(h, 0.5), (unsigned long long)hist_quantile(h, 0.9),
           (unsigned long long)hist_quantile(h, 0.99),
           (unsigned long long)hist_quantile(h, 0.999),
           h->count ? (double)h->sum / (double)h->count : 0.0, (unsigned long long)h->max,
           (unsigned long long)errors, (unsigned long long)c.timeouts,
           (unsigned long long)c.bad_status, (unsigned long long)c.malformed,
           (unsigned long long)c.wrong_value, (unsigned long long)c.backlog,
           (unsigned long long)c.send_errors, (unsigned long long)c.stale,
           (unsigned long long)c.in_flight_at_end, failed ? "true" : "false",
           (unsigned long long)c.warm_sets, (unsigned long long)c.warm_retries, warm_s,
           cfg->proto == PROTO_UDP ? "udp" : "tcp", cfg->mode == MODE_OPEN ? "open" : "closed",
           cfg->threads, cfg->conns, cfg->depth, cfg->rate, cfg->duration, cfg->keys,
           cfg->key_size, cfg->value_size, cfg->zipf, cfg->get_ratio,
           (double)cfg->timeout_ns / 1e6, (unsigned long long)cfg->seed);
    fflush(stdout);
    free(h);
}

int main(int argc, char **argv)
{
    struct config cfg = {.proto = PROTO_UDP, .mode = MODE_CLOSED, .threads = 1, .conns = 1,
                         .depth = 16, .warmup = 1, .progress = -1, .rate = 100000,
                         .duration = 5, .zipf = 0.9, .get_ratio = 0.9, .keys = 100000,
                         .key_size = 32, .value_size = 64, .timeout_ns = 200000000ull,
                         .seed = 1};
    parse_args(argc, argv, &cfg);
    if (cfg.progress < 0) cfg.progress = cfg.duration > 5;
    double *cdf = zipf_cdf(cfg.keys, cfg.zipf);
    struct thread *ts = calloc((size_t)cfg.threads, sizeof *ts);
    if ((cfg.zipf != 0 && !cdf) || !ts) {
        fprintf(stderr, "kvs_loadgen: out of memory\n");
        return 1;
    }
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)cfg.threads + 1);
    atomic_int phase;
    atomic_init(&phase, PHASE_WARMUP);
    uint32_t slots = cfg.mode == MODE_OPEN ? OPEN_WINDOW
                                           : (uint32_t)(cfg.depth > WARM_DEPTH ? cfg.depth
                                                                               : WARM_DEPTH);
    struct ofl_rng seed = {cfg.seed};
    for (int i = 0; i < cfg.threads; i++) {
        struct thread *t = &ts[i];
        t->cfg = &cfg;
        t->cdf = cdf;
        t->barrier = &barrier;
        t->phase = &phase;
        t->id = i;
        t->cpu = cfg.ncpus ? cfg.cpus[i % cfg.ncpus] : -1;
        t->rng[0] = ofl_rng_next(&seed);
        t->rng[1] = ofl_rng_next(&seed) | 1;
        t->warm_lo = (uint32_t)((uint64_t)cfg.keys * (uint64_t)i / (uint64_t)cfg.threads);
        t->warm_hi = (uint32_t)((uint64_t)cfg.keys * (uint64_t)(i + 1) / (uint64_t)cfg.threads);
        t->warm_next = t->warm_lo;
        t->conns = calloc((size_t)cfg.conns, sizeof *t->conns);
        if (!t->conns) return 1;
        for (int k = 0; k < cfg.conns; k++) {
            int rc = conn_open(&cfg, &t->conns[k], slots);
            if (rc) {
                fprintf(stderr, "kvs_loadgen: cannot connect to %s:%d: %s\n",
                        inet_ntoa(cfg.server.sin_addr), ntohs(cfg.server.sin_port),
                        strerror(-rc));
                return 1;
            }
        }
    }
    uint64_t w0 = ofl_now_ns();
    for (int i = 0; i < cfg.threads; i++)
        if (pthread_create(&ts[i].th, NULL, thread_main, &ts[i])) {
            fprintf(stderr, "kvs_loadgen: cannot start thread %d\n", i);
            return 1;
        }
    pthread_barrier_wait(&barrier);   /* warm-up done everywhere */
    double warm_s = (double)(ofl_now_ns() - w0) / 1e9;
    /* The warm-up may have used WARM_DEPTH slots (all free again now, the threads
     * wait at the barrier); a closed-loop run uses exactly `depth`. */
    if (cfg.mode == MODE_CLOSED)
        for (int i = 0; i < cfg.threads; i++)
            for (int k = 0; k < cfg.conns; k++) {
                struct conn *c = &ts[i].conns[k];
                c->nslots = (uint32_t)cfg.depth;
                c->nfree = 0;
                for (uint32_t s = c->nslots; s-- > 0;)
                    if (!c->slots[s].busy) c->free_slots[c->nfree++] = s;
            }
    atomic_store(&phase, PHASE_RUN);
    pthread_barrier_wait(&barrier);
    uint64_t start = ofl_now_ns(), end = start + (uint64_t)(cfg.duration * 1e9);
    if (cfg.progress) {
        uint64_t prev_ops = 0, prev_t = start;
        for (uint64_t tick = start + 1000000000ull; tick < end; tick += 1000000000ull) {
            nap_until(tick);
            uint64_t ops, hits, gets, errors, now = ofl_now_ns();
            sum_live(ts, cfg.threads, &ops, &hits, &gets, &errors);
            fprintf(stderr, "kvs_loadgen: %5.1f s  %10.0f ops/s  hit rate %.4f  errors %llu\n",
                    (double)(now - start) / 1e9,
                    (double)(ops - prev_ops) * 1e9 / (double)(now - prev_t),
                    gets ? (double)hits / (double)gets : 0.0, (unsigned long long)errors);
            prev_ops = ops;
            prev_t = now;
        }
    }
    for (int i = 0; i < cfg.threads; i++) pthread_join(ts[i].th, NULL);
    report(&cfg, ts, warm_s);
    for (int i = 0; i < cfg.threads; i++) {
        for (int k = 0; k < cfg.conns; k++) conn_close(&ts[i].conns[k]);
        free(ts[i].conns);
    }
    pthread_barrier_destroy(&barrier);
    free(ts);
    free(cdf);
    return 0;
}
