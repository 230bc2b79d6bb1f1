/* The key-value store as a program's table object (see kvs_table.h). */
#include "offlow/kvs_table.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "offlow/err.h"
#include "offlow/gen.h"

/* What "stats" reports about the server: the TCP side's figures. */
static void server_stats(void *arg, struct ofl_kv_server_stats *s)
{
    const struct ofl_kvs *t = arg;
    s->value_max = t->value_max;
    s->threads = t->tcp_threads;
    if (!t->server) return;
    ofl_kvs_tcp_server_stats(&t->tcp, s);
    s->tcp_port = t->tcp_port;
}

/* Option `key` of table `name` as a number in [lo, hi] (`own`: one the runner gives
 * itself, ofl_args_get_own); says why and fails otherwise. */
static int number(const struct ofl_args *a, const char *name, const char *key,
                  const char *dflt, uint64_t lo, uint64_t hi, bool own, uint64_t *v)
{
    const char *s = own ? ofl_args_get_own(a, name, key, dflt)
                        : ofl_args_get(a, name, key, dflt);
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || x < lo || x > hi) {
        ofl_start_failf(a, "store %s: %s=%s is not a number in %llu..%llu",
                        name, key, s, (unsigned long long)lo, (unsigned long long)hi);
        return -EINVAL;
    }
    *v = x;
    return 0;
}

/* Serve the run's TCP socket (option tcp_fd) with `threads` threads and at most
 * `conns` connections. */
static int start_tcp(struct ofl_kvs *t, const struct ofl_args *a, const char *name,
                     uint64_t threads, uint64_t conns)
{
    uint64_t fd;
    if (number(a, name, "tcp_fd", "0", 0, 1 << 20, true, &fd))
        return -EINVAL;
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    memset(&me, 0, sizeof me);
    getsockname((int)fd, (struct sockaddr *)&me, &ml);
    t->tcp_port = ntohs(me.sin_port);
    t->tcp_threads = (uint32_t)threads;
    ofl_kvs_tcp_shared_init(&t->tcp, t->kv, t->value_max, (uint32_t)conns, &t->env);
    char err[256] = "";
    int rc = ofl_kvs_tcp_server_start(&t->server, &t->tcp, (int)fd, (unsigned)threads, err);
    if (rc < 0) ofl_start_failf(a, "store %s: TCP: %s", name, err);
    return rc;
}

int ofl_kvs_open_opts(struct ofl_kvs **out, const struct ofl_args *a, const char *name)
{
    *out = NULL;
    uint64_t cap, mem, vmax, threads, conns;
    /* (tcp_threads= too when the run has no TCP socket: checked, and a user's is read,
     * not refused as unread; tcp_fd= and tcp_conns= are the runner's own: --tcp and
     * --tcp-max-conns give them) */
    if (number(a, name, "capacity", "1000000", 1, UINT32_MAX, false, &cap) ||
        number(a, name, "mem", "0", 0, UINT64_MAX, false, &mem) ||
        number(a, name, "value_max", "1048576", 1, OFL_KVS_VALUE_MAX_LIMIT, false, &vmax) ||
        number(a, name, "tcp_threads", "1", 1, OFL_KVS_TCP_THREADS_MAX, false, &threads) ||
        number(a, name, "tcp_conns", "4096", 1, 1u << 20, true, &conns))
        return -EINVAL;
    struct ofl_kvs *t = calloc(1, sizeof *t);
    if (!t) return ofl_start_failf(a, "store %s: out of memory", name), -ENOMEM;
    t->value_max = (uint32_t)vmax;
    t->env = (struct ofl_kv_env){.server_stats = server_stats, .arg = t, .started_s = ofl_kv_now_s()};
    struct ofl_kv_config cfg = {cap, mem, t->value_max, 0};
    int rc = ofl_kv_create(&t->kv, &cfg);
    if (rc < 0) {
        ofl_start_failf(a, "store %s (capacity %llu): %s", name,
                        (unsigned long long)cfg.capacity, ofl_strerror(rc));
        free(t);
        return rc;
    }
    if (ofl_args_get_own(a, name, "tcp_fd", NULL) &&
        (rc = start_tcp(t, a, name, threads, conns)) < 0) {
        ofl_kvs_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

void ofl_kvs_close(struct ofl_kvs *t)
{
    if (!t) return;
    ofl_kvs_tcp_server_stop(t->server);
    ofl_kv_destroy(t->kv);
    free(t);
}

void ofl_kvs_stats_json(struct ofl_json *j, const char *name, const struct ofl_kvs *t)
{
    struct ofl_kv_stats st;
    ofl_kv_get_stats(t->kv, &st);
    ofl_json_begin_obj(j, name);
    ofl_json_str(j, "kind", "kv_store"); /* what the counters are (offlow/metrics.py) */
    const struct {
        const char *key;
        uint64_t v;
    } nums[] = {
        {"items", st.items},         {"bytes", st.bytes},           {"capacity", st.capacity},
        {"gets", st.gets},           {"hits", st.hits},             {"stores", st.stores},
        {"deletes", st.deletes},     {"evictions", st.evictions},   {"expired", st.expired},
        {"total_items", st.total_items}, {"flushed", st.flushed},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) ofl_json_u64(j, nums[i].key, nums[i].v);
    if (t->server) {
        struct ofl_kvs_tcp_stats ts;
        ofl_kvs_tcp_get_stats(&t->tcp, &ts);
        ofl_json_begin_obj(j, "tcp");
        ofl_json_u64(j, "port", t->tcp_port);
        ofl_json_u64(j, "accepted", ts.accepted);
        ofl_json_u64(j, "refused", ts.refused);
        ofl_json_u64(j, "closed", ts.closed);
        ofl_json_u64(j, "open", ts.curr);
        ofl_json_u64(j, "requests", ts.requests);
        ofl_json_u64(j, "parse_errors", ts.parse_errors);
        ofl_json_u64(j, "bytes_read", ts.bytes_read);
        ofl_json_u64(j, "bytes_written", ts.bytes_written);
        ofl_json_u64(j, "oom", ts.oom);
        ofl_json_u64(j, "cut", ts.cut);
        ofl_json_end_obj(j);
    }
    ofl_json_end_obj(j);
}
