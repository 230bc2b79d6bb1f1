/* Synthetic traffic: a seedable, deterministic source of Ethernet/IPv4/UDP
 * packets with valid IPv4 and UDP checksums, plus its helpers (frame-size mix,
 * destination prefix files, a small PRNG).
 *
 * A pass is `count` packets, numbered j = 0 .. count-1 (replay rules in src.h).
 * Packet j's headers depend only on (seed, j), so every pass, and every split of
 * the pass over cores, carries the same packets:
 *   Ethernet 02:00:00:00:00:02 -> 02:00:00:00:00:01, IPv4 TTL 64, id j & 0xFFFF,
 *   source in 10.0.0.0/8, destination in a random prefix of the prefix file (a
 *   uniformly chosen prefix, random host bits) or any address without one, UDP
 *   source port 1024..65535, destination port 443 (1/4), 53 (1/8), 80 (1/8) or
 *   random 1024..65535; frame size (without FCS) drawn from the size mix.
 * The first 8 payload bytes hold the sequence number q = pass * count + j (big
 * endian; frames shorter than 50 bytes carry none), the rest is zero, and
 * ts_ns = q * 1000 (1 us apart, from the epoch): the output of a run does not
 * depend on when it ran.
 * count == 0 with duration_ns > 0: an endless stream (j = q) until the duration;
 * count == 0 otherwise: no packets. */
#ifndef OFL_SYNTH_H
#define OFL_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/src.h"

/* Options of synthetic sources besides the common ones (count, seed: src.h). */
struct ofl_synth_opts {
    const char *sizes;     /* size mix (ofl_size_mix_parse); NULL or "" = "64" */
    const char *prefixes;  /* destination prefix file (ofl_prefixes_load); NULL = none */
};

/* Open a synthetic source. Returns 0 and sets `*s` (NULL on failure), or a negative
 * errno with a message in `errbuf` (256 bytes): -EINVAL for a bad size mix, a size
 * above the mtu or bad common options; the prefix file's errors (ofl_prefixes_load),
 * including -EINVAL when it holds no IPv4 prefix at all. */
int ofl_synth_src_open(struct ofl_src **s, const struct ofl_synth_opts *so,
                       const struct ofl_src_opts *o, char *errbuf);

/* Lines of the prefix file of a synthetic source: IPv4 prefixes used, IPv6 ones
 * skipped, garbage skipped (0 for sources of other kinds or without a file). */
uint64_t ofl_synth_src_prefixes(const struct ofl_src *s);
uint64_t ofl_synth_src_prefixes_v6(const struct ofl_src *s);
uint64_t ofl_synth_src_prefixes_bad(const struct ofl_src *s);

/* ---- PRNG: splitmix64 ------------------------------------------------------ */

struct ofl_rng {
    uint64_t s;
};

/* The next 64 random bits of `r`. */
static inline uint64_t ofl_rng_next(struct ofl_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uniform value in [0, n) (n > 0; the bias is below 2^-32 for n < 2^32). */
static inline uint64_t ofl_rng_below(struct ofl_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)ofl_rng_next(r) * n) >> 64);
}

/* ---- frame-size mix ---------------------------------------------------------- */

#define OFL_SIZE_MIX_MAX 32
/* Smallest synthetic frame: Ethernet + IPv4 + UDP headers. */
#define OFL_SYNTH_MIN_SIZE 42u
/* Largest: an IPv4 total length of 65535 behind Ethernet. */
#define OFL_SYNTH_MAX_SIZE 65549u

/* Frame sizes and their cumulative weights. */
struct ofl_size_mix {
    uint32_t n;
    uint32_t size[OFL_SIZE_MIX_MAX];
    uint64_t cum[OFL_SIZE_MIX_MAX];   /* cum[i] = weight of size[0..i] */
};

/* Parse a size mix: "imix" (64:7,576:4,1500:1) or comma-separated SIZE[:WEIGHT]
 * items (weight 1 when absent), e.g. "64,128,1500" or "64:7,576:4,1500:1"; sizes
 * OFL_SYNTH_MIN_SIZE..OFL_SYNTH_MAX_SIZE, weights 1..1000000, at most
 * OFL_SIZE_MIX_MAX items. Returns 0 or -EINVAL with a message in `errbuf`. */
int ofl_size_mix_parse(struct ofl_size_mix *m, const char *spec, char *errbuf);

/* A size drawn from `m` with `r`. */
uint32_t ofl_size_mix_pick(const struct ofl_size_mix *m, struct ofl_rng *r);

/* ---- prefix files ------------------------------------------------------------- */

/* An IPv4 prefix: network address (host order, host bits zero) and length. */
struct ofl_prefix4 {
    uint32_t addr;
    uint8_t len;
};

/* An IPv6 prefix: network address (network byte order, host bits zero) and length. */
struct ofl_prefix6 {
    uint8_t addr[16];
    uint8_t len;
};

/* Longest line ofl_prefixes_feed looks at; longer lines are garbage. */
#define OFL_PREFIX_LINE_MAX 256

/* IPv4 prefixes read from text, with what was skipped; IPv6 prefixes too when
 * `keep_v6` is set (after ofl_prefixes_init, before the first feed). */
struct ofl_prefixes {
    struct ofl_prefix4 *v;
    size_t n, cap;
    uint64_t lines;     /* lines seen */
    uint64_t v6;        /* IPv6 prefixes (skipped unless keep_v6: synthetic traffic is IPv4) */
    uint64_t blank;     /* empty and comment lines */
    uint64_t bad;       /* garbage lines (skipped) */
    uint64_t first_bad; /* the first garbage line's number (from 1; 0: none) */
    char part[OFL_PREFIX_LINE_MAX];  /* an unfinished line between feeds */
    size_t part_len;
    int part_long;      /* the unfinished line is already too long */
    /* keep_v6 = 1: IPv6 lines are parsed in full (ofl_prefix_parse_line6) and kept in
     * v6v[0 .. v6 - 1]; a malformed IPv6 prefix then counts as garbage, not in v6. */
    int keep_v6;
    struct ofl_prefix6 *v6v;
    size_t cap6;
};

/* Results of ofl_prefix_parse_line besides errors. */
enum { OFL_PREFIX_V4 = 0, OFL_PREFIX_V6 = 1, OFL_PREFIX_BLANK = 2 };

/* Parse one line (without its newline, `len` bytes, not NUL-terminated) of a
 * prefix file: optional blanks, then "A.B.C.D/LEN" (or "A.B.C.D" = /32), then
 * nothing or a blank, ',', ';' or '|' and any other columns (a part of A.B.C.D
 * with a leading zero, "015", is garbage: octal to inet_aton). Host bits are
 * cleared. Returns OFL_PREFIX_V4 (sets *addr, *plen), OFL_PREFIX_V6 (an IPv6
 * prefix: hex digits, ':' and '.' with a "/LEN"), OFL_PREFIX_BLANK (empty or '#'
 * comment), or OFL_EBADHDR for anything else. */
int ofl_prefix_parse_line(const char *line, size_t len, uint32_t *addr, uint8_t *plen);

/* Like ofl_prefix_parse_line, but an IPv6 prefix is parsed in full: RFC 4291 text
 * ("2001:db8::/32", "::/0", "::ffff:10.0.0.0/104"; hex groups of 1-4 digits, at most
 * one "::", an optional dotted quad in the last 32 bits) followed by "/LEN" (0..128,
 * required). Returns OFL_PREFIX_V6 and sets `addr6` (network byte order, host bits
 * cleared) and *plen, OFL_EBADHDR when the IPv6 text is malformed, or what
 * ofl_prefix_parse_line returns for other lines (IPv4: *addr, *plen). */
int ofl_prefix_parse_line6(const char *line, size_t len, uint32_t *addr, uint8_t addr6[16],
                           uint8_t *plen);

/* Start an empty set. */
void ofl_prefixes_init(struct ofl_prefixes *ps);

/* Add the lines of `len` bytes of text (lines may span feeds). Returns 0 or
 * -ENOMEM. */
int ofl_prefixes_feed(struct ofl_prefixes *ps, const char *text, size_t len);

/* End of text: parse a last line without a newline. Returns 0 or -ENOMEM. */
int ofl_prefixes_finish(struct ofl_prefixes *ps);

/* Read a prefix file, plain or gzip-compressed (zlib). Returns 0, or a negative
 * errno with a message in `errbuf` (256 bytes): the open error (-ENOENT, ...),
 * -EIO for a read or decompression error, -ENOMEM. Garbage lines are counted,
 * not errors. */
int ofl_prefixes_load(struct ofl_prefixes *ps, const char *path, char *errbuf);

/* Free the prefixes, IPv4 and IPv6 (the struct itself is the caller's; with keep_v6
 * the v6 count, which indexes v6v, goes back to 0). */
void ofl_prefixes_free(struct ofl_prefixes *ps);

#endif
