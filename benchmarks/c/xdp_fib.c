/* The kernel FIB side of `offlow bench xdp` (xdp_fib.h): rtnetlink, written directly so
 * that routes go to the kernel many per sendmsg, acknowledged only on error. */
#include "xdp_fib.h"
#include "xdp_net.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#define BATCH_BYTES (64u << 10)   /* under the socket's default send buffer */

struct nlbuf {
    char *b;
    size_t len, cap;
};

static struct nlmsghdr *msg_start(struct nlbuf *m, uint16_t type, uint16_t flags, uint32_t seq,
                                  const void *hdr, size_t hdrlen)
{
    struct nlmsghdr *h = (struct nlmsghdr *)(m->b + m->len);
    memset(h, 0, NLMSG_SPACE(hdrlen));
    h->nlmsg_len = (uint32_t)NLMSG_LENGTH(hdrlen);
    h->nlmsg_type = type;
    h->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
    h->nlmsg_seq = seq;
    memcpy(NLMSG_DATA(h), hdr, hdrlen);
    return h;
}

static struct rtattr *attr(struct nlmsghdr *h, uint16_t type, const void *data, size_t len)
{
    struct rtattr *a = (struct rtattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = type;
    a->rta_len = (uint16_t)RTA_LENGTH(len);
    if (len) memcpy(RTA_DATA(a), data, len);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
    return a;
}

static void msg_end(struct nlbuf *m, struct nlmsghdr *h)
{
    m->len += NLMSG_ALIGN(h->nlmsg_len);
}

/* Read replies until the one to `last` (acknowledged); the first error wins. A reply
 * to sequence number s < last is an error of message s. */
static int wait_reply(int fd, uint32_t last, uint32_t *bad_seq)
{
    _Alignas(struct nlmsghdr) char buf[16 << 10];
    int first = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return first ? first : -errno;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type != NLMSG_ERROR) continue;
            const struct nlmsgerr *e = NLMSG_DATA(h);
            if (e->error && !first) {
                first = e->error;
                *bad_seq = h->nlmsg_seq;
            }
            if (h->nlmsg_seq == last) return first;
        }
    }
}

static int nl_open(void)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -errno;
    int one = 1, size = 8 << 20;
    setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    return fd;
}

static int send_all(int fd, const struct nlbuf *m)
{
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    if (sendto(fd, m->b, m->len, 0, (struct sockaddr *)&sa, sizeof sa) < 0) return -errno;
    return 0;
}

int ofl_xdp_fib_netns(char *err)
{
    int rc = ofl_xdp_net_create(1500, err, 256);
    if (rc < 0) return rc;
    /* (our own namespace: bpf_fib_lookup answers only where forwarding is on) */
    rc = ofl_xdp_sysctl("/proc/sys/net/ipv4/conf/all/forwarding", "1");
    /* (IPv6 back on, which the pair's namespace turns off: an IPv6 route needs it on
     * its device) */
    if (rc == 0) rc = ofl_xdp_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "0");
    if (rc == 0)
        rc = ofl_xdp_sysctl("/proc/sys/net/ipv6/conf/" OFL_XDP_IN "/disable_ipv6", "0");
    if (rc == 0) rc = ofl_xdp_sysctl("/proc/sys/net/ipv6/conf/all/forwarding", "1");
    if (rc < 0) {
        snprintf(err, 256, "cannot turn forwarding on in the namespace: %s", strerror(-rc));
        return rc;
    }
    /* lo up: its address makes the local table, without which the kernel takes no
     * gateway for unicast */
    rc = ofl_xdp_link_up("lo", 0);
    if (rc < 0) {
        snprintf(err, 256, "cannot set lo up: %s", strerror(-rc));
        return rc;
    }
    return ofl_xdp_ifindex(OFL_XDP_IN);
}

/* Route i of `routes` (IPv4 or, `v6`, IPv6) as an RTM_NEWROUTE message in `m` with
 * sequence number i + 1; `ack`: ask for an acknowledgement. -EINVAL (with `err`) for a
 * route out of range. */
static int add_msg(struct nlbuf *m, const void *routes, size_t i, int v6, uint32_t oif,
                   int ack, char *err)
{
    const struct ofl_route4 *r4 = (const struct ofl_route4 *)routes + i;
    const struct ofl_route6 *r6 = (const struct ofl_route6 *)routes + i;
    unsigned hop = v6 ? r6->hop : r4->hop, len = v6 ? r6->len : r4->len;
    if (hop < 1 || hop > 255 || len > (v6 ? 128u : 32u)) {
        snprintf(err, 256, "route %zu: hop %u or length %u out of range", i, hop, len);
        return -EINVAL;
    }
    struct rtmsg rt = {.rtm_family = v6 ? AF_INET6 : AF_INET, .rtm_dst_len = (uint8_t)len,
                       .rtm_table = RT_TABLE_MAIN, .rtm_protocol = RTPROT_STATIC,
                       .rtm_scope = RT_SCOPE_UNIVERSE, .rtm_type = RTN_UNICAST,
                       .rtm_flags = RTNH_F_ONLINK};
    struct nlmsghdr *h = msg_start(m, RTM_NEWROUTE,
                                   NLM_F_CREATE | NLM_F_REPLACE | (ack ? NLM_F_ACK : 0),
                                   (uint32_t)i + 1, &rt, sizeof rt);
    if (v6) {
        uint8_t gw[16] = {0};
        memcpy(gw, OFL_XDP_FIB6_HOP_NET, 16);
        gw[15] = (uint8_t)hop;
        if (len) attr(h, RTA_DST, r6->addr, 16);
        attr(h, RTA_GATEWAY, gw, 16);
    } else {
        uint32_t mask = len ? 0xFFFFFFFFu << (32 - len) : 0;
        uint32_t dst = htonl(r4->addr & mask), gw = htonl(OFL_XDP_FIB_HOP_NET | hop);
        if (len) attr(h, RTA_DST, &dst, 4);
        attr(h, RTA_GATEWAY, &gw, 4);
    }
    attr(h, RTA_OIF, &oif, 4);
    msg_end(m, h);
    return 0;
}

/* The routes of either family, many per netlink message batch. */
static int add_routes(const void *routes, size_t n, int v6, int ifindex, char *err)
{
    int fd = nl_open();
    if (fd < 0) {
        snprintf(err, 256, "netlink socket: %s", strerror(-fd));
        return fd;
    }
    struct nlbuf m = {malloc(BATCH_BYTES), 0, BATCH_BYTES};
    if (!m.b) {
        close(fd);
        snprintf(err, 256, "out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    uint32_t bad = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        /* the last message of a batch asks for an acknowledgement: its reply says
         * the kernel has read the whole batch (errors of the others come before it) */
        int last = i + 1 == n || m.len + 256 > m.cap;
        rc = add_msg(&m, routes, i, v6, (uint32_t)ifindex, last, err);
        if (rc < 0 || !last) continue;
        rc = send_all(fd, &m);
        if (rc == 0) rc = wait_reply(fd, (uint32_t)i + 1, &bad);
        m.len = 0;
        if (rc < 0) {
            size_t k = bad ? bad - 1 : i;
            char text[64];
            if (v6)
                inet_ntop(AF_INET6, ((const struct ofl_route6 *)routes)[k].addr, text,
                          sizeof text);
            else {
                uint32_t a = htonl(((const struct ofl_route4 *)routes)[k].addr);
                inet_ntop(AF_INET, &a, text, sizeof text);
            }
            snprintf(err, 256, "the kernel refused route %s/%u: %s", text,
                     v6 ? ((const struct ofl_route6 *)routes)[k].len
                        : ((const struct ofl_route4 *)routes)[k].len, strerror(-rc));
        }
    }
    free(m.b);
    close(fd);
    return rc;
}

int ofl_xdp_fib_add(const struct ofl_route4 *r, size_t n, int ifindex, char *err)
{
    return add_routes(r, n, 0, ifindex, err);
}

int ofl_xdp_fib6_add(const struct ofl_route6 *r, size_t n, int ifindex, char *err)
{
    return add_routes(r, n, 1, ifindex, err);
}
