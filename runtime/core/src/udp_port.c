/* A UDP socket as a packet port: frames around datagrams, a recvmmsg source, a
 * sendmmsg sink with a batch per core (see udp_port.h). */
#include "offlow/udp_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "offlow/stop.h"

/* ---- frames ----------------------------------------------------------------- */

void ofl_udp_frame_build(uint8_t *frame, uint32_t src, uint16_t sport, uint32_t dst,
                         uint16_t dport, uint32_t payload_len)
{
    static const uint8_t eth[OFL_ETH_HLEN] = {
        0x02, 0, 0, 0, 0, 0x01,  /* destination: the server's side */
        0x02, 0, 0, 0, 0, 0x02,  /* source: the client's side */
        0x08, 0x00,
    };
    memcpy(frame, eth, sizeof eth);
    uint8_t *ip = frame + OFL_ETH_HLEN;
    memset(ip, 0, OFL_IPV4_HLEN);
    ip[0] = 0x45;
    ofl_put_be16(ip + 2, (uint16_t)(OFL_IPV4_HLEN + OFL_UDP_HLEN + payload_len));
    ip[8] = 64;
    ip[9] = 17;
    ofl_put_be32(ip + 12, src);
    ofl_put_be32(ip + 16, dst);
    ofl_put_be16(ip + 10, ofl_csum(ip, OFL_IPV4_HLEN));
    uint8_t *udp = ip + OFL_IPV4_HLEN;
    ofl_put_be16(udp, sport);
    ofl_put_be16(udp + 2, dport);
    ofl_put_be16(udp + 4, (uint16_t)(OFL_UDP_HLEN + payload_len));
    ofl_put_be16(udp + 6, 0);
}

int ofl_udp_frame_parse(const uint8_t *frame, uint32_t len, struct ofl_udp_dgram *d)
{
    uint16_t ethertype, sport, dport;
    uint32_t l3;
    struct ofl_ipv4_info ip;
    int rc = ofl_parse_eth(frame, len, &ethertype, &l3);
    if (rc < 0) return rc;
    if (ethertype != OFL_ETHERTYPE_IPV4) return OFL_EUNSUPP;
    rc = ofl_parse_ipv4(frame, len, l3, &ip);
    if (rc < 0) return rc;
    if (ip.proto != 17) return OFL_EUNSUPP;
    if (ofl_get_be16(frame + l3 + 6) & 0x3FFF) return OFL_EUNSUPP;  /* MF or an offset */
    uint32_t l4 = l3 + ip.hdr_len;
    rc = ofl_parse_udp(frame, len, l4, &sport, &dport);
    if (rc < 0) return rc;
    uint32_t ulen = ofl_get_be16(frame + l4 + 4);
    uint32_t ip_end = l3 + ofl_get_be16(frame + l3 + 2);  /* <= len: checked by the parser */
    if (ulen > ip_end - l4) return OFL_ETRUNC;
    d->dst = ip.dst;
    d->dport = dport;
    d->l3_off = l3;
    d->payload_off = l4 + OFL_UDP_HLEN;
    d->payload_len = ulen - OFL_UDP_HLEN;
    return 0;
}

int ofl_udp_frame_segment(const struct ofl_pkt *p, uint32_t k, uint8_t *out, uint32_t cap)
{
    struct ofl_udp_dgram d;
    int rc = ofl_udp_frame_parse(p->data, p->len, &d);
    if (rc < 0) return rc;
    uint32_t seg = p->seg && p->seg < d.payload_len ? p->seg : d.payload_len;
    if (seg == 0 ? k > 0 : (uint64_t)k * seg >= d.payload_len) return 0;
    uint32_t off = k * seg, part = d.payload_len - off < seg ? d.payload_len - off : seg;
    if (d.payload_off + part > cap) return -ENOSPC;
    memcpy(out, p->data, d.payload_off);
    memcpy(out + d.payload_off, p->data + d.payload_off + off, part);
    uint8_t *ip = out + d.l3_off, *udp = out + d.payload_off - OFL_UDP_HLEN;
    uint32_t ihl = (uint32_t)(ip[0] & 15) * 4;
    ofl_put_be16(ip + 2, (uint16_t)(d.payload_off - d.l3_off + part));
    ofl_put_be16(ip + 10, 0);
    ofl_put_be16(ip + 10, ofl_csum(ip, ihl));
    ofl_put_be16(udp + 4, (uint16_t)(OFL_UDP_HLEN + part));
    ofl_put_be16(udp + 6, 0);
    return (int)(d.payload_off + part);
}

/* ---- sockets ------------------------------------------------------------------ */

/* Check that `fd` is a bound IPv4 UDP socket; set its address (host order). */
static int udp_sock_check(int fd, uint32_t *addr, uint16_t *port, char *errbuf)
{
    int type = 0, rc = 0;
    socklen_t tl = sizeof type;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    memset(&a, 0, sizeof a);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0) {
        rc = -errno;
        snprintf(errbuf, 256, "fd %d is not a socket: %s", fd, strerror(-rc));
    } else if (type != SOCK_DGRAM) {
        rc = -EPROTOTYPE;
        snprintf(errbuf, 256, "fd %d is not a datagram socket", fd);
    } else if (getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        rc = -errno;
        snprintf(errbuf, 256, "fd %d: getsockname: %s", fd, strerror(-rc));
    } else if (a.sin_family != AF_INET) {
        rc = -EAFNOSUPPORT;
        snprintf(errbuf, 256, "fd %d is not an IPv4 socket", fd);
    } else if (a.sin_port == 0) {
        rc = -EINVAL;
        snprintf(errbuf, 256, "fd %d is not bound to a port", fd);
    }
    if (rc == 0) {
        *addr = ntohl(a.sin_addr.s_addr);
        *port = ntohs(a.sin_port);
    }
    return rc;
}

/* ---- source ---------------------------------------------------------------- */

/* Reads between two looks at pending stop signals while datagrams keep coming. */
#define UDP_STOP_EVERY 64u

struct udp_src {
    struct ofl_src base;
    int fd;
    uint32_t addr;            /* the socket's address and port, host order */
    uint16_t port;
    uint32_t busy;            /* reads since the last look at stop signals */
    struct mmsghdr msgs[OFL_UDP_BATCH_MAX];
    struct iovec iov[OFL_UDP_BATCH_MAX];
    struct sockaddr_in from[OFL_UDP_BATCH_MAX];
};

/* Errors of recvmmsg that mean "nothing now" rather than a broken socket. */
static int udp_transient(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ECONNREFUSED ||
           e == ENOBUFS || e == ENOMEM;
}

static int udp_next(struct ofl_src *base, struct ofl_pkt *pkts, uint8_t *bufs, uint32_t n)
{
    struct udp_src *s = (struct udp_src *)base;
    const uint32_t mtu = base->o.mtu, cap = mtu - OFL_UDP_FRAME_HDRS;
    if (n > OFL_UDP_BATCH_MAX) n = OFL_UDP_BATCH_MAX;
    if (++s->busy >= UDP_STOP_EVERY) {
        s->busy = 0;
        if (ofl_stop_requested()) return OFL_SRC_DONE;
    }
    for (uint32_t i = 0; i < n; i++) {
        s->iov[i].iov_base = bufs + (size_t)i * mtu + OFL_UDP_FRAME_HDRS;
        s->iov[i].iov_len = cap;
        memset(&s->msgs[i], 0, sizeof s->msgs[i]);
        s->msgs[i].msg_hdr.msg_name = &s->from[i];
        s->msgs[i].msg_hdr.msg_namelen = sizeof s->from[i];
        s->msgs[i].msg_hdr.msg_iov = &s->iov[i];
        s->msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int got = recvmmsg(s->fd, s->msgs, n, MSG_DONTWAIT, NULL);
    if (got <= 0) {
        if (got < 0 && !udp_transient(errno)) return -errno;
        s->busy = 0;
        return ofl_stop_requested() ? OFL_SRC_DONE : 0;  /* idle: a good time to look */
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint32_t k = 0;
    for (uint32_t i = 0; i < (uint32_t)got; i++) {
        const struct msghdr *h = &s->msgs[i].msg_hdr;
        const struct sockaddr_in *from = &s->from[i];
        uint32_t len = s->msgs[i].msg_len;
        if ((h->msg_flags & MSG_TRUNC) || len > cap || h->msg_namelen < sizeof *from ||
            from->sin_family != AF_INET) {
            base->dropped++;
            continue;
        }
        uint8_t *frame = bufs + (size_t)k * mtu;
        if (k != i && len)  /* close the gap a dropped datagram left */
            memmove(frame + OFL_UDP_FRAME_HDRS, bufs + (size_t)i * mtu + OFL_UDP_FRAME_HDRS, len);
        ofl_udp_frame_build(frame, ntohl(from->sin_addr.s_addr), ntohs(from->sin_port), s->addr,
                            s->port, len);
        pkts[k].data = frame;
        pkts[k].len = OFL_UDP_FRAME_HDRS + len;
        pkts[k].cap = mtu;
        pkts[k].ts_ns = now;
        k++;
    }
    return (int)k;
}

static void udp_src_free(struct ofl_src *base)
{
    free(base);
}

static const struct ofl_src_ops udp_src_ops = {
    .kind = "udp",
    .next = udp_next,
    .close = udp_src_free,
};

int ofl_udp_src_open(struct ofl_src **out, int fd, const struct ofl_src_opts *o, char *errbuf)
{
    *out = NULL;
    char name[64];
    uint32_t addr = 0;
    uint16_t port = 0;
    int rc = udp_sock_check(fd, &addr, &port, errbuf);
    if (rc < 0) return rc;
    if (o->mtu < OFL_UDP_FRAME_HDRS) {
        snprintf(errbuf, 256, "an mtu of %u bytes cannot hold the %u bytes of headers", o->mtu,
                 OFL_UDP_FRAME_HDRS);
        return -EINVAL;
    }
    struct udp_src *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    snprintf(name, sizeof name, "udp:%u.%u.%u.%u:%u", addr >> 24, (addr >> 16) & 255,
             (addr >> 8) & 255, addr & 255, port);
    rc = ofl_src_init(&s->base, &udp_src_ops, o, name, errbuf);
    if (rc < 0) {
        free(s);
        return rc;
    }
    s->fd = fd;
    s->addr = addr;
    s->port = port;
    *out = &s->base;
    return 0;
}

/* ---- sink ------------------------------------------------------------------- */

/* Payload bytes one slot's batch holds: room for the largest payload when empty. */
#define UDP_TX_ARENA (2u * 65536u)
/* Times a flush yields and retries while the kernel has no room. */
#define UDP_TX_TRIES 256

/* One writer's batch. */
struct udp_tx {
    struct mmsghdr msgs[OFL_UDP_BATCH_MAX];
    struct iovec iov[OFL_UDP_BATCH_MAX];
    struct sockaddr_in to[OFL_UDP_BATCH_MAX];
    uint32_t n;               /* datagrams waiting */
    uint32_t used;            /* arena bytes they use */
    uint64_t sent, dropped, errors, to_self;
    uint8_t arena[UDP_TX_ARENA];
};

struct ofl_udp_sink {
    int fd;
    uint32_t addr;            /* the socket's address and port, host order */
    uint16_t port;
    unsigned nslots;
    uint64_t bad_slot;        /* writes with a slot out of range (updated atomically) */
    struct udp_tx **tx;       /* one per slot, separately allocated: no shared lines */
};

int ofl_udp_sink_open(struct ofl_udp_sink **out, int fd, unsigned nslots, char *errbuf)
{
    *out = NULL;
    uint32_t addr;
    uint16_t port;
    int rc = udp_sock_check(fd, &addr, &port, errbuf);
    if (rc < 0) return rc;
    if (nslots == 0) {
        snprintf(errbuf, 256, "a UDP sink needs at least one slot");
        return -EINVAL;
    }
    struct ofl_udp_sink *s = calloc(1, sizeof *s);
    if (!s || !(s->tx = calloc(nslots, sizeof *s->tx))) {
        free(s);
        return -ENOMEM;
    }
    s->fd = fd;
    s->addr = addr;
    s->port = port;
    s->nslots = nslots;
    for (unsigned i = 0; i < nslots; i++) {
        s->tx[i] = aligned_alloc(64, (sizeof(struct udp_tx) + 63) / 64 * 64);
        if (!s->tx[i]) {
            ofl_udp_sink_close(s);
            return -ENOMEM;
        }
        memset(s->tx[i], 0, sizeof(struct udp_tx));
    }
    *out = s;
    return 0;
}

/* Whether a datagram to `dst`:`dport` (host order) would come back to the sink's own
 * socket: its own port at its own address, at 0.0.0.0 (delivered locally), or, for a
 * socket bound to every address, at 127.0.0.0/8. */
static int to_self(const struct ofl_udp_sink *s, uint32_t dst, uint16_t dport)
{
    if (dport != s->port) return 0;
    return dst == s->addr || dst == 0 || (s->addr == 0 && dst >> 24 == 127);
}

void ofl_udp_sink_write(struct ofl_udp_sink *s, unsigned slot, const struct ofl_pkt *p)
{
    if (slot >= s->nslots) {
        __atomic_fetch_add(&s->bad_slot, 1, __ATOMIC_RELAXED);
        return;
    }
    struct udp_tx *t = s->tx[slot];
    struct ofl_udp_dgram d;
    if (ofl_udp_frame_parse(p->data, p->len, &d) < 0) {
        t->dropped++;
        return;
    }
    if (to_self(s, d.dst, d.dport)) {  /* it would come back in as a new packet: a loop */
        t->to_self++;
        return;
    }
    /* a segmented payload (p->seg) goes out as datagrams of seg bytes, the last shorter */
    uint32_t seg = p->seg && p->seg < d.payload_len ? p->seg : d.payload_len;
    uint32_t parts = seg ? (d.payload_len + seg - 1) / seg : 1;
    if (parts > OFL_UDP_BATCH_MAX) {
        t->dropped++;
        return;
    }
    if (OFL_UDP_BATCH_MAX - t->n < parts || UDP_TX_ARENA - t->used < d.payload_len)
        ofl_udp_sink_flush(s, slot);
    uint8_t *buf = t->arena + t->used;
    if (d.payload_len) memcpy(buf, p->data + d.payload_off, d.payload_len);
    t->used += d.payload_len;
    for (uint32_t k = 0; k < parts; k++) {
        uint32_t i = t->n++, off = k * seg;
        memset(&t->to[i], 0, sizeof t->to[i]);
        t->to[i].sin_family = AF_INET;
        t->to[i].sin_port = htons(d.dport);
        t->to[i].sin_addr.s_addr = htonl(d.dst);
        t->iov[i].iov_base = buf + off;
        t->iov[i].iov_len = d.payload_len - off < seg ? d.payload_len - off : seg;
        memset(&t->msgs[i], 0, sizeof t->msgs[i]);
        t->msgs[i].msg_hdr.msg_name = &t->to[i];
        t->msgs[i].msg_hdr.msg_namelen = sizeof t->to[i];
        t->msgs[i].msg_hdr.msg_iov = &t->iov[i];
        t->msgs[i].msg_hdr.msg_iovlen = 1;
    }
}

unsigned ofl_udp_sink_flush(struct ofl_udp_sink *s, unsigned slot)
{
    if (slot >= s->nslots) return 0;
    struct udp_tx *t = s->tx[slot];
    uint32_t done = 0, sent = 0;
    int tries = 0;
    while (done < t->n) {
        int rc = sendmmsg(s->fd, t->msgs + done, t->n - done, MSG_DONTWAIT);
        if (rc > 0) {
            done += (uint32_t)rc;
            sent += (uint32_t)rc;
            tries = 0;
            continue;
        }
        int e = rc < 0 ? errno : EAGAIN;
        if ((e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == EINTR) &&
            ++tries < UDP_TX_TRIES) {
            sched_yield();
            continue;
        }
        t->errors++;  /* the kernel refuses the first waiting datagram: skip it */
        done++;
        tries = 0;
    }
    t->sent += sent;
    t->n = 0;
    t->used = 0;
    return sent;
}

uint64_t ofl_udp_sink_sent(const struct ofl_udp_sink *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nslots; i++) n += s->tx[i]->sent;
    return n;
}

uint64_t ofl_udp_sink_dropped(const struct ofl_udp_sink *s)
{
    uint64_t n = __atomic_load_n(&s->bad_slot, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < s->nslots; i++) n += s->tx[i]->dropped;
    return n;
}

uint64_t ofl_udp_sink_to_self(const struct ofl_udp_sink *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nslots; i++) n += s->tx[i]->to_self;
    return n;
}

uint64_t ofl_udp_sink_send_errors(const struct ofl_udp_sink *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nslots; i++) n += s->tx[i]->errors;
    return n;
}

void ofl_udp_sink_close(struct ofl_udp_sink *s)
{
    if (!s) return;
    for (unsigned i = 0; i < s->nslots; i++) {
        if (s->tx[i]) ofl_udp_sink_flush(s, i);
        free(s->tx[i]);
    }
    free(s->tx);
    free(s);
}
