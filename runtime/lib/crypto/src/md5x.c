/* MD5 (RFC 1321) over one or several independent chains at once; see md5x.h. */
#include <errno.h>
#include <string.h>

#include "offlow/md5x.h"

#define BLOCK 64u

static const uint32_t T[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
    0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
    0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
    0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
    0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
    0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
    0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391,
};

static inline uint32_t rotl(uint32_t x, unsigned s) { return (x << s) | (x >> (32 - s)); }

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define F(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define G(b, c, d) ((c) ^ ((d) & ((b) ^ (c))))
#define H(b, c, d) ((b) ^ (c) ^ (d))
#define I(b, c, d) ((c) ^ ((b) | ~(d)))

/* One step for every lane: the lanes' steps are independent, so they overlap. */
#define STEP(fn, a, b, c, d, k, s, i)                                           \
    for (unsigned l = 0; l < W; l++) {                                          \
        a[l] += fn(b[l], c[l], d[l]) + x[l][k] + T[i];                          \
        a[l] = rotl(a[l], s) + b[l];                                            \
    }

/* Compress one block per lane into each lane's state: W lanes interleaved step by
 * step (W a constant at each call, so the lane loops unroll). */
static inline __attribute__((always_inline)) void compress(uint32_t *st[], const uint8_t *blk[],
                                                           const unsigned W)
{
    uint32_t x[4][16], a[4], b[4], c[4], d[4];
    for (unsigned l = 0; l < W; l++) {
        for (unsigned j = 0; j < 16; j++) x[l][j] = le32(blk[l] + 4 * j);
        a[l] = st[l][0], b[l] = st[l][1], c[l] = st[l][2], d[l] = st[l][3];
    }
    static const unsigned char s1[4] = { 7, 12, 17, 22 }, s2[4] = { 5, 9, 14, 20 },
                               s3[4] = { 4, 11, 16, 23 }, s4[4] = { 6, 10, 15, 21 };
#pragma GCC unroll 16
    for (unsigned i = 0; i < 16; i += 4) {
        STEP(F, a, b, c, d, i, s1[0], i)
        STEP(F, d, a, b, c, i + 1, s1[1], i + 1)
        STEP(F, c, d, a, b, i + 2, s1[2], i + 2)
        STEP(F, b, c, d, a, i + 3, s1[3], i + 3)
    }
#pragma GCC unroll 16
    for (unsigned i = 16; i < 32; i += 4) {
        STEP(G, a, b, c, d, (5 * i + 1) & 15, s2[0], i)
        STEP(G, d, a, b, c, (5 * i + 6) & 15, s2[1], i + 1)
        STEP(G, c, d, a, b, (5 * i + 11) & 15, s2[2], i + 2)
        STEP(G, b, c, d, a, (5 * i) & 15, s2[3], i + 3)
    }
#pragma GCC unroll 16
    for (unsigned i = 32; i < 48; i += 4) {
        STEP(H, a, b, c, d, (3 * i + 5) & 15, s3[0], i)
        STEP(H, d, a, b, c, (3 * i + 8) & 15, s3[1], i + 1)
        STEP(H, c, d, a, b, (3 * i + 11) & 15, s3[2], i + 2)
        STEP(H, b, c, d, a, (3 * i + 14) & 15, s3[3], i + 3)
    }
#pragma GCC unroll 16
    for (unsigned i = 48; i < 64; i += 4) {
        STEP(I, a, b, c, d, (7 * i) & 15, s4[0], i)
        STEP(I, d, a, b, c, (7 * i + 7) & 15, s4[1], i + 1)
        STEP(I, c, d, a, b, (7 * i + 14) & 15, s4[2], i + 2)
        STEP(I, b, c, d, a, (7 * i + 5) & 15, s4[3], i + 3)
    }
    for (unsigned l = 0; l < W; l++)
        st[l][0] += a[l], st[l][1] += b[l], st[l][2] += c[l], st[l][3] += d[l];
}

static void compress1(uint32_t *st[], const uint8_t *blk[]) { compress(st, blk, 1); }
static void compress2(uint32_t *st[], const uint8_t *blk[]) { compress(st, blk, 2); }
static void compress4(uint32_t *st[], const uint8_t *blk[]) { compress(st, blk, 4); }

/* One block for each of `n` lanes, four at a time, then two, then one. */
static void compress_lanes(uint32_t *st[], const uint8_t *blk[], unsigned n)
{
    unsigned i = 0;
    for (; i + 4 <= n; i += 4) compress4(st + i, blk + i);
    for (; i + 2 <= n; i += 2) compress2(st + i, blk + i);
    if (i < n) compress1(st + i, blk + i);
}

static void md5_init(uint32_t st[4])
{
    st[0] = 0x67452301, st[1] = 0xefcdab89, st[2] = 0x98badcfe, st[3] = 0x10325476;
}

/* The last blocks of a message: `rest` bytes (< 64) at `p`, then MD5's padding for a
 * message of `total` bytes; into `buf` (128 bytes). Returns how many blocks (1 or 2). */
static unsigned tail_blocks(uint8_t buf[2 * BLOCK], const uint8_t *p, size_t rest, uint64_t total)
{
    unsigned n = rest + 9 <= BLOCK ? 1 : 2;
    memset(buf, 0, n * BLOCK);
    if (rest) memcpy(buf, p, rest);
    buf[rest] = 0x80;
    uint64_t bits = total * 8;
    for (unsigned i = 0; i < 8; i++) buf[n * BLOCK - 8 + i] = (uint8_t)(bits >> (8 * i));
    return n;
}

static void digest_out(const uint32_t st[4], uint8_t out[OFL_MD5_LEN])
{
    for (unsigned i = 0; i < 16; i++) out[i] = (uint8_t)(st[i / 4] >> (8 * (i % 4)));
}

void ofl_md5(const uint8_t *msg, size_t len, uint8_t out[OFL_MD5_LEN])
{
    uint32_t s[4], *st[1] = { s };
    md5_init(s);
    size_t off = 0;
    for (; off + BLOCK <= len; off += BLOCK) {
        const uint8_t *b[1] = { msg + off };
        compress1(st, b);
    }
    uint8_t buf[2 * BLOCK];
    unsigned n = tail_blocks(buf, msg + off, len - off, len);
    for (unsigned i = 0; i < n; i++) {
        const uint8_t *b[1] = { buf + i * BLOCK };
        compress1(st, b);
    }
    digest_out(s, out);
}

int ofl_md5_chain_digests(const uint8_t *msg, size_t len, unsigned k, uint8_t *out)
{
    if (k == 0 || k > OFL_MD5X_MAX_K)
        return -EINVAL;
    uint32_t s[OFL_MD5X_MAX_K][4], *st[OFL_MD5X_MAX_K];
    const uint8_t *blk[OFL_MD5X_MAX_K];
    size_t nfull = len / BLOCK, rounds = nfull / k;
    for (unsigned j = 0; j < k; j++) md5_init(s[j]), st[j] = s[j];
    /* the rounds in which every chain has a whole block: all chains interleaved */
    for (size_t r = 0; r < rounds; r++) {
        for (unsigned j = 0; j < k; j++) blk[j] = msg + (r * k + j) * BLOCK;
        compress_lanes(st, blk, k);
    }
    /* each chain's rest: at most one more whole block, then its part of the message's
     * last short block (chain nfull mod k) and its padding: up to 3 blocks each */
    uint8_t tail[OFL_MD5X_MAX_K][3 * BLOCK];
    unsigned ntail[OFL_MD5X_MAX_K], most = 0;
    for (unsigned j = 0; j < k; j++) {
        size_t first = rounds * k + j; /* the chain's first block not yet done */
        size_t whole = nfull / k + (j < nfull % k), mine = whole * BLOCK;
        unsigned n = 0;
        if (first < nfull) {
            memcpy(tail[j], msg + first * BLOCK, BLOCK);
            n = 1;
        }
        size_t rest = j == nfull % k ? len % BLOCK : 0;
        n += tail_blocks(tail[j] + n * BLOCK, msg + nfull * BLOCK, rest, mine + rest);
        ntail[j] = n;
        most = n > most ? n : most;
    }
    for (unsigned t = 0; t < most; t++) {
        uint32_t *lst[OFL_MD5X_MAX_K];
        unsigned n = 0;
        for (unsigned j = 0; j < k; j++)
            if (t < ntail[j]) lst[n] = st[j], blk[n++] = tail[j] + t * BLOCK;
        compress_lanes(lst, blk, n);
    }
    for (unsigned j = 0; j < k; j++) digest_out(s[j], out + j * OFL_MD5_LEN);
    return 0;
}

int ofl_md5_chains(const uint8_t *msg, size_t len, unsigned k, uint8_t out[OFL_MD5_LEN])
{
    uint8_t d[OFL_MD5X_MAX_K * OFL_MD5_LEN];
    int rc = ofl_md5_chain_digests(msg, len, k, d);
    if (rc == 0)
        ofl_md5(d, (size_t)k * OFL_MD5_LEN, out);
    return rc;
}
