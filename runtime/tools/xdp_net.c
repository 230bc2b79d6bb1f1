/* The network an XDP run uses (xdp_net.h). */
#include "xdp_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/if_ether.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>

int ofl_xdp_sysctl(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static int set_up(int sock, const char *name, uint32_t mtu)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    ifr.ifr_mtu = (int)mtu;
    if (mtu && ioctl(sock, SIOCSIFMTU, &ifr) < 0) return -errno;
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0) return -errno;
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(sock, SIOCSIFFLAGS, &ifr) < 0) return -errno;
    return 0;
}

int ofl_xdp_link_up(const char *name, uint32_t mtu)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    int rc = set_up(s, name, mtu);
    close(s);
    return rc;
}

int ofl_xdp_net_create(uint32_t mtu, char *err, size_t errlen)
{
    if (unshare(CLONE_NEWNET) < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot make a network namespace: %s", strerror(e));
        return -e;
    }
    /* (a namespace of our own: these are its settings, nobody else's) */
    ofl_xdp_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
    ofl_xdp_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
    struct nl_sock *nl = nl_socket_alloc();
    if (!nl) return snprintf(err, errlen, "out of memory"), -ENOMEM;
    int rc = nl_connect(nl, NETLINK_ROUTE);
    if (rc == 0) rc = rtnl_link_veth_add(nl, OFL_XDP_IN, OFL_XDP_PEER, getpid());
    nl_socket_free(nl);
    if (rc < 0) {
        snprintf(err, errlen, "cannot create a veth pair: %s", nl_geterror(rc));
        return -EIO;
    }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return snprintf(err, errlen, "socket: %s", strerror(errno)), -EIO;
    /* the veth mtu counts no Ethernet header */
    uint32_t l3 = mtu > ETH_HLEN ? mtu - ETH_HLEN : 68;
    rc = set_up(s, OFL_XDP_IN, l3);
    if (rc == 0) rc = set_up(s, OFL_XDP_PEER, l3);
    close(s);
    if (rc < 0) snprintf(err, errlen, "cannot set the veth pair up: %s", strerror(-rc));
    return rc;
}

int ofl_xdp_ifindex(const char *name)
{
    unsigned idx = if_nametoindex(name);
    return idx ? (int)idx : -errno;
}

int ofl_xdp_packet_socket(const char *name)
{
    int idx = ofl_xdp_ifindex(name);
    if (idx < 0) return idx;
    int s = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (s < 0) return -errno;
    int one = 1, big = 4 << 20;
    struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
                               .sll_ifindex = idx };
    if (setsockopt(s, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0 ||
        setsockopt(s, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one) < 0 ||
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big) < 0 ||
        bind(s, (struct sockaddr *)&sll, sizeof sll) < 0) {
        int e = errno;
        close(s);
        return -e;
    }
    return s;
}
