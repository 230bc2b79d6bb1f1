/* memcached over TCP served straight from a key-value store (kvstore.h).
 *
 * Each connection's byte stream is cut into requests with the memcached parser
 * (mcproto.h; the protocol is fixed by the connection's first byte, as memcached
 * does), and every request is run against the store (kvexec.h) as soon as it is
 * complete, its reply appended to the connection's output: clients that pipeline
 * (many requests written before any reply is read) get their replies in request
 * order. Requests of any size up to the store's value limit (memcached's -I, 1 MiB
 * by default) are taken: the input buffer grows to hold one request.
 *
 * Bounded: at most max_conns connections over all threads (more are accepted and
 * closed at once, counted); a connection whose unsent replies pass out_high is not
 * read until they drain (a slow reader holds up only itself); one request's reply
 * of at most out_max bytes.
 *
 * Out of memory while serving gives memcached's answers, never a crash: a request
 * whose bytes cannot be buffered is answered "SERVER_ERROR out of memory storing
 * object" (binary: status ENOMEM) and skipped as it arrives; a reply that cannot be
 * built becomes "SERVER_ERROR out of memory writing get response" (a get) or
 * "SERVER_ERROR out of memory" (binary: ENOMEM), and what it had written is taken
 * back; a connection that cannot even say that, or cannot be set up, is closed.
 * Every such event is counted (oom).
 *
 * Two ways to run it: a worker inside a caller's epoll loop (the caller registers
 * nothing itself: ofl_kvs_tcp_worker_init adds the listening socket; every event
 * whose data.ptr is not the caller's own goes to ofl_kvs_tcp_worker_event), or a
 * server with threads of its own that block in epoll_wait (ofl_kvs_tcp_server_start:
 * an I/O server, not a hand-off between cores). */
#ifndef OFL_KVS_TCP_H
#define OFL_KVS_TCP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "offlow/kvexec.h"
#include "offlow/kvstore.h"
#include "offlow/mcproto.h"

/* Default limits. */
#define OFL_KVS_TCP_MAX_CONNS 4096u
#define OFL_KVS_TCP_OUT_HIGH (4u << 20)     /* unsent replies before reading pauses */
#define OFL_KVS_TCP_OUT_MAX (64u << 20)     /* one request's reply, at most */
#define OFL_KVS_TCP_THREADS_MAX 64u

/* Counters of one server (all its threads), updated atomically. */
struct ofl_kvs_tcp_stats {
    uint64_t accepted;       /* connections accepted */
    uint64_t refused;        /* closed at once: over max_conns, or no memory for them */
    uint64_t closed;         /* closed, for any reason (refused ones not included) */
    uint64_t curr;           /* open now */
    uint64_t requests;       /* requests run */
    uint64_t parse_errors;   /* requests answered with a protocol error */
    uint64_t bytes_read, bytes_written;
    uint64_t oom;            /* requests or replies answered "out of memory" */
    uint64_t cut;            /* connections the client closed in the middle of a request
                                (the partial request dropped) */
};

/* Runs one request somewhere else instead of against a store (a forwarding server:
 * the key-value store on a remote device, kvs_front.c): `raw`, `len` are the request's
 * bytes as the client sent them, `req` as parsed; the reply is appended to `out`.
 * Returns as ofl_kv_exec: 0, 1 (close the connection after the output), or a
 * negative errno (answered as out of memory). */
typedef int (*ofl_kvs_tcp_forward_fn)(void *arg, const uint8_t *raw, size_t len,
                                      const struct ofl_mc_req *req, struct ofl_mc_out *out);

/* What every thread of one server shares. */
struct ofl_kvs_tcp_shared {
    struct ofl_kv *kv;
    struct ofl_mc_limits lim;    /* value_max: the store's -I; line_max */
    uint32_t max_conns;          /* over all threads */
    size_t out_high, out_max;
    struct ofl_kv_env env;       /* for stats (its server_stats may be NULL) */
    ofl_kvs_tcp_forward_fn forward;  /* set: requests go to it, not to kv (then one
                                        thread serves: it is called from that one) */
    void *forward_arg;
    _Atomic uint64_t accepted, refused, closed, curr, requests, parse_errors;
    _Atomic uint64_t bytes_read, bytes_written, oom, cut;
};

/* Set up `sh` for store `kv` with values of at most `value_max` bytes (0: 1 MiB),
 * at most `max_conns` connections (0: OFL_KVS_TCP_MAX_CONNS), the default buffer
 * limits, and the environment `env` for stats (NULL: none). */
void ofl_kvs_tcp_shared_init(struct ofl_kvs_tcp_shared *sh, struct ofl_kv *kv,
                             uint32_t value_max, uint32_t max_conns,
                             const struct ofl_kv_env *env);

/* The counters so far. */
void ofl_kvs_tcp_get_stats(const struct ofl_kvs_tcp_shared *sh, struct ofl_kvs_tcp_stats *s);

/* Fill the connection and byte figures of `s` (what "stats" reports, kvexec.h) from
 * the counters so far. */
void ofl_kvs_tcp_server_stats(const struct ofl_kvs_tcp_shared *sh, struct ofl_kv_server_stats *s);

struct ofl_kvs_tcp_conn;

/* One thread's connections, in that thread's epoll set. */
struct ofl_kvs_tcp_worker {
    struct ofl_kvs_tcp_shared *sh;
    int ep, listen_fd;
    struct ofl_kvs_tcp_conn *conns;
};

/* Serve the listening socket `listen_fd` (made non-blocking; not closed here; other
 * threads may serve it too) from epoll set `ep`: registered with data.ptr = w.
 * Returns 0 or a negative errno (epoll_ctl). */
int ofl_kvs_tcp_worker_init(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_shared *sh,
                            int ep, int listen_fd);

/* Handle one epoll event whose data.ptr is `ptr` (w itself: the listening socket;
 * else one of w's connections) and `events`. */
void ofl_kvs_tcp_worker_event(struct ofl_kvs_tcp_worker *w, void *ptr, uint32_t events);

/* Close every connection of w (its epoll set and the listening socket stay). */
void ofl_kvs_tcp_worker_fini(struct ofl_kvs_tcp_worker *w);

/* A server with threads of its own. */
struct ofl_kvs_tcp_server;

/* Serve `listen_fd` (a listening TCP socket) from `threads` threads (1..64) sharing
 * `sh` (initialized, outliving the server). Returns 0 and sets *out (NULL on
 * failure), or a negative errno with a message in `errbuf` (256 bytes): -EINVAL
 * (not a listening TCP socket, bad thread count), -ENOMEM, or a system error. */
int ofl_kvs_tcp_server_start(struct ofl_kvs_tcp_server **out, struct ofl_kvs_tcp_shared *sh,
                             int listen_fd, unsigned threads, char *errbuf);

/* Stop the threads, close every connection, free the server (NULL is fine). The
 * listening socket is not closed. */
void ofl_kvs_tcp_server_stop(struct ofl_kvs_tcp_server *s);

#endif
