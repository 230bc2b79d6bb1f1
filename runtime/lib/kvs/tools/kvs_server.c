/* kvs_server: a CPU-only memcached-compatible key-value server (the "CPU-only"
 * design of the key-value store, and the peer the offload designs are tested with).
 *
 * usage: kvs_server [-l ADDR] [-p TCP_PORT] [-U UDP_PORT] [-t THREADS] [-c ITEMS]
 *                   [-m MEGABYTES] [-I VALUE_MAX] [--cpus LIST] [--idle-block-ms MS]
 *   -l      address to listen on (default 127.0.0.1)
 *   -p      TCP port (default 11211; 0: the kernel picks one)
 *   -U      UDP port (default: the TCP port; -1: no UDP)
 *   -t      worker threads (default 1)
 *   -c      most items (default 1,000,000)
 *   -m      most bytes of items, in MiB (default 1024; 0: no byte limit)
 *   -I      longest value in bytes (default 1 MiB)
 *   --cpus  CPUs to pin workers to, round robin (e.g. 0,1; default: not pinned)
 *   --idle-block-ms  after this long without any request a worker blocks in
 *           epoll_wait (100 ms at a time) instead of polling; 0 = always poll
 *           (default 50)
 *
 * Requests are parsed by mcproto (binary and text, per TCP connection decided by
 * its first byte, per UDP datagram by the first byte after the frame header) and
 * run by kvexec against one kvstore shared by all workers (striped locks).
 *
 * Each worker owns a TCP listening socket and a UDP socket bound to the same ports
 * with SO_REUSEPORT (the kernel spreads connections and datagram flows), its own
 * epoll set and its connections. UDP datagrams are read and answered in batches
 * (recvmmsg / sendmmsg); all replies to one datagram form one message, sent in
 * datagrams of at most 1400 bytes with the request's id, sequence numbers and
 * count in their frame headers. A datagram whose frame header is short or
 * announces several datagrams, or that ends inside a request, is dropped and
 * counted. TCP connections are served by the runtime's TCP engine (kvs_tcp.h:
 * pipelined requests answered in order, values up to -I, a connection limit,
 * memcached's errors and out-of-memory answers), inside each worker's epoll loop.
 * While busy, workers poll (epoll_wait with no timeout: bounded spin then
 * sched_yield); they block only after --idle-block-ms without work.
 *
 * Prints "ready tcp=PORT udp=PORT threads=N" once listening; stops on SIGTERM or
 * SIGINT (or when its parent dies) and prints one JSON line of counters. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "offlow/kvexec.h"
#include "offlow/kvs_tcp.h"
#include "offlow/kvstore.h"
#include "offlow/mcproto.h"
#include "offlow/thread.h"
#include "offlow/wait.h"
#include "tool_io.h"

#define UDP_BATCH 32
#define UDP_BUF 65536                 /* largest datagram read */
#define UDP_ROUNDS 4                  /* batches per readiness event, for fairness */
#define UDP_DIRECT 8                  /* direct UDP reads between two epoll_waits */
#define UDP_PAYLOAD (OFL_MC_UDP_DGRAM_MAX - OFL_MC_UDP_HDR_LEN)
#define SEND_SLICE 1024               /* sendmmsg's limit per call */
#define MAX_EVENTS 64
#define BUF_SHRINK (256u << 10)       /* an idle reply buffer above this is freed */
#define OUT_MAX (256u << 20)          /* most reply bytes of one UDP batch */
#define MAX_CPUS 64

/* The epoll tag of a worker's UDP socket (its TCP engine tags the rest). */
#define TAG_UDP ((void *)2)

struct server;

/* One reply message to one datagram: bytes [start, start + len) of the reply buffer. */
struct udp_reply {
    size_t start, len;
    uint16_t request_id;
    uint32_t msg;        /* index of the request datagram (its source address) */
};

struct worker {
    struct server *srv;
    int id, cpu, ep, lfd, ufd;
    pthread_t th;
    struct ofl_kvs_tcp_worker tcp;   /* its TCP listener and connections */
    /* UDP receive batch */
    struct mmsghdr rmsg[UDP_BATCH];
    struct iovec riov[UDP_BATCH];
    struct sockaddr_in raddr[UDP_BATCH];
    uint8_t *rbuf;
    /* UDP replies of one batch and the datagrams that carry them */
    struct ofl_mc_out uout;
    struct udp_reply *replies;
    size_t nreplies, replies_cap;
    struct mmsghdr *smsg;
    struct iovec *siov;
    uint8_t (*shdr)[OFL_MC_UDP_HDR_LEN];
    size_t send_cap;
    /* UDP counters (written by this worker only; read after it stopped) */
    uint64_t requests, parse_errors, udp_datagrams, udp_dropped, udp_send_dropped;
};

struct server {
    struct ofl_kv *kv;
    struct ofl_mc_limits lim;
    atomic_int stop;
    struct in_addr addr;
    int tcp_port, udp_port;       /* udp_port < 0: no UDP */
    int nworkers, idle_block_ms;
    int cpus[MAX_CPUS], ncpus;
    struct ofl_kvs_tcp_shared tcp;   /* the TCP engine's limits and counters */
    struct worker *w;
};

/* ---- sockets -------------------------------------------------------------------- */

static int bind_socket(int type, struct in_addr addr, int port)
{
    int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one)) goto fail;
    if (type == SOCK_DGRAM) {
        int sz = 4 << 20;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr = addr};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa)) goto fail;
    if (type == SOCK_STREAM && listen(fd, 1024)) goto fail;
    return fd;
fail:;
    int e = errno;
    close(fd);
    return -e;
}

static int bound_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len)) return -errno;
    return ntohs(sa.sin_port);
}

/* ---- UDP ------------------------------------------------------------------------ */

static int replies_push(struct worker *w, struct udp_reply r)
{
    if (w->nreplies == w->replies_cap) {
        size_t cap = w->replies_cap ? w->replies_cap * 2 : 64;
        struct udp_reply *p = realloc(w->replies, cap * sizeof *p);
        if (!p) return -1;
        w->replies = p;
        w->replies_cap = cap;
    }
    w->replies[w->nreplies++] = r;
    return 0;
}

static int send_reserve(struct worker *w, size_t n)
{
    if (n <= w->send_cap) return 0;
    size_t cap = w->send_cap ? w->send_cap : 64;
    while (cap < n) cap *= 2;
    struct mmsghdr *m = realloc(w->smsg, cap * sizeof *m);
    if (m) w->smsg = m;
    struct iovec *v = realloc(w->siov, 2 * cap * sizeof *v);
    if (v) w->siov = v;
    uint8_t(*h)[OFL_MC_UDP_HDR_LEN] = realloc(w->shdr, cap * sizeof *h);
    if (h) w->shdr = h;
    if (!m || !v || !h) return -1;
    w->send_cap = cap;
    return 0;
}

/* Run the requests of one datagram; their replies are appended to w->uout. */
static void udp_datagram(struct worker *w, uint32_t msg)
{
    const uint8_t *buf = w->rbuf + (size_t)msg * UDP_BUF;
    size_t len = w->rmsg[msg].msg_len;
    struct ofl_kv_udp_counts c = {0, 0, 0};
    size_t start = w->uout.len;
    w->udp_datagrams++;
    int id = -EINVAL;
    if (w->rmsg[msg].msg_hdr.msg_flags & MSG_TRUNC)
        c.dropped++;
    else
        id = ofl_kv_exec_udp(w->srv->kv, buf, len, &w->srv->lim, &w->uout, &c);
    w->requests += c.requests;
    w->parse_errors += c.parse_errors;
    w->udp_dropped += c.dropped;
    if (id >= 0 && w->uout.len > start &&
        replies_push(w, (struct udp_reply){start, w->uout.len - start, (uint16_t)id, msg}))
        w->uout.len = start;
}

/* Send every reply of the batch, split into datagrams. */
static void udp_send(struct worker *w)
{
    size_t n = 0;
    for (size_t i = 0; i < w->nreplies; i++) {
        struct udp_reply *r = &w->replies[i];
        size_t count = (r->len + UDP_PAYLOAD - 1) / UDP_PAYLOAD;
        if (count > UINT16_MAX || send_reserve(w, n + count)) {
            w->udp_send_dropped++;
            continue;
        }
        for (size_t k = 0; k < count; k++, n++) {
            size_t off = k * UDP_PAYLOAD;
            size_t part = r->len - off < UDP_PAYLOAD ? r->len - off : UDP_PAYLOAD;
            ofl_mc_udp_write(w->shdr[n], r->request_id, (uint16_t)k, (uint16_t)count);
            w->siov[2 * n] = (struct iovec){w->shdr[n], OFL_MC_UDP_HDR_LEN};
            w->siov[2 * n + 1] = (struct iovec){w->uout.buf + r->start + off, part};
            struct msghdr *m = &w->smsg[n].msg_hdr;
            memset(m, 0, sizeof *m);
            m->msg_name = &w->raddr[r->msg];
            m->msg_namelen = w->rmsg[r->msg].msg_hdr.msg_namelen;
            m->msg_iov = &w->siov[2 * n];
            m->msg_iovlen = 2;
        }
    }
    for (size_t sent = 0; sent < n;) {
        unsigned slice = n - sent < SEND_SLICE ? (unsigned)(n - sent) : SEND_SLICE;
        int k = sendmmsg(w->ufd, w->smsg + sent, slice, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {   /* socket buffer full or an error: the rest is lost, as UDP */
            w->udp_send_dropped += n - sent;
            break;
        }
        sent += (size_t)k;
    }
    w->nreplies = 0;
    w->uout.len = 0;
    if (w->uout.cap > BUF_SHRINK) ofl_mc_out_free(&w->uout);
}

/* Read and answer one batch. Returns the datagrams read (0: none waiting). */
static int udp_batch(struct worker *w)
{
    for (int i = 0; i < UDP_BATCH; i++) {
        w->riov[i] = (struct iovec){w->rbuf + (size_t)i * UDP_BUF, UDP_BUF};
        struct msghdr *m = &w->rmsg[i].msg_hdr;
        memset(m, 0, sizeof *m);
        m->msg_name = &w->raddr[i];
        m->msg_namelen = sizeof w->raddr[i];
        m->msg_iov = &w->riov[i];
        m->msg_iovlen = 1;
    }
    int n = recvmmsg(w->ufd, w->rmsg, UDP_BATCH, MSG_DONTWAIT, NULL);
    if (n <= 0) return 0;
    for (int i = 0; i < n; i++) udp_datagram(w, (uint32_t)i);
    udp_send(w);
    return n;
}

/* ---- workers -------------------------------------------------------------------- */

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct server *srv = w->srv;
    if (w->cpu >= 0) ofl_pin_self(w->cpu);
    struct epoll_event evs[MAX_EVENTS];
    uint64_t idle_ns = (uint64_t)srv->idle_block_ms * 1000000ull;
    uint64_t idle_since = 0;   /* 0: busy; the clock is read only while idle */
    int blocking = 0, udp_hot = 0;
    uint32_t spins = 0, direct = 0;
    while (!atomic_load_explicit(&srv->stop, memory_order_relaxed)) {
        /* While datagrams keep coming, read them without asking epoll first (one
         * syscall less per batch); epoll still runs every UDP_DIRECT rounds. */
        if (udp_hot && direct < UDP_DIRECT) {
            direct++;
            if (udp_batch(w) > 0) {
                spins = 0;
                idle_since = 0;
                continue;
            }
            udp_hot = 0;
        }
        direct = 0;
        int n = epoll_wait(w->ep, evs, MAX_EVENTS, blocking ? 100 : 0);
        if (n <= 0) {
            if (blocking) continue;
            uint64_t now = ofl_now_ns();
            if (!idle_since) idle_since = now;
            if (idle_ns && now - idle_since > idle_ns) {
                blocking = 1;   /* long idle: off the hot path, wait in the kernel */
                continue;
            }
            ofl_spin_pause(&spins);
            continue;
        }
        spins = 0;
        idle_since = 0;
        blocking = 0;
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == TAG_UDP) {
                for (int k = 0; k < UDP_ROUNDS && udp_batch(w) == UDP_BATCH; k++) {}
                udp_hot = 1;
            } else {
                ofl_kvs_tcp_worker_event(&w->tcp, tag, evs[i].events);
            }
        }
    }
    return NULL;
}

static int worker_setup(struct worker *w)
{
    struct server *srv = w->srv;
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    if (w->ep < 0) return -errno;
    w->lfd = bind_socket(SOCK_STREAM, srv->addr, srv->tcp_port);
    if (w->lfd < 0) return w->lfd;
    if (srv->tcp_port == 0) srv->tcp_port = bound_port(w->lfd);
    if (srv->udp_port == 0) srv->udp_port = srv->tcp_port;
    int rc = ofl_kvs_tcp_worker_init(&w->tcp, &srv->tcp, w->ep, w->lfd);
    if (rc) return rc;
    struct epoll_event ev;
    w->ufd = -1;
    if (srv->udp_port > 0) {
        w->ufd = bind_socket(SOCK_DGRAM, srv->addr, srv->udp_port);
        if (w->ufd < 0) return w->ufd;
        w->rbuf = malloc((size_t)UDP_BATCH * UDP_BUF);
        if (!w->rbuf) return -ENOMEM;
        w->uout.max = OUT_MAX;
        ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = TAG_UDP};
        if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->ufd, &ev)) return -errno;
    }
    return 0;
}

/* Close the worker's sockets and every connection still in its epoll set. */
static void worker_teardown(struct worker *w)
{
    if (w->tcp.sh) ofl_kvs_tcp_worker_fini(&w->tcp);
    if (w->lfd >= 0) close(w->lfd);
    if (w->ufd >= 0) close(w->ufd);
    if (w->ep >= 0) close(w->ep);
    free(w->rbuf);
    ofl_mc_out_free(&w->uout);
    free(w->replies);
    free(w->smsg);
    free(w->siov);
    free(w->shdr);
}

/* What "stats" reports about the server. */
static void server_stats(void *arg, struct ofl_kv_server_stats *s)
{
    const struct server *srv = arg;
    ofl_kvs_tcp_server_stats(&srv->tcp, s);
    s->threads = (uint64_t)srv->nworkers;
    s->tcp_port = (uint32_t)srv->tcp_port;
    s->udp_port = srv->udp_port > 0 ? (uint32_t)srv->udp_port : 0;
    s->value_max = srv->lim.value_max;
}

/* ---- main ----------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: kvs_server [-l ADDR] [-p TCP_PORT] [-U UDP_PORT] [-t THREADS] "
                    "[-c ITEMS] [-m MEGABYTES] [-I VALUE_MAX] [--cpus LIST] "
                    "[--idle-block-ms MS]\n");
    exit(2);
}

static long num_arg(const char *s, long lo, long hi)
{
    return tool_number("kvs_server", s, lo, hi);
}

static void parse_args(int argc, char **argv, struct server *srv, struct ofl_kv_config *cfg)
{
    static const struct option opts[] = {{"cpus", required_argument, NULL, 'C'},
                                         {"idle-block-ms", required_argument, NULL, 'B'},
                                         {NULL, 0, NULL, 0}};
    int udp_set = 0, c;
    while ((c = getopt_long(argc, argv, "l:p:U:t:c:m:I:", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (inet_pton(AF_INET, optarg, &srv->addr) != 1) {
                fprintf(stderr, "kvs_server: bad IPv4 address '%s'\n", optarg);
                exit(2);
            }
            break;
        case 'p': srv->tcp_port = (int)num_arg(optarg, 0, 65535); break;
        case 'U': srv->udp_port = (int)num_arg(optarg, -1, 65535); udp_set = 1; break;
        case 't': srv->nworkers = (int)num_arg(optarg, 1, 256); break;
        case 'c': cfg->capacity = (uint64_t)num_arg(optarg, 1, 1L << 31); break;
        case 'm': cfg->mem_bytes = (uint64_t)num_arg(optarg, 0, 1L << 20) << 20; break;
        case 'I': cfg->value_max = (uint32_t)num_arg(optarg, 1, 256L << 20); break;
        case 'B': srv->idle_block_ms = (int)num_arg(optarg, 0, 1000000); break;
        case 'C': {
            char *save = NULL, *list = strdup(optarg);
            for (char *t = strtok_r(list, ",", &save); t && srv->ncpus < MAX_CPUS;
                 t = strtok_r(NULL, ",", &save))
                srv->cpus[srv->ncpus++] = (int)num_arg(t, 0, 4095);
            free(list);
            break;
        }
        default: usage();
        }
    }
    if (optind != argc) usage();
    if (!udp_set) srv->udp_port = srv->tcp_port;   /* 0 stays 0: same as the TCP port */
}

int main(int argc, char **argv)
{
    struct server srv = {.tcp_port = 11211, .nworkers = 1, .idle_block_ms = 50};
    srv.addr.s_addr = htonl(INADDR_LOOPBACK);
    struct ofl_kv_config cfg = {.capacity = 1000000, .mem_bytes = 1024ull << 20,
                                .value_max = OFL_MC_VALUE_MAX_DEFAULT};
    parse_args(argc, argv, &srv, &cfg);
    srv.lim = ofl_mc_default_limits();
    srv.lim.value_max = cfg.value_max;
    atomic_init(&srv.stop, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);

    int rc = ofl_kv_create(&srv.kv, &cfg);
    struct ofl_kv_env env = {.server_stats = server_stats, .arg = &srv, .started_s = ofl_kv_now_s()};
    ofl_kvs_tcp_shared_init(&srv.tcp, srv.kv, cfg.value_max, 0, &env);
    if (rc) {
        fprintf(stderr, "kvs_server: cannot create the store (%s): -c %llu -m %llu MiB "
                        "-I %u\n", strerror(-rc), (unsigned long long)cfg.capacity,
                (unsigned long long)(cfg.mem_bytes >> 20), cfg.value_max);
        return 1;
    }
    /* Signals are read from a signalfd by this thread; workers never see them. */
    int sfd = tool_stop_signals();

    srv.w = calloc((size_t)srv.nworkers, sizeof *srv.w);
    if (!srv.w || sfd < 0) {
        fprintf(stderr, "kvs_server: out of memory\n");
        return 1;
    }
    for (int i = 0; i < srv.nworkers; i++) {
        struct worker *w = &srv.w[i];
        w->srv = &srv;
        w->id = i;
        w->ep = w->lfd = w->ufd = -1;
        w->cpu = srv.ncpus ? srv.cpus[i % srv.ncpus] : -1;
        rc = worker_setup(w);
        if (rc) {
            fprintf(stderr, "kvs_server: cannot listen on %s tcp %d udp %d: %s\n",
                    inet_ntoa(srv.addr), srv.tcp_port, srv.udp_port, strerror(-rc));
            return 1;
        }
    }
    for (int i = 0; i < srv.nworkers; i++) {
        if (pthread_create(&srv.w[i].th, NULL, worker_main, &srv.w[i])) {
            fprintf(stderr, "kvs_server: cannot start worker %d\n", i);
            return 1;
        }
    }
    printf("ready tcp=%d udp=%d threads=%d\n", srv.tcp_port, srv.udp_port, srv.nworkers);
    fflush(stdout);

    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) < 0 && errno == EINTR) {}
    atomic_store(&srv.stop, 1);

    uint64_t requests = 0, perr = 0, dgrams = 0, dropped = 0, sdropped = 0;
    for (int i = 0; i < srv.nworkers; i++) {
        struct worker *w = &srv.w[i];
        pthread_join(w->th, NULL);
        requests += w->requests;
        perr += w->parse_errors;
        dgrams += w->udp_datagrams;
        dropped += w->udp_dropped;
        sdropped += w->udp_send_dropped;
        worker_teardown(w);
    }
    struct ofl_kvs_tcp_stats ts;
    ofl_kvs_tcp_get_stats(&srv.tcp, &ts);
    struct ofl_kv_stats st;
    ofl_kv_get_stats(srv.kv, &st);
    printf("{\"requests\": %llu, \"parse_errors\": %llu, \"udp_datagrams\": %llu, "
           "\"udp_dropped\": %llu, \"udp_send_dropped\": %llu, \"tcp_accepted\": %llu, "
           "\"tcp_refused\": %llu, \"tcp_oom\": %llu, \"items\": %llu, \"bytes\": %llu, "
           "\"gets\": %llu, \"hits\": %llu, \"stores\": %llu, \"deletes\": %llu, "
           "\"evictions\": %llu, \"expired\": %llu}\n",
           (unsigned long long)(requests + ts.requests),
           (unsigned long long)(perr + ts.parse_errors), (unsigned long long)dgrams,
           (unsigned long long)dropped, (unsigned long long)sdropped,
           (unsigned long long)ts.accepted, (unsigned long long)ts.refused,
           (unsigned long long)ts.oom,
           (unsigned long long)st.items, (unsigned long long)st.bytes,
           (unsigned long long)st.gets, (unsigned long long)st.hits,
           (unsigned long long)st.stores, (unsigned long long)st.deletes,
           (unsigned long long)st.evictions, (unsigned long long)st.expired);
    fflush(stdout);
    free(srv.w);
    ofl_kv_destroy(srv.kv);
    close(sfd);
    return 0;
}
