/* The network an XDP run uses: a private network namespace of the calling process,
 * a veth pair in it, and a packet socket on one end.
 *
 * The namespace belongs to the process (unshare): it and the veth pair in it vanish
 * when the process exits, however it exits, so no name is ever left behind and runs
 * beside each other never see each other's interfaces. */
#ifndef OFL_XDP_NET_H
#define OFL_XDP_NET_H

#include <stddef.h>
#include <stdint.h>

/* The veth ends: the program is attached at OFL_XDP_IN; frames are sent into and
 * captured from OFL_XDP_PEER (what XDP_TX sends out of OFL_XDP_IN arrives there). */
#define OFL_XDP_IN "ofl-xdp"
#define OFL_XDP_PEER "ofl-peer"

/* Move the calling process into a network namespace of its own, with IPv6 off (no
 * router or neighbour solicitations on the veth pair), then create the veth pair
 * with `mtu` and set both ends up. Needs CAP_NET_ADMIN and CAP_SYS_ADMIN. Returns 0,
 * or a negative errno with a message in `err` (`errlen` bytes). */
int ofl_xdp_net_create(uint32_t mtu, char *err, size_t errlen);

/* Write `text` to `path` (a /proc/sys setting of the caller's namespace). Returns 0
 * or a negative errno. */
int ofl_xdp_sysctl(const char *path, const char *text);

/* Set interface `name` up, with `mtu` (0: keep its MTU). Returns 0 or a negative
 * errno. */
int ofl_xdp_link_up(const char *name, uint32_t mtu);

/* The interface index of `name`, or a negative errno. */
int ofl_xdp_ifindex(const char *name);

/* A packet socket on interface `name` that sends whole Ethernet frames and receives
 * those arriving there (not those it sends). Returns the socket, or a negative errno. */
int ofl_xdp_packet_socket(const char *name);

#endif
