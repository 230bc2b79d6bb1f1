/* offlow bench crypto: the code the crypto elements run (md5x.h, cbc.h) beside OpenSSL's
 * libcrypto called directly, on the same packets, one pinned core, taking turns.
 *
 *   bench_crypto CPU SIZE COUNT MIN_SECONDS REPS
 *
 * COUNT payloads of SIZE random bytes, each one message (one CBC message from the flow's
 * IV, one digest). Per operation and repetition: MB/s of payload for offlow and for its
 * peer. One JSON object on stdout. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/blowfish.h>
#include <openssl/evp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "offlow/cbc.h"
#include "offlow/md5x.h"

struct data {
    size_t size, count;
    uint8_t *plain, *cipher, *bfcipher, *out;
    struct ofl_cbc_table *aes, *bf;
    struct ofl_cbc_flow *aesf, *bff;
    EVP_CIPHER_CTX *enc, *dec;
    EVP_MD_CTX *md;
    EVP_MD *md5;
    BF_KEY bfkey;
    unsigned k;
    int bad;
};

static const uint8_t KEY[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const uint8_t IV[16] = { 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1 };
#define STRIDE(d) ((d)->size + 16)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef void (*op_fn)(struct data *d, size_t i);

/* ---- offlow: what the element bodies call ---- */
static void o_md5(struct data *d, size_t i) { ofl_md5(d->plain + i * d->size, d->size, d->out); }
static void o_chains(struct data *d, size_t i)
{
    ofl_md5_chains(d->plain + i * d->size, d->size, d->k, d->out);
}
static void o_aes_enc(struct data *d, size_t i)
{
    if (ofl_cbc_encrypt(d->aes, d->aesf, d->plain + i * d->size, d->size, d->out,
                        d->size + 16) < 0) d->bad++;
}
static void o_aes_dec(struct data *d, size_t i)
{
    if (ofl_cbc_decrypt(d->aes, d->aesf, d->cipher + i * STRIDE(d), (d->size / 16 + 1) * 16,
                        d->out) != (long)d->size) d->bad++;
}
static void o_bf_dec(struct data *d, size_t i)
{
    if (ofl_cbc_decrypt(d->bf, d->bff, d->bfcipher + i * STRIDE(d), (d->size / 8 + 1) * 8,
                        d->out) != (long)d->size) d->bad++;
}

/* ---- the peer: libcrypto called directly, its context kept across packets ---- */
static void p_md5(struct data *d, size_t i)
{
    unsigned n;
    if (!EVP_DigestInit_ex2(d->md, d->md5, NULL) ||
        !EVP_DigestUpdate(d->md, d->plain + i * d->size, d->size) ||
        !EVP_DigestFinal_ex(d->md, d->out, &n)) d->bad++;
}
static void p_aes(struct data *d, size_t i, int enc)
{
    EVP_CIPHER_CTX *c = enc ? d->enc : d->dec;
    int n = 0, m = 0;
    size_t len = enc ? d->size : (d->size / 16 + 1) * 16;
    const uint8_t *in = enc ? d->plain + i * d->size : d->cipher + i * STRIDE(d);
    if (!EVP_CipherInit_ex2(c, NULL, NULL, IV, enc, NULL) ||
        !EVP_CipherUpdate(c, d->out, &n, in, (int)len) ||
        !EVP_CipherFinal_ex(c, d->out + n, &m)) d->bad++;
}
static void p_aes_enc(struct data *d, size_t i) { p_aes(d, i, 1); }
static void p_aes_dec(struct data *d, size_t i) { p_aes(d, i, 0); }
static void p_bf_dec(struct data *d, size_t i)
{
    uint8_t iv[8];
    memcpy(iv, IV, 8);
    size_t len = (d->size / 8 + 1) * 8;
    BF_cbc_encrypt(d->bfcipher + i * STRIDE(d), d->out, (long)len, &d->bfkey, iv, BF_DECRYPT);
    if (d->out[len - 1] != len - d->size) d->bad++;
}

/* MB/s of payload: every packet, over and over, for at least `secs`. */
static double rate(struct data *d, op_fn f, double secs)
{
    size_t done = 0;
    double t0 = now(), t;
    do {
        for (size_t i = 0; i < d->count; i++) f(d, i);
        done += d->count;
    } while ((t = now()) - t0 < secs);
    return (double)done * (double)d->size / (t - t0) / 1e6;
}

static struct ofl_cbc_table *table(const char *text, enum ofl_cbc_cipher c)
{
    struct ofl_cbc_table *t;
    char err[256];
    if (ofl_cbc_table_parse(&t, text, strlen(text), c, err)) {
        fprintf(stderr, "bench_crypto: %s\n", err);
        exit(2);
    }
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: bench_crypto CPU SIZE COUNT MIN_SECONDS REPS\n");
        return 2;
    }
    int cpu = atoi(argv[1]), reps = atoi(argv[5]);
    double secs = atof(argv[4]);
    struct data d = { .size = (size_t)atol(argv[2]), .count = (size_t)atol(argv[3]) };
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) perror("bench_crypto: sched_setaffinity");
    d.plain = malloc(d.size * d.count + 1);
    d.cipher = malloc(STRIDE(&d) * d.count);
    d.bfcipher = malloc(STRIDE(&d) * d.count);
    d.out = malloc(d.size + 64);
    srand(7);
    for (size_t i = 0; i < d.size * d.count; i++) d.plain[i] = (uint8_t)rand();
    d.aes = table("10.0.0.1:1 10.0.0.2:2 0102030405060708090a0b0c0d0e0f10 "
                  "100f0e0d0c0b0a090807060504030201", OFL_CBC_AES128);
    d.bf = table("10.0.0.1:1 10.0.0.2:2 0102030405060708090a0b0c0d0e0f10 100f0e0d0c0b0a09",
                 OFL_CBC_BLOWFISH);
    d.aesf = ofl_cbc_find(d.aes, 0x0A000001, 0x0A000002, 1, 2);
    d.bff = ofl_cbc_find(d.bf, 0x0A000001, 0x0A000002, 1, 2);
    for (size_t i = 0; i < d.count; i++) {
        ofl_cbc_encrypt(d.aes, d.aesf, d.plain + i * d.size, d.size, d.cipher + i * STRIDE(&d),
                        STRIDE(&d));
        ofl_cbc_encrypt(d.bf, d.bff, d.plain + i * d.size, d.size, d.bfcipher + i * STRIDE(&d),
                        STRIDE(&d));
    }
    d.enc = EVP_CIPHER_CTX_new();
    d.dec = EVP_CIPHER_CTX_new();
    d.md = EVP_MD_CTX_new();
    d.md5 = EVP_MD_fetch(NULL, "MD5", NULL);
    BF_set_key(&d.bfkey, 16, KEY);
    if (!d.md5 || !EVP_CipherInit_ex2(d.enc, EVP_aes_128_cbc(), KEY, IV, 1, NULL) ||
        !EVP_CipherInit_ex2(d.dec, EVP_aes_128_cbc(), KEY, IV, 0, NULL)) {
        fprintf(stderr, "bench_crypto: OpenSSL set-up failed\n");
        return 2;
    }
    static const struct { const char *name; op_fn offlow, peer; unsigned k; } ops[] = {
        { "md5", o_md5, p_md5, 0 },
        { "md5_chains_1", o_chains, p_md5, 1 },
        { "md5_chains_2", o_chains, p_md5, 2 },
        { "md5_chains_4", o_chains, p_md5, 4 },
        { "md5_chains_8", o_chains, p_md5, 8 },
        { "aes_128_cbc_enc", o_aes_enc, p_aes_enc, 0 },
        { "aes_128_cbc_dec", o_aes_dec, p_aes_dec, 0 },
        { "bf_cbc_dec", o_bf_dec, p_bf_dec, 0 },
    };
    printf("{\"size\": %zu, \"count\": %zu, \"cpu\": %d, \"openssl\": \"%s\", \"ops\": {",
           d.size, d.count, cpu, OpenSSL_version(OPENSSL_VERSION));
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        d.k = ops[o].k;
        rate(&d, ops[o].offlow, secs / 4); /* warm up */
        rate(&d, ops[o].peer, secs / 4);
        printf("%s\"%s\": {\"offlow\": [", o ? ", " : "", ops[o].name);
        double peer[64];
        for (int r = 0; r < reps && r < 64; r++) {
            printf("%s%.1f", r ? ", " : "", rate(&d, ops[o].offlow, secs));
            peer[r] = rate(&d, ops[o].peer, secs);
        }
        printf("], \"peer\": [");
        for (int r = 0; r < reps && r < 64; r++) printf("%s%.1f", r ? ", " : "", peer[r]);
        printf("]}");
    }
    printf("}, \"bad\": %d}\n", d.bad);
    EVP_CIPHER_CTX_free(d.enc);
    EVP_CIPHER_CTX_free(d.dec);
    EVP_MD_CTX_free(d.md);
    EVP_MD_free(d.md5);
    ofl_cbc_table_close(d.aes);
    ofl_cbc_table_close(d.bf);
    free(d.plain), free(d.cipher), free(d.bfcipher), free(d.out);
    return d.bad ? 1 : 0;
}
