/* udp_echo: the ceiling of `offlow bench kvs` (the most any server can answer through
 * the kernel's UDP sockets here): every datagram is sent back to its sender as it
 * came, read and written in batches (recvmmsg / sendmmsg), nothing parsed.
 *
 * usage: udp_echo [-l ADDR] [-p PORT] [-t THREADS] [--cpus LIST] [--batch N]
 *   -p      UDP port (0: the kernel picks one; default 0)
 *   -t      threads, each with its own socket on the port (SO_REUSEPORT; default 1)
 *   --cpus  CPUs to pin the threads to, round robin (default: not pinned)
 *   --batch datagrams per recvmmsg / sendmmsg (default 32, at most 64)
 *
 * Threads poll their socket (non-blocking recvmmsg; a bounded spin, then sched_yield,
 * as offlow's cores and kvs_server's workers do). Prints "ready udp=PORT threads=N";
 * stops on SIGTERM or SIGINT (or when its parent dies) and prints a JSON line of
 * counters. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "offlow/thread.h"
#include "offlow/wait.h"
#include "tool_io.h"

#define BATCH_MAX 64
#define DGRAM_MAX 65536
#define MAX_THREADS 64

struct echo {
    int fd, cpu, batch;
    atomic_int *stop;
    pthread_t th;
    uint64_t datagrams, send_failed;
    struct mmsghdr m[BATCH_MAX];
    struct iovec v[BATCH_MAX];
    struct sockaddr_in from[BATCH_MAX];
    uint8_t *buf;
};

static void *serve(void *arg)
{
    struct echo *e = arg;
    if (e->cpu >= 0) ofl_pin_self(e->cpu);
    uint32_t idle = 0;
    while (!atomic_load_explicit(e->stop, memory_order_relaxed)) {
        for (int i = 0; i < e->batch; i++) {
            e->v[i] = (struct iovec){e->buf + (size_t)i * DGRAM_MAX, DGRAM_MAX};
            memset(&e->m[i], 0, sizeof e->m[i]);
            e->m[i].msg_hdr.msg_name = &e->from[i];
            e->m[i].msg_hdr.msg_namelen = sizeof e->from[i];
            e->m[i].msg_hdr.msg_iov = &e->v[i];
            e->m[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(e->fd, e->m, (unsigned)e->batch, MSG_DONTWAIT, NULL);
        if (n <= 0) {
            ofl_spin_pause(&idle);
            continue;
        }
        idle = 0;
        for (int i = 0; i < n; i++) e->v[i].iov_len = e->m[i].msg_len;   /* as it came */
        for (int sent = 0; sent < n;) {
            int k = sendmmsg(e->fd, e->m + sent, (unsigned)(n - sent), MSG_DONTWAIT);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {   /* no room: the rest is lost, as UDP */
                e->send_failed += (uint64_t)(n - sent);
                break;
            }
            sent += k;
        }
        e->datagrams += (uint64_t)n;
    }
    return NULL;
}

static long num(const char *s, long lo, long hi)
{
    return tool_number("udp_echo", s, lo, hi);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"cpus", 1, NULL, 'C'}, {"batch", 1, NULL, 'B'},
                                         {NULL, 0, NULL, 0}};
    struct in_addr addr = {htonl(INADDR_LOOPBACK)};
    int port = 0, nthreads = 1, batch = 32, cpus[MAX_THREADS], ncpus = 0, c;
    while ((c = getopt_long(argc, argv, "l:p:t:", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (inet_pton(AF_INET, optarg, &addr) != 1) return fprintf(stderr, "bad -l\n"), 2;
            break;
        case 'p': port = (int)num(optarg, 0, 65535); break;
        case 't': nthreads = (int)num(optarg, 1, MAX_THREADS); break;
        case 'B': batch = (int)num(optarg, 1, BATCH_MAX); break;
        case 'C': {
            char *save = NULL, *list = strdup(optarg);
            for (char *t = strtok_r(list, ",", &save); t && ncpus < MAX_THREADS;
                 t = strtok_r(NULL, ",", &save))
                cpus[ncpus++] = (int)num(t, 0, 4095);
            free(list);
            break;
        }
        default:
            fprintf(stderr, "usage: udp_echo [-l ADDR] [-p PORT] [-t THREADS] [--cpus LIST] "
                            "[--batch N]\n");
            return 2;
        }
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    int sfd = tool_stop_signals();
    atomic_int stop;
    atomic_init(&stop, 0);
    struct echo *es = calloc((size_t)nthreads, sizeof *es);
    if (!es || sfd < 0) return fprintf(stderr, "udp_echo: out of memory\n"), 1;
    for (int i = 0; i < nthreads; i++) {
        struct echo *e = &es[i];
        e->stop = &stop;
        e->batch = batch;
        e->cpu = ncpus ? cpus[i % ncpus] : -1;
        e->buf = malloc((size_t)BATCH_MAX * DGRAM_MAX);
        e->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int one = 1, sz = 4 << 20;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr = addr};
        if (!e->buf || e->fd < 0 ||
            setsockopt(e->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) ||
            setsockopt(e->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz) ||
            setsockopt(e->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz) ||
            bind(e->fd, (struct sockaddr *)&sa, sizeof sa)) {
            fprintf(stderr, "udp_echo: cannot bind UDP port %d: %s\n", port, strerror(errno));
            return 1;
        }
        if (port == 0) {
            socklen_t len = sizeof sa;
            getsockname(e->fd, (struct sockaddr *)&sa, &len);
            port = ntohs(sa.sin_port);
        }
    }
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&es[i].th, NULL, serve, &es[i]))
            return fprintf(stderr, "udp_echo: cannot start thread %d\n", i), 1;
    printf("ready udp=%d threads=%d\n", port, nthreads);
    fflush(stdout);
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) < 0 && errno == EINTR) {}
    atomic_store(&stop, 1);
    uint64_t dgrams = 0, failed = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(es[i].th, NULL);
        dgrams += es[i].datagrams;
        failed += es[i].send_failed;
        close(es[i].fd);
        free(es[i].buf);
    }
    printf("{\"datagrams\": %llu, \"send_failed\": %llu}\n", (unsigned long long)dgrams,
           (unsigned long long)failed);
    free(es);
    close(sfd);
    return 0;
}
