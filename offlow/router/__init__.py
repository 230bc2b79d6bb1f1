"""IPv4 and IPv6 routers: the longest-prefix-match reference and `offlow router check`.

The tables themselves are C (runtime/lib/lpm/src/lpm4.c, lpm6.c, routes.c); docs/router.md
describes them and the next-hop rule.
"""

MAX_HOP = 0x7FFF  # the largest next hop (OFL_ROUTE_MAX_HOP, offlow/routes.h)
DEFAULT_PORTS = 16  # ports of the next-hop rule (reference.next_hop)
