/* memcached over TCP in front of a memcached server over UDP (see tcp_gw.h). */
#include "offlow/tcp_gw.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- cutting a stream into requests ------------------------------------------- */

int ofl_tcp_gw_cut(const uint8_t *buf, size_t len, enum ofl_mc_proto proto,
                   size_t max_request, struct ofl_tcp_gw_cut *c)
{
    memset(c, 0, sizeof *c);
    uint32_t lim32 = max_request > UINT32_MAX ? UINT32_MAX : (uint32_t)max_request;
    struct ofl_mc_limits lim = {lim32, lim32};
    ssize_t r = ofl_mc_parse(buf, len, proto, &lim, &c->req);
    if (r > 0) {
        c->len = (size_t)r;
        if (c->req.cmd == OFL_MC_CMD_QUIT) {
            c->close = 1;
            return c->act = OFL_GW_ANSWER;
        }
        if ((size_t)r > max_request) {   /* a value under the limit, the whole too long */
            c->err = OFL_MC_E2BIG;
            return c->act = OFL_GW_ANSWER;
        }
        return c->act = OFL_GW_FORWARD;
    }
    if (r == 0) {
        /* `need` is exact once a binary header or a text command line is complete;
         * before that a request cannot pass max_request (the line limit catches it). */
        if (len + c->req.need <= max_request) return c->act = OFL_GW_NEED;
        c->err = OFL_MC_E2BIG;
        c->len = len;
        c->skip = c->req.need;
        return c->act = OFL_GW_ANSWER;
    }
    c->err = (int)r;
    c->close = c->req.fatal;
    c->len = c->req.len < len ? c->req.len : len;
    c->skip = c->req.len > len && !c->close ? c->req.len - len : 0;
    return c->act = OFL_GW_ANSWER;
}

ssize_t ofl_tcp_gw_answer(const struct ofl_tcp_gw_cut *c, uint8_t *out, size_t cap)
{
    if (c->err == 0) {   /* quit: binary QUIT is answered, QUITQ and text quit are not */
        if (c->req.proto != OFL_MC_BINARY || c->req.quiet) return 0;
        return ofl_mc_write_response(out, cap, c->req.opcode, OFL_MC_ST_OK, c->req.opaque, 0,
                                     NULL, 0, NULL, 0, NULL, 0);
    }
    return ofl_mc_write_error(out, cap, &c->req, c->err);
}

/* ---- reassembling a reply ------------------------------------------------------ */

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

void ofl_tcp_gw_reasm_init(struct ofl_tcp_gw_reasm *r, size_t max)
{
    memset(r, 0, sizeof *r);
    r->max = max;
}

int ofl_tcp_gw_reasm_add(struct ofl_tcp_gw_reasm *r, const uint8_t *d, size_t len)
{
    if (len < OFL_MC_UDP_HDR_LEN) return -EPROTO;
    uint16_t seq = rd16(d + 2), count = rd16(d + 4);
    size_t plen = len - OFL_MC_UDP_HDR_LEN;
    if (count == 0) count = 1;   /* memcached's header-only datagram: an empty reply */
    if (r->count == 0) {
        /* a reply's datagrams carry about 1392 bytes each: a count far beyond what
         * `max` allows is refused before anything is allocated for it */
        if (count > r->max / 1024 + 2) return -E2BIG;
        r->part = calloc(count, sizeof *r->part);
        r->plen = calloc(count, sizeof *r->plen);
        if (!r->part || !r->plen) {
            ofl_tcp_gw_reasm_reset(r);
            return -ENOMEM;
        }
        r->count = count;
    } else if (count != r->count) {
        return -EPROTO;
    }
    if (seq >= r->count || r->part[seq]) return -EPROTO;
    if (plen > r->max - r->bytes) return -E2BIG;
    uint8_t *p = malloc(plen ? plen : 1);
    if (!p) return -ENOMEM;
    if (plen) memcpy(p, d + OFL_MC_UDP_HDR_LEN, plen);
    r->part[seq] = p;
    r->plen[seq] = (uint32_t)plen;
    r->bytes += plen;
    r->got++;
    return r->got == r->count;
}

size_t ofl_tcp_gw_reasm_len(const struct ofl_tcp_gw_reasm *r)
{
    return r->bytes;
}

void ofl_tcp_gw_reasm_copy(const struct ofl_tcp_gw_reasm *r, uint8_t *out)
{
    for (uint16_t i = 0; i < r->count; i++) {
        if (r->plen[i]) memcpy(out, r->part[i], r->plen[i]);
        out += r->plen[i];
    }
}

void ofl_tcp_gw_reasm_reset(struct ofl_tcp_gw_reasm *r)
{
    if (r->part)
        for (uint16_t i = 0; i < r->count; i++) free(r->part[i]);
    free(r->part);
    free(r->plen);
    size_t max = r->max;
    ofl_tcp_gw_reasm_init(r, max);
}

/* ---- the gateway ---------------------------------------------------------------- */

/* epoll tags: the listener, the UDP socket, the stop fd, then connection i + TAG_CONN. */
enum { TAG_LISTEN = 0, TAG_UDP = 1, TAG_STOP = 2, TAG_CONN = 16 };
/* Replies unread by a connection beyond which no new request of it is forwarded. */
#define OUT_HIGH (64u * 1024u)
/* Datagrams read per recvmmsg call, and calls per wake-up (then TCP gets a turn). */
#define RX_BATCH 32u
#define RX_ROUNDS 8u
/* Largest datagram read from the server. */
#define RX_DGRAM 65536u
/* How long the listener rests after accept ran out of file descriptors. */
#define ACCEPT_PAUSE_MS 100u

struct conn {
    int fd;                    /* -1: the slot is free */
    uint8_t proto;             /* enum ofl_mc_proto, from the connection's first byte */
    uint8_t eof;               /* the peer will send nothing more */
    uint8_t closing;           /* close once the output is written */
    uint8_t inflight;          /* a request is waiting for its reply */
    uint16_t rid;              /* its request id */
    uint32_t events;           /* the epoll interest registered */
    uint64_t deadline;         /* ms (CLOCK_MONOTONIC) by which the reply must come */
    struct conn *tprev, *tnext;   /* requests in flight, oldest first */
    uint8_t *in;               /* received bytes not yet cut into requests */
    size_t in_len, skip;       /* skip: bytes of a refused request still to discard */
    uint8_t *out;              /* replies not yet written */
    size_t out_len, out_off, out_cap;
    struct ofl_tcp_gw_reasm reasm;
    struct conn *next_free;
};

struct ofl_tcp_gw {
    struct ofl_tcp_gw_config cfg;
    int ep, udp, listen_fd;
    size_t in_cap;
    struct conn *conns;        /* cfg.max_conns slots */
    struct conn *free_list;
    uint32_t open;
    uint32_t *owner;           /* request id -> connection index + 1 (0: none) */
    uint16_t next_rid;
    struct conn *thead, *ttail;
    uint64_t listen_paused_until;   /* ms; 0: the listener is armed */
    struct ofl_tcp_gw_stats st;
    uint8_t *dgram;            /* a request's datagram: frame header + request */
    uint8_t *rx;               /* RX_BATCH buffers of RX_DGRAM bytes */
    struct mmsghdr msgs[RX_BATCH];
    struct iovec iov[RX_BATCH];
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int ep_set(struct ofl_tcp_gw *gw, int op, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.u64 = tag;
    return epoll_ctl(gw->ep, op, fd, &ev) < 0 ? -errno : 0;
}

static size_t conn_idx(const struct ofl_tcp_gw *gw, const struct conn *c)
{
    return (size_t)(c - gw->conns);
}

static void timer_unlink(struct ofl_tcp_gw *gw, struct conn *c)
{
    if (c->tprev) c->tprev->tnext = c->tnext;
    else if (gw->thead == c) gw->thead = c->tnext;
    if (c->tnext) c->tnext->tprev = c->tprev;
    else if (gw->ttail == c) gw->ttail = c->tprev;
    c->tprev = c->tnext = NULL;
}

/* The request in flight is over (answered, timed out, or its connection closed). */
static void inflight_end(struct ofl_tcp_gw *gw, struct conn *c)
{
    if (!c->inflight) return;
    gw->owner[c->rid] = 0;
    c->inflight = 0;
    timer_unlink(gw, c);
    ofl_tcp_gw_reasm_reset(&c->reasm);
}

static void conn_close(struct ofl_tcp_gw *gw, struct conn *c)
{
    if (c->fd < 0) return;
    inflight_end(gw, c);
    epoll_ctl(gw->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
    c->next_free = gw->free_list;
    gw->free_list = c;
    gw->open--;
    gw->st.closed++;
    if (gw->listen_paused_until) gw->listen_paused_until = 1;   /* a descriptor is free */
}

/* Append `n` bytes to the connection's output. */
static int out_reserve(struct conn *c, size_t n)
{
    if (c->out_off && c->out_off == c->out_len) c->out_off = c->out_len = 0;
    if (c->out_cap - c->out_len >= n) return 0;
    if (c->out_off) {   /* slide what is left to the front first */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
        if (c->out_cap - c->out_len >= n) return 0;
    }
    size_t cap = c->out_cap ? c->out_cap : 4096;
    while (cap - c->out_len < n) cap *= 2;
    uint8_t *b = realloc(c->out, cap);
    if (!b) return -ENOMEM;
    c->out = b;
    c->out_cap = cap;
    return 0;
}

/* Write what the connection's output holds; -1 when the connection broke. */
static int conn_flush(struct ofl_tcp_gw *gw, struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        gw->st.conn_errors++;
        return -1;
    }
    c->out_off = c->out_len = 0;
    if (c->out_cap > OUT_HIGH) {   /* a large reply is gone: give its memory back */
        free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
    return 0;
}

/* Send the first `len` bytes of the connection's input as one request datagram. */
static int forward(struct ofl_tcp_gw *gw, struct conn *c, size_t len)
{
    uint16_t rid = gw->next_rid;
    while (gw->owner[rid]) rid++;   /* at most max_conns ids are taken */
    gw->next_rid = (uint16_t)(rid + 1);
    ofl_mc_udp_write(gw->dgram, rid, 0, 1);
    memcpy(gw->dgram + OFL_MC_UDP_HDR_LEN, c->in, len);
    ssize_t n;
    do n = send(gw->udp, gw->dgram, OFL_MC_UDP_HDR_LEN + len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)(OFL_MC_UDP_HDR_LEN + len)) {
        gw->st.send_errors++;
        return -1;
    }
    gw->st.requests++;
    gw->owner[rid] = (uint32_t)conn_idx(gw, c) + 1;
    c->rid = rid;
    c->inflight = 1;
    c->deadline = now_ms() + gw->cfg.timeout_ms;
    c->tprev = gw->ttail;
    c->tnext = NULL;
    if (gw->ttail) gw->ttail->tnext = c;
    else gw->thead = c;
    gw->ttail = c;
    return 0;
}

static void in_consume(struct conn *c, size_t n)
{
    if (n >= c->in_len) {
        c->in_len = 0;
        return;
    }
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

/* Cut and forward or answer requests while nothing is in flight and the output is
 * not backed up; write the output; close when done; set the epoll interest. */
static void conn_progress(struct ofl_tcp_gw *gw, struct conn *c)
{
    int stuck = 0;   /* what is buffered cannot go anywhere before more bytes come */
    while (!c->inflight && !c->closing && c->out_len - c->out_off < OUT_HIGH) {
        if (c->skip) {
            size_t n = c->skip < c->in_len ? c->skip : c->in_len;
            in_consume(c, n);
            c->skip -= n;
            if (c->skip) {
                stuck = 1;
                break;
            }
        }
        if (c->in_len == 0) {
            stuck = 1;
            break;
        }
        if (!c->proto) c->proto = c->in[0] == OFL_MC_REQ_MAGIC ? OFL_MC_BINARY : OFL_MC_TEXT;
        struct ofl_tcp_gw_cut cut;
        int act = ofl_tcp_gw_cut(c->in, c->in_len, (enum ofl_mc_proto)c->proto,
                                 gw->cfg.max_request, &cut);
        if (act == OFL_GW_NEED) {
            if (c->in_len >= gw->in_cap) c->closing = 1;   /* cannot happen: in_cap fits any */
            stuck = 1;
            break;
        }
        if (act == OFL_GW_FORWARD) {
            if (forward(gw, c, cut.len) < 0) {
                conn_close(gw, c);
                return;
            }
            in_consume(c, cut.len);
            break;
        }
        if (out_reserve(c, 128) < 0) {
            conn_close(gw, c);
            return;
        }
        ssize_t n = ofl_tcp_gw_answer(&cut, c->out + c->out_len, c->out_cap - c->out_len);
        if (n > 0) c->out_len += (size_t)n;
        gw->st.answered++;
        if (cut.err == OFL_MC_E2BIG) gw->st.too_large++;
        in_consume(c, cut.len);
        c->skip = cut.skip;
        if (cut.close) c->closing = 1;
    }
    if (c->eof && stuck && !c->inflight) c->closing = 1;   /* nothing more will come */
    if (conn_flush(gw, c) < 0) {
        conn_close(gw, c);
        return;
    }
    if (c->closing && c->out_off == c->out_len) {
        /* Bytes left unread at close make the kernel reset the connection, which can
         * destroy the reply just written: discard what has come (a bounded amount). */
        uint8_t sink[4096];
        for (int i = 0; i < 16 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {}
        shutdown(c->fd, SHUT_WR);
        conn_close(gw, c);
        return;
    }
    uint32_t want = 0;
    if (!c->eof && !c->closing && c->in_len < gw->in_cap) want |= EPOLLIN;
    if (c->out_off < c->out_len) want |= EPOLLOUT;
    if (want != c->events) {
        if (ep_set(gw, EPOLL_CTL_MOD, c->fd, want, TAG_CONN + conn_idx(gw, c)) < 0) {
            conn_close(gw, c);
            return;
        }
        c->events = want;
    }
}

static void conn_readable(struct ofl_tcp_gw *gw, struct conn *c)
{
    if (!c->in && !(c->in = malloc(gw->in_cap))) {
        conn_close(gw, c);
        return;
    }
    ssize_t n;
    do n = recv(c->fd, c->in + c->in_len, gw->in_cap - c->in_len, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
        c->in_len += (size_t)n;
    } else if (n == 0) {
        c->eof = 1;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        gw->st.conn_errors++;
        conn_close(gw, c);
        return;
    }
    conn_progress(gw, c);
}

static void accept_all(struct ofl_tcp_gw *gw)
{
    for (;;) {
        int fd = accept4(gw->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: rest the listener (level-triggered, it would spin) */
                epoll_ctl(gw->ep, EPOLL_CTL_DEL, gw->listen_fd, NULL);
                gw->listen_paused_until = now_ms() + ACCEPT_PAUSE_MS;
            }
            return;
        }
        gw->st.accepted++;
        struct conn *c = gw->free_list;
        if (!c) {
            gw->st.refused++;
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        gw->free_list = c->next_free;
        memset(c, 0, sizeof *c);
        ofl_tcp_gw_reasm_init(&c->reasm, gw->cfg.reply_max);
        c->fd = fd;
        c->events = EPOLLIN;
        if (ep_set(gw, EPOLL_CTL_ADD, fd, EPOLLIN, TAG_CONN + conn_idx(gw, c)) < 0) {
            c->fd = -1;
            c->next_free = gw->free_list;
            gw->free_list = c;
            gw->st.refused++;
            close(fd);
            continue;
        }
        gw->open++;
    }
}

/* One datagram from the server: find its request, add it to the reply. */
static void reply_dgram(struct ofl_tcp_gw *gw, const uint8_t *d, size_t len)
{
    if (len < OFL_MC_UDP_HDR_LEN) {
        gw->st.bad_dgrams++;
        return;
    }
    uint32_t owner = gw->owner[rd16(d)];
    if (!owner) {
        gw->st.stray++;
        return;
    }
    struct conn *c = &gw->conns[owner - 1];
    int rc = ofl_tcp_gw_reasm_add(&c->reasm, d, len);
    if (rc == -EPROTO) {
        gw->st.bad_dgrams++;
        return;
    }
    if (rc < 0) {   /* too large, or no memory: the reply cannot be delivered */
        gw->st.reply_too_large++;
        conn_close(gw, c);
        return;
    }
    if (rc == 0) return;
    size_t n = ofl_tcp_gw_reasm_len(&c->reasm);
    if (out_reserve(c, n) < 0) {
        conn_close(gw, c);
        return;
    }
    ofl_tcp_gw_reasm_copy(&c->reasm, c->out + c->out_len);
    c->out_len += n;
    gw->st.replies++;
    if (c->reasm.count > 1) gw->st.multi++;
    inflight_end(gw, c);
    conn_progress(gw, c);
}

static void udp_readable(struct ofl_tcp_gw *gw)
{
    for (unsigned round = 0; round < RX_ROUNDS; round++) {
        for (unsigned i = 0; i < RX_BATCH; i++) {
            gw->iov[i].iov_base = gw->rx + (size_t)i * RX_DGRAM;
            gw->iov[i].iov_len = RX_DGRAM;
            memset(&gw->msgs[i], 0, sizeof gw->msgs[i]);
            gw->msgs[i].msg_hdr.msg_iov = &gw->iov[i];
            gw->msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int got = recvmmsg(gw->udp, gw->msgs, RX_BATCH, MSG_DONTWAIT, NULL);
        if (got <= 0) return;   /* EAGAIN; ECONNREFUSED: no server yet (requests time out) */
        for (int i = 0; i < got; i++) {
            if (gw->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
                gw->st.bad_dgrams++;
                continue;
            }
            reply_dgram(gw, gw->rx + (size_t)i * RX_DGRAM, gw->msgs[i].msg_len);
        }
        if ((unsigned)got < RX_BATCH) return;
    }
}

static void expire(struct ofl_tcp_gw *gw, uint64_t now)
{
    while (gw->thead && gw->thead->deadline <= now) {
        gw->st.timeouts++;
        conn_close(gw, gw->thead);
    }
}

int ofl_tcp_gw_create(struct ofl_tcp_gw **out, const struct ofl_tcp_gw_config *cfg,
                      char *errbuf)
{
    *out = NULL;
    struct ofl_tcp_gw_config c = *cfg;
    if (!c.max_conns) c.max_conns = 4096;
    if (!c.max_request) c.max_request = OFL_TCP_GW_REQUEST_MAX;
    if (!c.timeout_ms) c.timeout_ms = 5000;
    if (!c.reply_max) c.reply_max = 2u << 20;
    if (c.max_conns > OFL_TCP_GW_CONNS_LIMIT || c.max_request < 64 ||
        c.max_request > 65507 - OFL_MC_UDP_HDR_LEN || c.server_port == 0) {
        snprintf(errbuf, 256, "bad settings: max_conns %u (1..%u), max_request %u (64..65499), "
                 "server port %u", c.max_conns, OFL_TCP_GW_CONNS_LIMIT, c.max_request,
                 c.server_port);
        return -EINVAL;
    }
    int type = 0, listening = 0;
    socklen_t tl = sizeof type, ll = sizeof listening;
    if (getsockopt(c.listen_fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
        getsockopt(c.listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) < 0 ||
        type != SOCK_STREAM || !listening) {
        snprintf(errbuf, 256, "fd %d is not a listening TCP socket", c.listen_fd);
        return -EINVAL;
    }
    int fl = fcntl(c.listen_fd, F_GETFL);
    if (fl < 0 || fcntl(c.listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        snprintf(errbuf, 256, "fd %d: fcntl: %s", c.listen_fd, strerror(errno));
        return -errno;
    }
    struct ofl_tcp_gw *gw = calloc(1, sizeof *gw);
    if (!gw) return -ENOMEM;
    gw->cfg = c;
    gw->ep = gw->udp = -1;
    gw->listen_fd = c.listen_fd;
    gw->in_cap = 2u * c.max_request + 64u;
    gw->conns = calloc(c.max_conns, sizeof *gw->conns);
    gw->owner = calloc(65536, sizeof *gw->owner);
    gw->dgram = malloc(OFL_MC_UDP_HDR_LEN + c.max_request);
    gw->rx = malloc((size_t)RX_BATCH * RX_DGRAM);
    if (!gw->conns || !gw->owner || !gw->dgram || !gw->rx) {
        ofl_tcp_gw_destroy(gw);
        return -ENOMEM;
    }
    for (uint32_t i = c.max_conns; i-- > 0;) {
        gw->conns[i].fd = -1;
        gw->conns[i].next_free = gw->free_list;
        gw->free_list = &gw->conns[i];
    }
    int rc = 0;
    struct sockaddr_in to;
    memset(&to, 0, sizeof to);
    to.sin_family = AF_INET;
    to.sin_port = htons(c.server_port);
    to.sin_addr.s_addr = htonl(c.server_addr);
    int big = 4 << 20;
    gw->ep = epoll_create1(EPOLL_CLOEXEC);
    if (gw->ep < 0) {
        rc = -errno;
        snprintf(errbuf, 256, "epoll_create1: %s", strerror(errno));
    } else if ((gw->udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
        rc = -errno;
        snprintf(errbuf, 256, "UDP socket: %s", strerror(errno));
    } else if (setsockopt(gw->udp, SOL_SOCKET, SO_RCVBUF, &big, sizeof big),
               connect(gw->udp, (struct sockaddr *)&to, sizeof to) < 0) {
        rc = -errno;
        snprintf(errbuf, 256, "UDP connect to port %u: %s", c.server_port, strerror(errno));
    } else if ((rc = ep_set(gw, EPOLL_CTL_ADD, gw->udp, EPOLLIN, TAG_UDP)) < 0 ||
               (rc = ep_set(gw, EPOLL_CTL_ADD, gw->listen_fd, EPOLLIN, TAG_LISTEN)) < 0) {
        snprintf(errbuf, 256, "epoll_ctl: %s", strerror(-rc));
    }
    if (rc < 0) {
        ofl_tcp_gw_destroy(gw);
        return rc;
    }
    *out = gw;
    return 0;
}

int ofl_tcp_gw_run(struct ofl_tcp_gw *gw, int stop_fd)
{
    if (stop_fd >= 0) {
        int rc = ep_set(gw, EPOLL_CTL_ADD, stop_fd, EPOLLIN, TAG_STOP);
        if (rc < 0) return rc;
    }
    struct epoll_event evs[64];
    int rc = 0;
    for (;;) {
        uint64_t now = now_ms();
        int wait = -1;
        if (gw->thead) wait = gw->thead->deadline > now ? (int)(gw->thead->deadline - now) : 0;
        if (gw->listen_paused_until) {
            uint64_t until = gw->listen_paused_until;
            if (until <= now) {
                gw->listen_paused_until = 0;
                ep_set(gw, EPOLL_CTL_ADD, gw->listen_fd, EPOLLIN, TAG_LISTEN);
            } else if (wait < 0 || until - now < (uint64_t)wait) {
                wait = (int)(until - now);
            }
        }
        int n = epoll_wait(gw->ep, evs, 64, wait);
        if (n < 0) {
            if (errno == EINTR) continue;
            rc = -errno;
            break;
        }
        int stop = 0;
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            uint32_t ev = evs[i].events;
            if (tag == TAG_STOP) {
                stop = 1;
            } else if (tag == TAG_LISTEN) {
                accept_all(gw);
            } else if (tag == TAG_UDP) {
                udp_readable(gw);
            } else if (tag >= TAG_CONN && tag - TAG_CONN < gw->cfg.max_conns) {
                struct conn *c = &gw->conns[tag - TAG_CONN];
                if (c->fd < 0) continue;   /* closed earlier in this batch */
                if (ev & EPOLLERR) {
                    gw->st.conn_errors++;
                    conn_close(gw, c);
                } else if (ev & EPOLLIN) {
                    conn_readable(gw, c);
                } else if (ev & EPOLLOUT) {
                    conn_progress(gw, c);
                } else if (ev & EPOLLHUP) {   /* both ways shut, nothing to read */
                    conn_close(gw, c);
                }
            }
        }
        expire(gw, now_ms());
        if (stop) break;
    }
    if (stop_fd >= 0) epoll_ctl(gw->ep, EPOLL_CTL_DEL, stop_fd, NULL);
    return rc;
}

void ofl_tcp_gw_get_stats(const struct ofl_tcp_gw *gw, struct ofl_tcp_gw_stats *s,
                          uint32_t *open_conns)
{
    *s = gw->st;
    if (open_conns) *open_conns = gw->open;
}

void ofl_tcp_gw_destroy(struct ofl_tcp_gw *gw)
{
    if (!gw) return;
    if (gw->conns)
        for (uint32_t i = 0; i < gw->cfg.max_conns; i++) conn_close(gw, &gw->conns[i]);
    if (gw->udp >= 0) close(gw->udp);
    if (gw->ep >= 0) close(gw->ep);
    free(gw->conns);
    free(gw->owner);
    free(gw->dgram);
    free(gw->rx);
    free(gw);
}
