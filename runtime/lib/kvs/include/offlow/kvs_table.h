/* The key-value store as a program's table object: the store (kvstore.h), built from
 * the table's run-time options, and memcached over TCP served from it when the run
 * has a TCP port (kvs_tcp.h).
 *
 * Options of the table NAME: capacity= (items, default 1000000), mem= (bytes of
 * items, 0 = no limit), value_max= (the longest value, memcached's -I: default 1 MiB,
 * at most 64 MiB), tcp_fd= (a listening TCP socket: serve memcached over TCP on it;
 * the runner passes the run's --tcp socket to the process that holds the table),
 * tcp_threads= (1), tcp_conns= (4096). The TCP threads run the requests against the
 * store directly, beside the cores that serve its datagrams; they block in epoll
 * while idle. */
#ifndef OFL_KVS_TABLE_H
#define OFL_KVS_TABLE_H

#include <stdint.h>

#include "offlow/kvexec.h"
#include "offlow/kvs_tcp.h"
#include "offlow/kvstore.h"
#include "offlow/stats.h"

struct ofl_args;

/* Largest value_max the options accept. */
#define OFL_KVS_VALUE_MAX_LIMIT (64u << 20)

/* A program's store. */
struct ofl_kvs {
    struct ofl_kv *kv;
    uint32_t value_max;
    struct ofl_kv_env env;              /* what "stats" reports about the server */
    struct ofl_kvs_tcp_shared tcp;      /* TCP counters and limits (with `server`) */
    struct ofl_kvs_tcp_server *server;  /* NULL: no TCP */
    uint32_t tcp_port, tcp_threads;
};

/* Table open function: the store named `name` from its options (above); with tcp_fd,
 * start serving TCP. Says the reason (ofl_start_failf) and returns a negative errno on failure
 * (*t NULL). */
int ofl_kvs_open_opts(struct ofl_kvs **t, const struct ofl_args *a, const char *name);

/* Stop serving TCP (its connections are closed) and free the store (NULL is fine). */
void ofl_kvs_close(struct ofl_kvs *t);

/* The table's counters for the stats file: the store's (items, bytes, gets, hits,
 * evictions, ...) and, when it serves TCP, the connections' (object "tcp"). */
void ofl_kvs_stats_json(struct ofl_json *j, const char *name, const struct ofl_kvs *t);

#endif
