/* memcached over TCP served straight from a key-value store (see kvs_tcp.h). */
#include "offlow/kvs_tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define IN_START 4096u
#define READ_MIN 16384u               /* read at least this much at a time */
#define BUF_SHRINK (256u << 10)       /* idle connection buffers above this are freed */
#define DRAIN_MAX (1u << 20)          /* bytes read and dropped before a closing connection
                                         is closed anyway (a close with unread bytes would
                                         reset it, losing the answer on its way) */
#define MAX_EVENTS 64

struct ofl_kvs_tcp_conn {
    struct ofl_kvs_tcp_conn *prev, *next;   /* the worker's open connections */
    int fd;
    uint8_t proto;      /* enum ofl_mc_proto: fixed by the first request */
    uint8_t closing;    /* close once the output is sent */
    uint8_t writing;    /* epoll interest is EPOLLOUT (output pending) */
    uint8_t draining;   /* closing, its answer sent: reading to the end, not answering */
    uint8_t *in;
    size_t in_len, in_cap;
    uint64_t skip;      /* bytes of a refused request still to discard */
    struct ofl_mc_req partial;   /* the incomplete request at the front of `in`
                                    (its scalars only: for an out-of-memory answer) */
    struct ofl_mc_out out;
    size_t out_off;
};

static void count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static uint64_t load(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

void ofl_kvs_tcp_shared_init(struct ofl_kvs_tcp_shared *sh, struct ofl_kv *kv,
                             uint32_t value_max, uint32_t max_conns,
                             const struct ofl_kv_env *env)
{
    memset(sh, 0, sizeof *sh);
    sh->kv = kv;
    sh->lim = ofl_mc_default_limits();
    if (value_max) sh->lim.value_max = value_max;
    sh->max_conns = max_conns ? max_conns : OFL_KVS_TCP_MAX_CONNS;
    sh->out_high = OFL_KVS_TCP_OUT_HIGH;
    sh->out_max = OFL_KVS_TCP_OUT_MAX;
    if (env) sh->env = *env;
}

void ofl_kvs_tcp_get_stats(const struct ofl_kvs_tcp_shared *sh, struct ofl_kvs_tcp_stats *s)
{
    s->accepted = load(&sh->accepted);
    s->refused = load(&sh->refused);
    s->closed = load(&sh->closed);
    s->curr = load(&sh->curr);
    s->requests = load(&sh->requests);
    s->parse_errors = load(&sh->parse_errors);
    s->bytes_read = load(&sh->bytes_read);
    s->bytes_written = load(&sh->bytes_written);
    s->oom = load(&sh->oom);
    s->cut = load(&sh->cut);
}

void ofl_kvs_tcp_server_stats(const struct ofl_kvs_tcp_shared *sh, struct ofl_kv_server_stats *s)
{
    struct ofl_kvs_tcp_stats ts;
    ofl_kvs_tcp_get_stats(sh, &ts);
    s->curr_conns = ts.curr;
    s->total_conns = ts.accepted;
    s->rejected_conns = ts.refused;
    s->max_conns = sh->max_conns;
    s->bytes_read = ts.bytes_read;
    s->bytes_written = ts.bytes_written;
}

/* ---- connections ------------------------------------------------------------------ */

static void conn_close(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_conn *c)
{
    if (c->prev) c->prev->next = c->next;
    else w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    ofl_mc_out_free(&c->out);
    free(c);
    count(&w->sh->closed, 1);
    atomic_fetch_sub_explicit(&w->sh->curr, 1, memory_order_relaxed);
}

static void conn_interest(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_conn *c,
                          int writing)
{
    if (c->writing == writing) return;
    struct epoll_event ev = {.events = writing ? EPOLLOUT : EPOLLIN, .data.ptr = c};
    epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->writing = (uint8_t)writing;
}

/* The longest request the parser lets through: a line, a value, framing. */
static size_t in_max(const struct ofl_kvs_tcp_shared *sh)
{
    return (size_t)sh->lim.value_max + sh->lim.line_max + OFL_MC_HDR_LEN + 512;
}

/* Make room for `more` bytes of input beyond in_len. Returns 0, -E2BIG (past what
 * any request may be) or -ENOMEM. */
static int in_reserve(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_conn *c, size_t more)
{
    if (c->in_cap - c->in_len >= more) return 0;
    size_t want = c->in_len + more, max = in_max(w->sh);
    if (want > max) return -E2BIG;
    size_t cap = c->in_cap ? c->in_cap : IN_START;
    while (cap < want) cap *= 2;
    if (cap > max) cap = max;
    uint8_t *b = realloc(c->in, cap);
    if (!b) return -ENOMEM;
    c->in = b;
    c->in_cap = cap;
    return 0;
}

/* Run one request (or answer its parse error) whose reply goes after `before` bytes of
 * output; a reply that could not be built is taken back and answered "out of memory".
 * Returns 1 if the connection is to be closed after its output. */
static int conn_run(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_conn *c,
                    const uint8_t *raw, const struct ofl_mc_req *req, ssize_t r)
{
    struct ofl_kvs_tcp_shared *sh = w->sh;
    size_t before = c->out.len;
    int rc;
    if (r < 0) {
        count(&sh->parse_errors, 1);
        rc = ofl_kv_exec_error(req, (int)r, &c->out);
    } else {
        count(&sh->requests, 1);
        rc = sh->forward ? sh->forward(sh->forward_arg, raw, (size_t)r, req, &c->out)
                         : ofl_kv_exec_env(sh->kv, req, &c->out, &sh->env);
    }
    if (rc >= 0) return rc != 0;   /* 1: quit, or a fatal error */
    c->out.len = before;
    count(&sh->oom, 1);
    return ofl_kv_exec_oom(req, 0, &c->out) < 0;   /* cannot even say so: close */
}

/* Parse and run the requests in the input buffer while the output is not backed up.
 * Returns the bytes still wanted for the next request (>= 1), or 0 if it stopped
 * for another reason (closing, output backed up). */
static size_t conn_process(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_conn *c)
{
    struct ofl_kvs_tcp_shared *sh = w->sh;
    size_t off = 0, need = 1;
    while (!c->closing && c->out.len - c->out_off < sh->out_high) {
        if (c->skip) {
            size_t d = c->in_len - off < c->skip ? c->in_len - off : (size_t)c->skip;
            off += d;
            c->skip -= d;
            if (c->skip) break;
            continue;
        }
        if (off == c->in_len) break;
        struct ofl_mc_req req;
        ssize_t r = ofl_mc_parse(c->in + off, c->in_len - off, (enum ofl_mc_proto)c->proto,
                                 &sh->lim, &req);
        c->proto = req.proto;
        if (r == 0) {
            need = req.need;
            c->partial = req;
            break;
        }
        size_t take = r > 0 ? (size_t)r : req.len < c->in_len - off ? req.len : c->in_len - off;
        if (r < 0) c->skip = req.len - take;
        if (conn_run(w, c, c->in + off, &req, r)) c->closing = 1;
        off += take;
    }
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    if (c->in_len == 0 && c->in_cap > BUF_SHRINK) {
        free(c->in);
        c->in = NULL;
        c->in_cap = 0;
    }
    return c->closing || c->out.len - c->out_off >= sh->out_high ? 0 : need;
}

/* Send queued output. Returns 0, or -1 if the connection was closed. */
static int conn_flush(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_conn *c)
{
    while (c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.buf + c->out_off, c->out.len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            conn_close(w, c);
            return -1;
        }
        c->out_off += (size_t)n;
        count(&w->sh->bytes_written, (uint64_t)n);
    }
    if (c->out_off == c->out.len) {
        c->out.len = c->out_off = 0;
        if (c->out.cap > BUF_SHRINK) ofl_mc_out_free(&c->out);
        if (c->closing && !c->draining) {   /* answered: end our side, read theirs */
            shutdown(c->fd, SHUT_WR);
            c->draining = 1;
            c->skip = DRAIN_MAX;
            c->in_len = 0;
        }
    }
    conn_interest(w, c, c->out_off < c->out.len);
    return 0;
}

/* No memory to buffer the request at the front of the input (c->partial, `need`
 * more bytes): answer as memcached does when it cannot allocate the item and skip
 * the request as it arrives; a request whose length is not known yet (a text line
 * still without its end) cannot be skipped: the connection is closed. */
static void conn_oom_input(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_conn *c,
                           size_t need)
{
    count(&w->sh->oom, 1);
    const struct ofl_mc_req *req = &c->partial;
    int exact = req->proto == OFL_MC_BINARY ? c->in_len >= OFL_MC_HDR_LEN : req->cmd != 0;
    if (!exact || ofl_kv_exec_oom(req, 1, &c->out) < 0) {
        c->closing = 1;
        return;
    }
    c->skip = need;
    c->in_len = 0;
}

/* Readable (or writable again): read, process, answer, until the socket is drained
 * or the output backs up. */
static void conn_service(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_conn *c)
{
    if (c->draining) {   /* drop what comes until the peer closes (or too much came) */
        uint8_t scratch[16384];
        ssize_t n = -1;
        errno = EAGAIN;
        while (c->skip && (n = recv(c->fd, scratch, sizeof scratch, MSG_DONTWAIT)) > 0)
            c->skip -= (uint64_t)n < c->skip ? (uint64_t)n : c->skip;
        if (c->skip == 0 || n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            conn_close(w, c);
        return;
    }
    for (;;) {
        size_t need = conn_process(w, c);
        if (conn_flush(w, c)) return;
        if (c->draining) {
            conn_service(w, c);
            return;
        }
        if (c->writing || c->closing) return;   /* EPOLLOUT will call again */
        if (need == 0) continue;   /* the output was backed up and is sent now */
        int rc = in_reserve(w, c, need > READ_MIN ? need : READ_MIN);
        if (rc) rc = in_reserve(w, c, need);
        if (rc == -ENOMEM) {
            conn_oom_input(w, c, need);
            continue;
        }
        if (rc) {   /* cannot happen: the parser refuses what would not fit */
            conn_close(w, c);
            return;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            if (c->in_len || c->skip) count(&w->sh->cut, 1);   /* mid-request: dropped */
            conn_close(w, c);
            return;
        }
        if (n < 0) return;
        count(&w->sh->bytes_read, (uint64_t)n);
        c->in_len += (size_t)n;
    }
}

static void accept_all(struct ofl_kvs_tcp_worker *w)
{
    struct ofl_kvs_tcp_shared *sh = w->sh;
    for (;;) {
        int fd = accept4(w->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;   /* EAGAIN; out of descriptors: the next event retries */
        count(&sh->accepted, 1);
        if (atomic_fetch_add_explicit(&sh->curr, 1, memory_order_relaxed) >= sh->max_conns) {
            atomic_fetch_sub_explicit(&sh->curr, 1, memory_order_relaxed);
            count(&sh->refused, 1);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct ofl_kvs_tcp_conn *c = calloc(1, sizeof *c);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (!c || epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev)) {
            if (!c) count(&sh->oom, 1);
            free(c);
            close(fd);
            atomic_fetch_sub_explicit(&sh->curr, 1, memory_order_relaxed);
            count(&sh->refused, 1);
            continue;
        }
        c->fd = fd;
        c->out.max = sh->out_max + sh->out_high;
        c->next = w->conns;
        if (w->conns) w->conns->prev = c;
        w->conns = c;
    }
}

/* ---- workers ---------------------------------------------------------------------- */

int ofl_kvs_tcp_worker_init(struct ofl_kvs_tcp_worker *w, struct ofl_kvs_tcp_shared *sh,
                            int ep, int listen_fd)
{
    memset(w, 0, sizeof *w);
    w->sh = sh;
    w->ep = ep;
    w->listen_fd = listen_fd;
    int fl = fcntl(listen_fd, F_GETFL);
    if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = w};
    return epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev) ? -errno : 0;
}

void ofl_kvs_tcp_worker_event(struct ofl_kvs_tcp_worker *w, void *ptr, uint32_t events)
{
    if (ptr == w) {
        accept_all(w);
        return;
    }
    struct ofl_kvs_tcp_conn *c = ptr;
    if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) conn_close(w, c);
    else conn_service(w, c);
}

void ofl_kvs_tcp_worker_fini(struct ofl_kvs_tcp_worker *w)
{
    while (w->conns) conn_close(w, w->conns);
    epoll_ctl(w->ep, EPOLL_CTL_DEL, w->listen_fd, NULL);
}

/* ---- a server with threads of its own --------------------------------------------- */

struct thread {
    struct ofl_kvs_tcp_worker w;
    pthread_t th;
    int ep, started;
};

struct ofl_kvs_tcp_server {
    int stop_fd;                 /* an eventfd every thread watches */
    unsigned nthreads;
    struct thread t[];
};

static void *serve(void *arg)
{
    struct thread *t = arg;
    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(t->ep, evs, MAX_EVENTS, -1);
        if (n < 0 && errno != EINTR) return NULL;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) return NULL;   /* the stop eventfd */
            ofl_kvs_tcp_worker_event(&t->w, evs[i].data.ptr, evs[i].events);
        }
    }
}

void ofl_kvs_tcp_server_stop(struct ofl_kvs_tcp_server *s)
{
    if (!s) return;
    if (s->stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t rc = write(s->stop_fd, &one, sizeof one);
        (void)rc;
    }
    for (unsigned i = 0; i < s->nthreads; i++) {
        struct thread *t = &s->t[i];
        if (t->started) pthread_join(t->th, NULL);
        if (t->w.sh) ofl_kvs_tcp_worker_fini(&t->w);
        if (t->ep >= 0) close(t->ep);
    }
    if (s->stop_fd >= 0) close(s->stop_fd);
    free(s);
}

int ofl_kvs_tcp_server_start(struct ofl_kvs_tcp_server **out, struct ofl_kvs_tcp_shared *sh,
                             int listen_fd, unsigned threads, char *errbuf)
{
    *out = NULL;
    int type = 0, listening = 0;
    socklen_t tl = sizeof type, ll = sizeof listening;
    if (getsockopt(listen_fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
        getsockopt(listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) < 0 ||
        type != SOCK_STREAM || !listening) {
        snprintf(errbuf, 256, "fd %d is not a listening TCP socket", listen_fd);
        return -EINVAL;
    }
    if (threads == 0 || threads > OFL_KVS_TCP_THREADS_MAX) {
        snprintf(errbuf, 256, "%u TCP threads: 1..%u", threads, OFL_KVS_TCP_THREADS_MAX);
        return -EINVAL;
    }
    struct ofl_kvs_tcp_server *s = calloc(1, sizeof *s + threads * sizeof s->t[0]);
    if (!s) {
        snprintf(errbuf, 256, "out of memory");
        return -ENOMEM;
    }
    s->nthreads = threads;
    for (unsigned i = 0; i < threads; i++) s->t[i].ep = -1;
    int rc = 0;
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->stop_fd < 0) rc = -errno;
    for (unsigned i = 0; i < threads && !rc; i++) {
        struct thread *t = &s->t[i];
        struct epoll_event stop = {.events = EPOLLIN, .data.ptr = NULL};
        t->ep = epoll_create1(EPOLL_CLOEXEC);
        if (t->ep < 0 || epoll_ctl(t->ep, EPOLL_CTL_ADD, s->stop_fd, &stop)) rc = -errno;
        if (!rc) rc = ofl_kvs_tcp_worker_init(&t->w, sh, t->ep, listen_fd);
        if (!rc && pthread_create(&t->th, NULL, serve, t)) rc = -EAGAIN;
        if (!rc) t->started = 1;
    }
    if (rc) {
        snprintf(errbuf, 256, "cannot start the TCP threads: %s", strerror(-rc));
        ofl_kvs_tcp_server_stop(s);
        return rc;
    }
    *out = s;
    return 0;
}
