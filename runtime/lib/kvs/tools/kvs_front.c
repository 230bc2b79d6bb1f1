/* kvs_front: memcached over TCP on the host for a key-value store whose table is on a
 * remote device (docs/kvs.md#tcp, docs/remote.md). The TCP connections end here, in
 * the runtime's TCP engine (kvs_tcp.h: connections, pipelining, limits, memcached's
 * errors); each request it cuts from a connection is sent, whole, as one memcached
 * datagram to the run's UDP socket, so it goes through the program like any UDP
 * request (parse and steer by key on the host, the store on its remote device, the
 * reply back to the host's sink), and the reply's datagrams, joined in order, are
 * the connection's answer. One request is in flight at a time (one thread): a
 * connection's replies come back in its request order.
 *
 * usage: kvs_front --listen-fd N --udp-port P --runner-fd N --stats FILE
 *                  [--conns N] [--value-max B] [--datagram-max B] [--wait-ms MS]
 *   --listen-fd     the listening TCP socket (the runner's)
 *   --udp-port      the run's UDP port on 127.0.0.1
 *   --runner-fd     the runner's liveness pipe: its end stops this process
 *   --stats         where its counters go (JSON) when it stops
 *   --conns         connections at once (4096)
 *   --value-max     longest value taken (memcached's -I; longer: its "too large")
 *   --datagram-max  longest request datagram the program takes (its mtu less 42 B)
 *   --wait-ms       how long a request's answer is awaited (10000): then the
 *                   connection is closed and the request counted unanswered
 *
 * Stops on SIGTERM, SIGINT or the runner's end. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "offlow/kvs_tcp.h"
#include "offlow/mcjoin.h"
#include "offlow/mcproto.h"
#include "tool_io.h"

#define FRAME OFL_MC_UDP_HDR_LEN

/* The forwarder's state (one thread uses it). */
struct front {
    int udp;                       /* connected to the run's UDP port */
    int stop;                      /* readable once the front stops: no more waiting */
    uint16_t rid;                  /* the last request id used */
    size_t dgram_max;
    int wait_ms;
    uint64_t forwarded, unanswered, stale, too_long;
    uint8_t buf[65536];
    struct ofl_mcjoin join;        /* the reply being awaited */
};

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* Await the datagrams of request f->rid and append their payloads, in sequence
 * order, to `out`. Returns 0, -ETIMEDOUT, or another negative errno. */
static int await_reply(struct front *f, struct ofl_mc_out *out)
{
    long end = now_ms() + f->wait_ms;
    ofl_mcjoin_start(&f->join, f->rid);
    for (;;) {
        long left = end - now_ms();
        struct pollfd p[2] = {{.fd = f->udp, .events = POLLIN}, {.fd = f->stop, .events = POLLIN}};
        int n = left > 0 ? poll(p, 2, (int)left) : 0;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -ETIMEDOUT;
        if (p[1].revents) return -ECANCELED;
        ssize_t len = recv(f->udp, f->buf, sizeof f->buf, MSG_DONTWAIT);
        if (len < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return -errno;   /* ECONNREFUSED: the run's socket is gone */
        }
        int rc = ofl_mcjoin_take(&f->join, f->buf, (size_t)len);
        if (rc < 0) f->stale++;   /* an earlier request's late answer, or not an answer */
        if (rc > 0) return ofl_mcjoin_out(&f->join, out);
    }
}

/* Send `len` bytes of request as one datagram and append its answer to `out`.
 * Returns 0, or 1 when it got no answer (the connection is then closed: the client
 * sees it). */
static int round_trip(struct front *f, const uint8_t *raw, size_t len, struct ofl_mc_out *out)
{
    f->rid++;
    ofl_mc_udp_write(f->buf, f->rid, 0, 1);
    memmove(f->buf + FRAME, raw, len);
    if (send(f->udp, f->buf, FRAME + len, 0) < 0 || await_reply(f, out) < 0) {
        f->unanswered++;
        return 1;
    }
    f->forwarded++;
    return 0;
}

/* A text get, gets, gat or gats of several keys, one key at a time: the program steers
 * a request by its (first) key, so each key meets the store that holds it, and each
 * answer fits a datagram. The answers' values are joined under one END. */
static int multi_get(struct front *f, const uint8_t *raw, const struct ofl_mc_req *req,
                     struct ofl_mc_out *out)
{
    static const char end_line[] = "END\r\n";
    const size_t end_len = sizeof end_line - 1;
    uint8_t line[512];   /* the command's words before its keys (verb, exptime) and a key */
    size_t pre = (size_t)(req->keys - raw);
    const uint8_t *pos = req->keys, *stop = req->keys + req->keys_len, *key;
    uint32_t key_len;
    if (pre > sizeof line - OFL_MC_KEY_MAX - 2) return 1;   /* cannot be: parser's limits */
    memcpy(line, raw, pre);
    while (ofl_mc_next_key(&pos, stop, &key, &key_len)) {
        memcpy(line + pre, key, key_len);
        memcpy(line + pre + key_len, "\r\n", 2);
        size_t before = out->len;
        if (round_trip(f, line, pre + key_len + 2, out)) return 1;
        size_t got = out->len - before;
        if (got < end_len || memcmp(out->buf + out->len - end_len, end_line, end_len))
            return 0;   /* an error line answers the whole command, as memcached's */
        out->len -= end_len;
    }
    int rc = ofl_mc_out_reserve(out, end_len);
    if (rc) return rc;
    memcpy(out->buf + out->len, end_line, end_len);
    out->len += end_len;
    return 0;
}

/* ofl_kvs_tcp_forward_fn: send the request through the program, return its answer. */
static int forward(void *arg, const uint8_t *raw, size_t len, const struct ofl_mc_req *req,
                   struct ofl_mc_out *out)
{
    struct front *f = arg;
    if (req->cmd == OFL_MC_CMD_QUIT && req->proto == OFL_MC_TEXT) return 1;
    if (req->proto == OFL_MC_TEXT && req->nkeys > 1 &&
        (req->cmd == OFL_MC_CMD_GET || req->cmd == OFL_MC_CMD_GETS ||
         req->cmd == OFL_MC_CMD_GAT || req->cmd == OFL_MC_CMD_GATS))
        return multi_get(f, raw, req, out);
    if (FRAME + len > f->dgram_max || FRAME + len > sizeof f->buf) {
        f->too_long++;   /* the program would drop it: memcached's answer instead */
        return ofl_kv_exec_oom(req, 1, out) < 0 ? 1 : 0;
    }
    if (round_trip(f, raw, len, out)) return 1;
    return req->cmd == OFL_MC_CMD_QUIT;   /* binary QUIT: answered, then closed */
}

static int udp_to(int port)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) {
        perror("kvs_front: the run's UDP socket");
        exit(1);
    }
    return s;
}

static void write_stats(const char *path, const struct ofl_kvs_tcp_shared *sh,
                        const struct front *f)
{
    struct ofl_kvs_tcp_stats s;
    ofl_kvs_tcp_get_stats(sh, &s);
    FILE *o = fopen(path, "w");
    if (!o) {
        perror(path);
        exit(1);
    }
    fprintf(o, "{\"accepted\": %lu, \"refused\": %lu, \"closed\": %lu, \"open\": %lu, "
            "\"requests\": %lu, \"parse_errors\": %lu, \"bytes_read\": %lu, "
            "\"bytes_written\": %lu, \"oom\": %lu, \"cut\": %lu, \"forwarded\": %lu, "
            "\"unanswered\": %lu, \"stale\": %lu, \"too_long\": %lu}\n",
            (unsigned long)s.accepted, (unsigned long)s.refused, (unsigned long)s.closed,
            (unsigned long)s.curr, (unsigned long)s.requests, (unsigned long)s.parse_errors,
            (unsigned long)s.bytes_read, (unsigned long)s.bytes_written,
            (unsigned long)s.oom, (unsigned long)s.cut, (unsigned long)f->forwarded,
            (unsigned long)f->unanswered, (unsigned long)f->stale, (unsigned long)f->too_long);
    if (fclose(o)) {
        perror(path);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *T = "kvs_front", *stats = NULL;
    long listen_fd = -1, port = -1, runner = -1, conns = 4096, value_max = 1 << 20;
    long dgram_max = 65507, wait_ms = 10000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--listen-fd")) listen_fd = tool_number(T, v, 0, 1 << 20);
        else if (!strcmp(k, "--udp-port")) port = tool_number(T, v, 1, 65535);
        else if (!strcmp(k, "--runner-fd")) runner = tool_number(T, v, 0, 1 << 20);
        else if (!strcmp(k, "--stats")) stats = v;
        else if (!strcmp(k, "--conns")) conns = tool_number(T, v, 1, 1 << 20);
        else if (!strcmp(k, "--value-max")) value_max = tool_number(T, v, 1, 64L << 20);
        else if (!strcmp(k, "--datagram-max")) dgram_max = tool_number(T, v, 64, 65507);
        else if (!strcmp(k, "--wait-ms")) wait_ms = tool_number(T, v, 1, 600000);
        else {
            fprintf(stderr, "kvs_front: unknown option %s\n", k);
            return 2;
        }
    }
    if (argc % 2 == 0 || listen_fd < 0 || port < 0 || runner < 0 || !stats) {
        fprintf(stderr, "usage: kvs_front --listen-fd N --udp-port P --runner-fd N "
                        "--stats FILE [--conns N] [--value-max B] [--datagram-max B] "
                        "[--wait-ms MS]\n");
        return 2;
    }
    int sfd = tool_stop_signals();   /* before the server's thread: it inherits the mask */

    struct front *f = calloc(1, sizeof *f);
    struct ofl_kvs_tcp_shared *sh = calloc(1, sizeof *sh);
    if (!f || !sh || sfd < 0) {
        perror("kvs_front");
        return 1;
    }
    int stop[2];
    if (pipe2(stop, O_CLOEXEC)) {
        perror("kvs_front");
        return 1;
    }
    f->stop = stop[0];
    f->udp = udp_to((int)port);
    f->dgram_max = (size_t)dgram_max;
    f->wait_ms = (int)wait_ms;
    ofl_kvs_tcp_shared_init(sh, NULL, (uint32_t)value_max, (uint32_t)conns, NULL);
    sh->forward = forward;
    sh->forward_arg = f;
    struct ofl_kvs_tcp_server *srv;
    char err[256];
    int rc = ofl_kvs_tcp_server_start(&srv, sh, (int)listen_fd, 1, err);
    if (rc) {
        fprintf(stderr, "kvs_front: %s\n", err);
        return 1;
    }
    struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = (int)runner, .events = POLLIN}};
    while (poll(p, 2, -1) < 0 && errno == EINTR) {
    }
    if (write(stop[1], "", 1) != 1) perror("kvs_front: stop");   /* a wait ends now */
    ofl_kvs_tcp_server_stop(srv);
    write_stats(stats, sh, f);
    close(f->udp);
    free(f);
    free(sh);
    return 0;
}
