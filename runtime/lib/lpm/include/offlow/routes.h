/* Route lists: IPv4 and IPv6 prefixes with next hops, read from a prefix file or
 * added one by one, as input to the longest-prefix-match tables (lpm4.h, lpm6.h).
 *
 * Next hops are 1..OFL_ROUTE_MAX_HOP; 0 means "no route" in every lookup result.
 * A prefix file carries prefixes only, so the hop of a loaded prefix is derived from
 * the prefix itself (the rule every implementation and reference shares, also in
 * docs/router.md):
 *
 *     hop = FNV-1a-32(network address bytes in network order, then the length byte)
 *           % nports + 1
 *
 * FNV-1a-32: h = 2166136261; for each byte b: h ^= b; h *= 16777619 (mod 2^32).
 * The address has its host bits cleared: 4 bytes for IPv4, 16 for IPv6, so
 * "1.0.0.0/24" hashes the bytes 01 00 00 00 18. nports defaults to
 * OFL_ROUTE_DEFAULT_PORTS.
 *
 * A list may hold the same prefix more than once; the tables built from it use the
 * last one (last wins). */
#ifndef OFL_ROUTES_H
#define OFL_ROUTES_H

#include <stddef.h>
#include <stdint.h>

/* Largest next hop (the tables keep 15 bits). */
#define OFL_ROUTE_MAX_HOP 0x7FFFu
/* Ports when none are given. */
#define OFL_ROUTE_DEFAULT_PORTS 16u

/* An IPv4 route: network address (host order, host bits zero), length 0..32, hop. */
struct ofl_route4 {
    uint32_t addr;
    uint16_t hop;
    uint8_t len;
};

/* An IPv6 route: network address (network order, host bits zero), length 0..128, hop. */
struct ofl_route6 {
    uint8_t addr[16];
    uint16_t hop;
    uint8_t len;
};

/* Routes of both families, with what a loaded file held besides them. */
struct ofl_routes {
    struct ofl_route4 *v4;
    size_t n4, cap4;
    struct ofl_route6 *v6;
    size_t n6, cap6;
    uint64_t lines;   /* lines read from files */
    uint64_t blank;   /* empty and comment lines */
    uint64_t bad;     /* garbage lines, skipped (including malformed IPv6 prefixes) */
    uint64_t first_bad; /* the first garbage line's number in its file (from 1; 0: none) */
};

/* What the prefix file a table was built from held besides its routes: what its
 * report says (a line that is not a prefix is skipped, counted here). */
struct ofl_routes_file {
    const char *path;    /* the file (not owned), or NULL: not built from a file */
    uint64_t lines;      /* its lines */
    uint64_t bad;        /* lines that are not prefixes */
    uint64_t first_bad;  /* the first of them (from 1; 0: none) */
};

/* Start an empty list. */
void ofl_routes_init(struct ofl_routes *r);

/* Free the lists (the struct itself is the caller's); `r` is empty afterwards. */
void ofl_routes_free(struct ofl_routes *r);

/* The hop of IPv4 prefix addr/len (addr host order; host bits are ignored) under the
 * rule above, for 1 <= nports <= OFL_ROUTE_MAX_HOP. Returns 1..nports (0 for an
 * nports outside that range or len > 32). */
uint16_t ofl_route_hop4(uint32_t addr, uint8_t len, unsigned nports);

/* The hop of IPv6 prefix addr/len (network order; host bits are ignored), as
 * ofl_route_hop4 (0 for a bad nports or len > 128). */
uint16_t ofl_route_hop6(const uint8_t addr[16], uint8_t len, unsigned nports);

/* Append IPv4 route addr/len -> hop (host bits are cleared). Returns 0, -EINVAL for
 * len > 32 or a hop outside 1..OFL_ROUTE_MAX_HOP, or -ENOMEM. */
int ofl_routes_add4(struct ofl_routes *r, uint32_t addr, uint8_t len, uint16_t hop);

/* Append IPv6 route addr/len -> hop (host bits are cleared). Returns 0, -EINVAL for
 * len > 128 or a bad hop, or -ENOMEM. */
int ofl_routes_add6(struct ofl_routes *r, const uint8_t addr[16], uint8_t len, uint16_t hop);

/* Append the prefixes of a prefix file (plain or gzip; the format of
 * ofl_prefix_parse_line6 in synth.h: one prefix per line, garbage lines skipped and
 * counted in `bad`), each with the hop of the rule above for `nports` (0 =
 * OFL_ROUTE_DEFAULT_PORTS). Returns 0, or a negative errno with a message in
 * `errbuf` (256 bytes): -EINVAL for nports > OFL_ROUTE_MAX_HOP, the file's errors
 * (-ENOENT, -EIO, ...: ofl_prefixes_load), -ENOMEM. On error `r` keeps what it held
 * before the call. */
int ofl_routes_load(struct ofl_routes *r, const char *path, unsigned nports, char *errbuf);

#endif
