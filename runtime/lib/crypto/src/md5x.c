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

static inline uint32_t le32(const uint8_t *p)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t v;
    memcpy(&v, p, 4); /* one load */
    return v;
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
#endif
}

#define F(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define G(b, c, d) ((c) ^ ((d) & ((b) ^ (c))))
#define H(b, c, d) ((b) ^ (c) ^ (d))
#define I(b, c, d) ((c) ^ ((b) | ~(d)))

/* One MD5 step, on scalars or on vectors of lanes alike (GCC's vector extensions give
 * vectors the same operators; the shifts by a constant make a rotate). The message word
 * and the constant are added first: they do not wait for b, c, d, so only fn, one add,
 * the rotate and the add of b are on the chain from one step to the next. */
#define STEP(fn, a, b, c, d, k, s, i)                                           \
    a += x[k] + T[i];                                                           \
    a += fn(b, c, d);                                                           \
    a = ((a << (s)) | (a >> (32 - (s)))) + b;

/* MD5's 64 steps over a, b, c, d with the message words x[0..15]. */
#define ROUNDS()                                                                \
    _Pragma("GCC unroll 16") for (unsigned i = 0; i < 16; i += 4) {             \
        STEP(F, a, b, c, d, i, 7, i)                                            \
        STEP(F, d, a, b, c, i + 1, 12, i + 1)                                   \
        STEP(F, c, d, a, b, i + 2, 17, i + 2)                                   \
        STEP(F, b, c, d, a, i + 3, 22, i + 3)                                   \
    }                                                                           \
    _Pragma("GCC unroll 16") for (unsigned i = 16; i < 32; i += 4) {            \
        STEP(G, a, b, c, d, (5 * i + 1) & 15, 5, i)                             \
        STEP(G, d, a, b, c, (5 * i + 6) & 15, 9, i + 1)                         \
        STEP(G, c, d, a, b, (5 * i + 11) & 15, 14, i + 2)                       \
        STEP(G, b, c, d, a, (5 * i) & 15, 20, i + 3)                            \
    }                                                                           \
    _Pragma("GCC unroll 16") for (unsigned i = 32; i < 48; i += 4) {            \
        STEP(H, a, b, c, d, (3 * i + 5) & 15, 4, i)                             \
        STEP(H, d, a, b, c, (3 * i + 8) & 15, 11, i + 1)                        \
        STEP(H, c, d, a, b, (3 * i + 11) & 15, 16, i + 2)                       \
        STEP(H, b, c, d, a, (3 * i + 14) & 15, 23, i + 3)                       \
    }                                                                           \
    _Pragma("GCC unroll 16") for (unsigned i = 48; i < 64; i += 4) {            \
        STEP(I, a, b, c, d, (7 * i) & 15, 6, i)                                 \
        STEP(I, d, a, b, c, (7 * i + 7) & 15, 10, i + 1)                        \
        STEP(I, c, d, a, b, (7 * i + 14) & 15, 15, i + 2)                       \
        STEP(I, b, c, d, a, (7 * i + 5) & 15, 21, i + 3)                        \
    }

/* One block into one chain's state. */
static void compress1(uint32_t *st[], const uint8_t *blk[])
{
    uint32_t x[16];
    for (unsigned j = 0; j < 16; j++) x[j] = le32(blk[0] + 4 * j);
    uint32_t a = st[0][0], b = st[0][1], c = st[0][2], d = st[0][3];
    ROUNDS()
    st[0][0] += a, st[0][1] += b, st[0][2] += c, st[0][3] += d;
}

/* One block into each of four chains' states, the four in one 128-bit vector (SSE2 on
 * x86-64, NEON on arm64): each step is one vector operation for the four. In scalar
 * registers only two or three chains' states fit at once (16 registers), so four
 * chains interleave in vectors. */
typedef uint32_t v4u __attribute__((vector_size(16)));

static void compress4(uint32_t *st[], const uint8_t *blk[])
{
    v4u x[16];
    for (unsigned j = 0; j < 16; j++)
        x[j] = (v4u){ le32(blk[0] + 4 * j), le32(blk[1] + 4 * j), le32(blk[2] + 4 * j),
                      le32(blk[3] + 4 * j) };
    v4u a = { st[0][0], st[1][0], st[2][0], st[3][0] }, b = { st[0][1], st[1][1], st[2][1], st[3][1] },
        c = { st[0][2], st[1][2], st[2][2], st[3][2] }, d = { st[0][3], st[1][3], st[2][3], st[3][3] };
    const v4u a0 = a, b0 = b, c0 = c, d0 = d;
    ROUNDS()
    a += a0, b += b0, c += c0, d += d0;
    for (unsigned l = 0; l < 4; l++)
        st[l][0] = a[l], st[l][1] = b[l], st[l][2] = c[l], st[l][3] = d[l];
}

/* One block for each of `n` lanes: four at a time in vectors (a group of two or three
 * filled up with a scratch lane: a vector step costs what a scalar one does), one
 * alone in scalar code. */
static void compress_lanes(uint32_t *st[], const uint8_t *blk[], unsigned n)
{
    unsigned i = 0;
    for (; i + 4 <= n; i += 4) compress4(st + i, blk + i);
    if (n - i >= 2) {
        uint32_t scratch[4] = { 0 }, *s4[4];
        const uint8_t *b4[4];
        for (unsigned l = 0; l < 4; l++)
            s4[l] = i + l < n ? st[i + l] : scratch, b4[l] = i + l < n ? blk[i + l] : blk[i];
        compress4(s4, b4);
    } else if (i < n) {
        compress1(st + i, blk + i);
    }
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
