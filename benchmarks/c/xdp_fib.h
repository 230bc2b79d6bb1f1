/* The kernel FIB side of `offlow bench xdp`: the routes in a private network
 * namespace's main table, for bpf_fib_lookup (bench_xdp.bpf.c's xdp_fib, xdp_fib_6). */
#ifndef OFL_XDP_FIB_H
#define OFL_XDP_FIB_H

#include <stddef.h>

#include "offlow/routes.h"

/* Gateway of hop h: 192.0.2.h, for IPv6 2001:db8:ffff::h (addresses used only as
 * names; routes are "onlink"). */
#define OFL_XDP_FIB_HOP_NET 0xC0000200u
#define OFL_XDP_FIB6_HOP_NET \
    "\x20\x01\x0d\xb8\xff\xff\0\0\0\0\0\0\0\0\0\0"

/* Move the calling process into a network namespace of its own with a veth pair
 * (runtime/tools/xdp_net.h: it vanishes with the process, with every route in it, so
 * the machine's own routes are never touched), turn IPv4 and IPv6 forwarding on there
 * and lo up. Returns the index of the veth end OFL_XDP_IN (the routes' device), or a
 * negative errno with a message in `err` (256 bytes). */
int ofl_xdp_fib_netns(char *err);

/* Add routes r[0..n) (hops 1..255) to the namespace's main table through device
 * `ifindex`, each "via 192.0.2.HOP onlink", many per netlink message batch (a later
 * duplicate replaces an earlier one, as in lpm4). Returns 0, or a negative errno with
 * a message in `err` naming the first route the kernel refused. */
int ofl_xdp_fib_add(const struct ofl_route4 *r, size_t n, int ifindex, char *err);

/* The same for IPv6 routes, each "via 2001:db8:ffff::HOP onlink". */
int ofl_xdp_fib6_add(const struct ofl_route6 *r, size_t n, int ifindex, char *err);

#endif
