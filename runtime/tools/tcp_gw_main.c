/* offlow-tcp-gw: memcached over TCP in front of a memcached UDP server (tcp_gw.h).
 *
 * usage: offlow-tcp-gw (--listen-fd N | --port P) --udp-port P [--max-conns N]
 *                      [--max-request B] [--timeout-ms MS] [--reply-max B]
 *                      [--stats PATH] [--runner-fd N]
 *   --listen-fd  a listening TCP socket to serve (the runner binds it)
 *   --port       or listen on 127.0.0.1:P itself (0: a free port)
 *   --udp-port   the server's UDP port on 127.0.0.1
 *   --stats      where to write the counters as JSON at exit (default: stdout)
 *   --runner-fd  the runner's liveness pipe (lifeline.h)
 *
 * Prints "ready tcp=PORT" when serving; stops on SIGTERM or SIGINT (or when the
 * runner exits: then it removes its counters and their run folder once written)
 * and writes one JSON object of counters. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "offlow/lifeline.h"
#include "offlow/tcp_gw.h"

static int usage(const char *why)
{
    fprintf(stderr, "offlow-tcp-gw: %s\nusage: offlow-tcp-gw (--listen-fd N | --port P) "
            "--udp-port P [--max-conns N] [--max-request B] [--timeout-ms MS] "
            "[--reply-max B] [--stats PATH] [--runner-fd N]\n", why);
    return 2;
}

static int number(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

static void write_stats(FILE *f, const struct ofl_tcp_gw_stats *s, uint32_t open)
{
    fprintf(f, "{\"accepted\": %" PRIu64 ", \"refused\": %" PRIu64 ", \"closed\": %" PRIu64
            ", \"open\": %u, \"conn_errors\": %" PRIu64 ", \"requests\": %" PRIu64
            ", \"replies\": %" PRIu64 ", \"multi_datagram_replies\": %" PRIu64
            ", \"answered_here\": %" PRIu64 ", \"too_large\": %" PRIu64
            ", \"timeouts\": %" PRIu64 ", \"reply_too_large\": %" PRIu64
            ", \"stray_datagrams\": %" PRIu64 ", \"bad_datagrams\": %" PRIu64
            ", \"send_errors\": %" PRIu64 "}\n",
            s->accepted, s->refused, s->closed, open, s->conn_errors, s->requests, s->replies,
            s->multi, s->answered, s->too_large, s->timeouts, s->reply_too_large, s->stray,
            s->bad_dgrams, s->send_errors);
}

int main(int argc, char **argv)
{
    struct ofl_tcp_gw_config cfg = {.listen_fd = -1, .server_addr = 0x7F000001u};
    long listen_port = -1, runner_fd = -1;
    const char *stats = NULL;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (i + 1 >= argc) return usage("every option takes a value");
        const char *v = argv[++i];
        long x;
        if (!strcmp(k, "--stats")) {
            stats = v;
            continue;
        }
        if (number(v, 0, 65535 * 1024L, &x) < 0) return usage("bad number");
        if (!strcmp(k, "--listen-fd")) cfg.listen_fd = (int)x;
        else if (!strcmp(k, "--port") && x <= 65535) listen_port = x;
        else if (!strcmp(k, "--udp-port") && x <= 65535) cfg.server_port = (uint16_t)x;
        else if (!strcmp(k, "--max-conns")) cfg.max_conns = (uint32_t)x;
        else if (!strcmp(k, "--max-request")) cfg.max_request = (uint32_t)x;
        else if (!strcmp(k, "--timeout-ms")) cfg.timeout_ms = (uint32_t)x;
        else if (!strcmp(k, "--reply-max")) cfg.reply_max = (uint32_t)x;
        else if (!strcmp(k, "--runner-fd")) runner_fd = x;
        else return usage("unknown option or value out of range");
    }
    if ((cfg.listen_fd < 0) == (listen_port < 0)) return usage("give --listen-fd or --port");
    /* one descriptor per connection: take what the hard limit allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (listen_port >= 0) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)listen_port);
        a.sin_addr.s_addr = htonl(0x7F000001u);
        int one = 1;
        cfg.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (cfg.listen_fd < 0 ||
            setsockopt(cfg.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            bind(cfg.listen_fd, (struct sockaddr *)&a, sizeof a) < 0 ||
            listen(cfg.listen_fd, 1024) < 0) {
            fprintf(stderr, "offlow-tcp-gw: cannot listen on 127.0.0.1:%ld: %s\n", listen_port,
                    strerror(errno));
            return 1;
        }
    }
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    memset(&me, 0, sizeof me);
    getsockname(cfg.listen_fd, (struct sockaddr *)&me, &ml);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "offlow-tcp-gw: signalfd: %s\n", strerror(errno));
        return 1;
    }
    /* After the signals are blocked: a runner gone is a SIGTERM on the signalfd. */
    struct ofl_lifeline life;
    if (ofl_lifeline_start(&life, (int)runner_fd, NULL, NULL, stats) < 0) {
        fprintf(stderr, "offlow-tcp-gw: --runner-fd is not a pipe\n");
        return 1;
    }
    char err[256] = "";
    struct ofl_tcp_gw *gw;
    int rc = ofl_tcp_gw_create(&gw, &cfg, err);
    if (rc < 0) {
        fprintf(stderr, "offlow-tcp-gw: %s\n", err);
        return 1;
    }
    printf("ready tcp=%u\n", ntohs(me.sin_port));
    fflush(stdout);
    rc = ofl_tcp_gw_run(gw, sfd);
    struct ofl_tcp_gw_stats st;
    uint32_t open;
    ofl_tcp_gw_get_stats(gw, &st, &open);
    ofl_tcp_gw_destroy(gw);
    FILE *f = stats ? fopen(stats, "w") : stdout;
    if (!f) {
        fprintf(stderr, "offlow-tcp-gw: cannot write %s: %s\n", stats, strerror(errno));
        return 1;
    }
    write_stats(f, &st, open);
    if (f != stdout) fclose(f);
    ofl_lifeline_finish(&life);
    if (rc < 0) {
        fprintf(stderr, "offlow-tcp-gw: epoll: %s\n", strerror(-rc));
        return 1;
    }
    return 0;
}
