/* Executing parsed memcached requests against the key-value store.
 *
 * The glue between offlow/mcproto.h (parsing, reply formats) and offlow/kvstore.h
 * (the table): one call runs one request and appends its reply, in the request's
 * protocol, to a growable output buffer. GET replies are written around the value
 * that the store copies straight into the output buffer (one copy per value).
 *
 * Replies follow memcached 1.6.18, command by command (the interop replay in
 * offlow/kvs/interop.py compares them with a real memcached's): binary GETQ/GETKQ/
 * GATQ say nothing on a miss, other quiet opcodes nothing on success; a miss of
 * GETK/GATK carries the key; text "noreply" silences the reply. ADD of a present key
 * is EXISTS (binary) or NOT_STORED (text); REPLACE of a missing key NOT_FOUND
 * (binary) or NOT_STORED (text); APPEND/PREPEND of a missing key (or past the value
 * limit) NOT_STORED; a CAS mismatch EXISTS and a CAS on a missing key NOT_FOUND.
 * incr/decr answer the new value (binary: 8 bytes; a miss creates the item with
 * `initial` unless the expiry is 0xffffffff), touch TOUCHED, flush_all OK,
 * verbosity OK, shutdown "ERROR: shutdown not enabled" (memcached's default).
 * The meta commands answer HD / VA / EN / NS / EX / NF / MN with the flags the
 * request asked for, in its order (mg: v s t c f l h k O, and W Z X of the
 * stale-while-revalidate scheme; ms, md, ma: their flags), q silencing the usual
 * answer (mg: EN; ms, md, ma: HD). stats answers memcached's counters that apply
 * (pid, uptime, time, version, rusage, commands, hits and misses, items, bytes,
 * evictions; the server's connections and bytes through ofl_kv_env), "stats
 * reset" RESET and "stats settings" the settings that apply; other groups are
 * answered as unknown (ERROR; binary: Not found). */
#ifndef OFL_KVEXEC_H
#define OFL_KVEXEC_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/kvstore.h"
#include "offlow/mcproto.h"

/* What VERSION answers. */
#define OFL_KVS_VERSION "0.1.0-offlow"

/* What the server around the store reports in "stats" (all may stay 0). */
struct ofl_kv_server_stats {
    uint64_t curr_conns, total_conns, rejected_conns, max_conns;
    uint64_t threads, bytes_read, bytes_written;
    uint32_t tcp_port, udp_port;
    uint32_t value_max;      /* the largest value a request may carry (-I) */
};

/* The server around the store, for the commands that report on it (stats). */
struct ofl_kv_env {
    /* Fill *s with the server's figures now (NULL: none). */
    void (*server_stats)(void *arg, struct ofl_kv_server_stats *s);
    void *arg;
    uint64_t started_s;      /* ofl_kv_now_s() when the server started (uptime) */
};

/* The clock of ofl_kv_env.started_s and of the uptime stats reports: CLOCK_MONOTONIC,
 * whole seconds. */
uint64_t ofl_kv_now_s(void);

/* A byte buffer that grows up to `max` bytes. `borrowed`: buf is the caller's (a
 * stack array): growing moves the bytes to a heap buffer of ours (borrowed then 0;
 * free it with ofl_mc_out_free) instead of reallocating the caller's. */
struct ofl_mc_out {
    uint8_t *buf;
    size_t len, cap, max;
    unsigned borrowed;
    /* Set when a value written here belongs to an item with an expiry time: a cache
     * in front of the store must not keep the reply (it would outlive the item). */
    unsigned expiring;
};

/* Make room for `n` more bytes. Returns 0, -ENOBUFS (would pass `max`) or -ENOMEM. */
int ofl_mc_out_reserve(struct ofl_mc_out *o, size_t n);

/* Free the buffer (unless borrowed) and zero the structure (`max` is kept). */
void ofl_mc_out_free(struct ofl_mc_out *o);

/* Run request `req` (as ofl_mc_parse() returned it) against `kv` and append its
 * reply to `out`. Returns 0, 1 if the connection should be closed once `out` is
 * sent (quit), or -ENOBUFS / -ENOMEM if the reply did not fit. */
int ofl_kv_exec(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out);

/* ofl_kv_exec with the server's figures for stats (`env` NULL: none). */
int ofl_kv_exec_env(struct ofl_kv *kv, const struct ofl_mc_req *req, struct ofl_mc_out *out,
                    const struct ofl_kv_env *env);

/* ofl_kv_exec for a request from a writer the store trusts with CAS values: a cache
 * in front of it writing back an item whose CAS it gave to clients (ofl_kvc). A SET
 * that carries a CAS stores the item with that CAS, whether or not the key exists,
 * instead of comparing it (OFL_KV_SET_CAS), so that a client's later CAS command
 * with it still matches. Other requests run as ofl_kv_exec runs them. */
int ofl_kv_exec_trusted(struct ofl_kv *kv, const struct ofl_mc_req *req,
                        struct ofl_mc_out *out);

/* Append the reply to a request that ofl_mc_parse() rejected with `err`. Returns
 * 0, 1 if the connection should be closed after it (req->fatal), or -ENOBUFS /
 * -ENOMEM. */
int ofl_kv_exec_error(const struct ofl_mc_req *req, int err, struct ofl_mc_out *out);

/* Append memcached's out-of-memory answer to `req`: when its bytes could not be
 * buffered (`storing`): "SERVER_ERROR out of memory storing object"; when its reply
 * could not be built: "SERVER_ERROR out of memory writing get response" for a get,
 * else "SERVER_ERROR out of memory"; binary: status ENOMEM. Text noreply: nothing.
 * Returns 0, or -ENOMEM / -ENOBUFS when not even that fits. */
int ofl_kv_exec_oom(const struct ofl_mc_req *req, int storing, struct ofl_mc_out *out);

/* What ofl_kv_exec_udp did with one datagram. */
struct ofl_kv_udp_counts {
    uint64_t requests;      /* requests run */
    uint64_t parse_errors;  /* requests answered with a protocol error */
    uint64_t dropped;       /* datagrams dropped: no frame header, multi-datagram
                               request, or ending inside a request */
};

/* Run every request of one UDP datagram (`len` bytes: the 8-byte frame header, then
 * requests, every one run in order as memcached 1.6 runs them; a quit ends it) against
 * `kv`, appending the replies (without a frame header) to `out`.
 * Returns the datagram's request id (>= 0) when it was run, even if it produced no
 * reply, or -EINVAL when it was dropped (counted in `c`). */
int ofl_kv_exec_udp(struct ofl_kv *kv, const uint8_t *dgram, size_t len,
                    const struct ofl_mc_limits *lim, struct ofl_mc_out *out,
                    struct ofl_kv_udp_counts *c);

#endif
