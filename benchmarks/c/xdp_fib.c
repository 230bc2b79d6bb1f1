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

int ofl_xdp_fib_add(const struct ofl_route4 *r, size_t n, int ifindex, char *err)
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
    uint32_t bad = 0, oif = (uint32_t)ifindex;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (r[i].hop < 1 || r[i].hop > 255 || r[i].len > 32) {
            snprintf(err, 256, "route %zu: hop %u or length %u out of range", i, r[i].hop,
                     r[i].len);
            rc = -EINVAL;
            break;
        }
        uint32_t mask = r[i].len ? 0xFFFFFFFFu << (32 - r[i].len) : 0;
        uint32_t dst = htonl(r[i].addr & mask), gw = htonl(OFL_XDP_FIB_HOP_NET | r[i].hop);
        struct rtmsg rt = {.rtm_family = AF_INET, .rtm_dst_len = r[i].len,
                           .rtm_table = RT_TABLE_MAIN, .rtm_protocol = RTPROT_STATIC,
                           .rtm_scope = RT_SCOPE_UNIVERSE, .rtm_type = RTN_UNICAST,
                           .rtm_flags = RTNH_F_ONLINK};
        /* the last message of a batch asks for an acknowledgement: its reply says
         * the kernel has read the whole batch (errors of the others come before it) */
        int last = i + 1 == n || m.len + 256 > m.cap;
        struct nlmsghdr *h = msg_start(&m, RTM_NEWROUTE,
                                       NLM_F_CREATE | NLM_F_REPLACE | (last ? NLM_F_ACK : 0),
                                       (uint32_t)i + 1, &rt, sizeof rt);
        if (r[i].len) attr(h, RTA_DST, &dst, 4);
        attr(h, RTA_GATEWAY, &gw, 4);
        attr(h, RTA_OIF, &oif, 4);
        msg_end(&m, h);
        if (last) {
            rc = send_all(fd, &m);
            if (rc == 0) rc = wait_reply(fd, (uint32_t)i + 1, &bad);
            m.len = 0;
            if (rc < 0) {
                const struct ofl_route4 *b = bad ? &r[bad - 1] : &r[i];
                snprintf(err, 256, "the kernel refused route %u.%u.%u.%u/%u: %s",
                         b->addr >> 24, b->addr >> 16 & 0xFF, b->addr >> 8 & 0xFF,
                         b->addr & 0xFF, b->len, strerror(-rc));
            }
        }
    }
    free(m.b);
    close(fd);
    return rc;
}
