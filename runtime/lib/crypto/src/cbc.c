/* CBC per flow (cbc.h): the key table and encrypting / decrypting with it.
 *
 * Blowfish goes through OpenSSL's BF_* functions, deprecated in OpenSSL 3 but still
 * exported: its EVP form lives in the legacy provider, which a program would have to
 * load into OpenSSL's process-wide default context (and find its module file at run
 * time), and an EVP context holds the IV, so each core would need its own; BF_KEY is a
 * read-only key schedule every core can share. AES goes through EVP, the only way to
 * OpenSSL's AES-NI code (AES_cbc_encrypt is the table-based one). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <errno.h>
#include <openssl/blowfish.h>
#include <openssl/evp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/cbc.h"
#include "offlow/wait.h"

#define SLOTS 8 /* EVP contexts per flow and direction: cores that use it at once */

struct ofl_cbc_flow {
    uint32_t src4, dst4;
    uint16_t sport, dport;
    uint8_t iv[16];
    uint8_t key[56];
    unsigned keylen;
    unsigned line;                         /* its line in the key table (for errors) */
    BF_KEY *bf;                            /* Blowfish: the key schedule */
    EVP_CIPHER_CTX *ctx[2][SLOTS];         /* AES, [decrypt/encrypt]: made when first used */
    atomic_flag busy[2][SLOTS];
};

struct ofl_cbc_table {
    enum ofl_cbc_cipher cipher;
    size_t n, cap, mask;
    struct ofl_cbc_flow *flows;
    struct ofl_cbc_flow **index; /* open addressing, mask + 1 entries */
};

size_t ofl_cbc_table_size(const struct ofl_cbc_table *t) { return t->n; }

unsigned ofl_cbc_block(const struct ofl_cbc_table *t)
{
    return t->cipher == OFL_CBC_AES128 ? 16u : 8u;
}

static size_t flow_hash(uint32_t src4, uint32_t dst4, uint16_t sport, uint16_t dport)
{
    uint64_t x = ((uint64_t)src4 << 32 | dst4) ^ ((uint64_t)sport << 16 | dport) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

struct ofl_cbc_flow *ofl_cbc_find(const struct ofl_cbc_table *t, uint32_t src4, uint32_t dst4,
                                  uint16_t sport, uint16_t dport)
{
    if (!t->n)
        return NULL;
    for (size_t i = flow_hash(src4, dst4, sport, dport) & t->mask;; i = (i + 1) & t->mask) {
        struct ofl_cbc_flow *f = t->index[i];
        if (!f)
            return NULL;
        if (f->src4 == src4 && f->dst4 == dst4 && f->sport == sport && f->dport == dport)
            return f;
    }
}

void ofl_cbc_table_close(struct ofl_cbc_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->flows[i].bf);
        for (int d = 0; d < 2; d++)
            for (int s = 0; s < SLOTS; s++) EVP_CIPHER_CTX_free(t->flows[i].ctx[d][s]);
    }
    free(t->flows);
    free(t->index);
    free(t);
}

/* ---- the text ------------------------------------------------------------------------ */

struct line {
    const char *p, *end;
};

/* The next blank-separated word of `l`; its length in *n (0: none left). */
static const char *word(struct line *l, size_t *n)
{
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\r')) l->p++;
    const char *w = l->p;
    while (l->p < l->end && *l->p != ' ' && *l->p != '\t' && *l->p != '\r') l->p++;
    *n = (size_t)(l->p - w);
    return w;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* `n` hex digits into n/2 bytes; -1 when odd or not hex. */
static int unhex(const char *w, size_t n, uint8_t *out)
{
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hexval(w[i]), lo = hexval(w[i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* A decimal number of at most `max`; -1 when not. */
static long number(const char *w, size_t n, long max)
{
    long v = 0;
    if (!n || n > 5) return -1;
    for (size_t i = 0; i < n; i++) {
        if (w[i] < '0' || w[i] > '9') return -1;
        v = v * 10 + (w[i] - '0');
    }
    return v <= max ? v : -1;
}

/* "A.B.C.D:PORT" into host byte order; -1 when not that. */
static int endpoint(const char *w, size_t n, uint32_t *addr, uint16_t *port)
{
    const char *colon = memchr(w, ':', n);
    if (!colon) return -1;
    uint32_t a = 0;
    const char *p = w;
    for (int i = 0; i < 4; i++) {
        const char *q = p;
        while (q < colon && *q != '.') q++;
        if ((i < 3) != (q < colon)) return -1;
        long o = number(p, (size_t)(q - p), 255);
        if (o < 0 || q - p > 3) return -1;
        a = a << 8 | (uint32_t)o;
        p = q + 1;
    }
    long pt = number(colon + 1, (size_t)(w + n - colon - 1), 65535);
    if (pt < 0) return -1;
    *addr = a;
    *port = (uint16_t)pt;
    return 0;
}

static int fail(char *errbuf, unsigned lineno, const char *why)
{
    snprintf(errbuf, 256, "line %u: %s", lineno, why);
    return -EINVAL;
}

/* One flow's line into `f`; 1 when it holds one, 0 when blank, -EINVAL. */
static int parse_line(struct line l, enum ofl_cbc_cipher c, unsigned lineno,
                      struct ofl_cbc_flow *f, char *errbuf)
{
    const char *hash = memchr(l.p, '#', (size_t)(l.end - l.p));
    if (hash) l.end = hash;
    size_t n;
    const char *w = word(&l, &n);
    if (!n) return 0;
    if (endpoint(w, n, &f->src4, &f->sport))
        return fail(errbuf, lineno, "expected SRC:PORT (an IPv4 address and a port)");
    w = word(&l, &n);
    if (!n || endpoint(w, n, &f->dst4, &f->dport))
        return fail(errbuf, lineno, "expected DST:PORT after the source");
    unsigned kmin = c == OFL_CBC_AES128 ? 16 : 4, kmax = c == OFL_CBC_AES128 ? 16 : 56;
    unsigned ivlen = c == OFL_CBC_AES128 ? 16 : 8;
    w = word(&l, &n);
    if (n < 2 * kmin || n > 2 * kmax || unhex(w, n, f->key))
        return fail(errbuf, lineno, c == OFL_CBC_AES128
                    ? "the key must be 32 hex digits (AES-128: 16 bytes)"
                    : "the key must be 8..112 hex digits (Blowfish: 4..56 bytes)");
    f->keylen = (unsigned)n / 2;
    w = word(&l, &n);
    if (n != 2 * ivlen || unhex(w, n, f->iv))
        return fail(errbuf, lineno, c == OFL_CBC_AES128 ? "the IV must be 32 hex digits"
                                                         : "the IV must be 16 hex digits");
    word(&l, &n);
    if (n) return fail(errbuf, lineno, "unexpected text after the IV");
    return 1;
}

int ofl_cbc_table_parse(struct ofl_cbc_table **out, const char *text, size_t len,
                        enum ofl_cbc_cipher cipher, char *errbuf)
{
    *out = NULL;
    if (cipher != OFL_CBC_AES128 && cipher != OFL_CBC_BLOWFISH) {
        snprintf(errbuf, 256, "unknown cipher %d", (int)cipher);
        return -EINVAL;
    }
    struct ofl_cbc_table *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->cipher = cipher;
    int rc = 0;
    unsigned lineno = 0;
    for (const char *p = text, *end = text + len; p < end && !rc;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        struct line l = { p, nl ? nl : end };
        p = nl ? nl + 1 : end;
        lineno++;
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 16;
            struct ofl_cbc_flow *f = realloc(t->flows, cap * sizeof *f);
            if (!f) { rc = -ENOMEM; break; }
            t->flows = f, t->cap = cap;
        }
        struct ofl_cbc_flow *f = &t->flows[t->n];
        memset(f, 0, sizeof *f);
        int got = parse_line(l, cipher, lineno, f, errbuf);
        if (got < 0) rc = got;
        else if (got) f->line = lineno, t->n++;
    }
    if (!rc && t->n) {
        size_t size = 16;
        while (size < 2 * t->n) size *= 2;
        t->mask = size - 1;
        t->index = calloc(size, sizeof *t->index);
        if (!t->index) rc = -ENOMEM;
        for (size_t i = 0; !rc && i < t->n; i++) {
            struct ofl_cbc_flow *f = &t->flows[i];
            const struct ofl_cbc_flow *first = ofl_cbc_find(t, f->src4, f->dst4, f->sport,
                                                            f->dport);
            if (first) {
                snprintf(errbuf, 256, "line %u: flow %u.%u.%u.%u:%u %u.%u.%u.%u:%u is listed "
                         "twice (first on line %u)", f->line,
                         f->src4 >> 24, f->src4 >> 16 & 255, f->src4 >> 8 & 255, f->src4 & 255,
                         f->sport, f->dst4 >> 24, f->dst4 >> 16 & 255, f->dst4 >> 8 & 255,
                         f->dst4 & 255, f->dport, first->line);
                rc = -EINVAL;
                break;
            }
            size_t j = flow_hash(f->src4, f->dst4, f->sport, f->dport) & t->mask;
            while (t->index[j]) j = (j + 1) & t->mask;
            t->index[j] = f;
        }
    }
    for (size_t i = 0; !rc && i < t->n && cipher == OFL_CBC_BLOWFISH; i++) {
        struct ofl_cbc_flow *f = &t->flows[i];
        if (!(f->bf = malloc(sizeof *f->bf))) rc = -ENOMEM;
        else BF_set_key(f->bf, (int)f->keylen, f->key);
    }
    for (size_t i = 0; !rc && i < t->n; i++)
        for (int d = 0; d < 2; d++)
            for (int s = 0; s < SLOTS; s++) atomic_flag_clear(&t->flows[i].busy[d][s]);
    if (rc) {
        if (rc == -ENOMEM) snprintf(errbuf, 256, "out of memory");
        ofl_cbc_table_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* ---- the ciphers --------------------------------------------------------------------- */

/* An AES context of flow `f` for direction `enc`, held until put back; made the first
 * time its slot is used. NULL when out of memory. */
static EVP_CIPHER_CTX *take(struct ofl_cbc_flow *f, int enc, int *slot)
{
    for (unsigned spins = 0;; spins++) {
        for (int s = 0; s < SLOTS; s++) {
            if (atomic_flag_test_and_set_explicit(&f->busy[enc][s], memory_order_acquire))
                continue;
            EVP_CIPHER_CTX **c = &f->ctx[enc][s];
            if (!*c) {
                *c = EVP_CIPHER_CTX_new();
                if (!*c || !EVP_CipherInit_ex2(*c, EVP_aes_128_cbc(), f->key, f->iv, enc, NULL)) {
                    EVP_CIPHER_CTX_free(*c);
                    *c = NULL;
                    atomic_flag_clear_explicit(&f->busy[enc][s], memory_order_release);
                    return NULL;
                }
                /* Decryption checks the padding itself, so EVP must not strip it. An
                 * encryption context keeps EVP's padding on and never calls Final: the
                 * caller pads, and encrypting whole blocks outputs all of them. With it
                 * off, OpenSSL 3 re-sends the padding parameter to the provider on every
                 * Init (evp_cipher_init_internal): 20-25% of a 64-byte packet's cost. */
                if (!enc) EVP_CIPHER_CTX_set_padding(*c, 0);
            }
            *slot = s;
            return *c;
        }
        if (spins < OFL_WAIT_SPINS) ofl_cpu_relax(); /* more cores on this flow than slots */
        else sched_yield(), spins = 0;
    }
}

static void put(struct ofl_cbc_flow *f, int enc, int slot)
{
    atomic_flag_clear_explicit(&f->busy[enc][slot], memory_order_release);
}

/* CBC over whole blocks, `len` bytes from `in` to `out`. */
static long run(const struct ofl_cbc_table *t, struct ofl_cbc_flow *f, const uint8_t *in,
                size_t len, uint8_t *out, int enc)
{
    if (t->cipher == OFL_CBC_BLOWFISH) {
        uint8_t iv[8];
        memcpy(iv, f->iv, 8);
        BF_cbc_encrypt(in, out, (long)len, f->bf, iv, enc ? BF_ENCRYPT : BF_DECRYPT);
        return (long)len;
    }
    int slot, n = 0;
    EVP_CIPHER_CTX *c = take(f, enc, &slot);
    if (!c) return -ENOMEM;
    int ok = EVP_CipherInit_ex2(c, NULL, NULL, f->iv, enc, NULL) &&
             EVP_CipherUpdate(c, out, &n, in, (int)len);
    put(f, enc, slot);
    return ok && (size_t)n == len ? (long)len : OFL_CBC_ECIPHER;
}

long ofl_cbc_encrypt(const struct ofl_cbc_table *t, struct ofl_cbc_flow *f, const uint8_t *in,
                     size_t len, uint8_t *out, size_t cap)
{
    size_t b = ofl_cbc_block(t), pad = b - len % b;
    if (len + pad > cap || len + pad > (size_t)INT32_MAX)
        return OFL_CBC_ESPACE;
    if (out != in) memmove(out, in, len);
    memset(out + len, (int)pad, pad);
    return run(t, f, out, len + pad, out, 1);
}

long ofl_cbc_decrypt(const struct ofl_cbc_table *t, struct ofl_cbc_flow *f, const uint8_t *in,
                     size_t len, uint8_t *out)
{
    size_t b = ofl_cbc_block(t);
    if (!len || len % b || len > (size_t)INT32_MAX)
        return OFL_CBC_EBLOCKS;
    long rc = run(t, f, in, len, out, 0);
    if (rc < 0) return rc;
    uint8_t pad = out[len - 1];
    if (!pad || pad > b) return OFL_CBC_EPADDING;
    for (size_t i = len - pad; i < len; i++)
        if (out[i] != pad) return OFL_CBC_EPADDING;
    return (long)(len - pad);
}
