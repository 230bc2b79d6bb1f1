/* Tests of cbc.h: known answers (NIST SP 800-38A's CBC-AES128, Schneier's Blowfish CBC
 * vector), round trips of every length to 300 bytes, refusals (partial blocks, bad
 * padding, no room), the key table's parser, and one flow used by more threads at once
 * than it has contexts (each result checked against one made alone). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "offlow/cbc.h"

static void unhex(const char *h, uint8_t *out)
{
    for (size_t i = 0; h[2 * i]; i++) sscanf(h + 2 * i, "%2hhx", &out[i]);
}

static struct ofl_cbc_table *parse(const char *text, enum ofl_cbc_cipher c)
{
    struct ofl_cbc_table *t;
    char err[256] = "";
    int rc = ofl_cbc_table_parse(&t, text, strlen(text), c, err);
    if (rc) printf("parse: %d %s\n", rc, err);
    return rc ? NULL : t;
}

static void known_answers(void)
{
    struct ofl_cbc_table *t = parse("# SP 800-38A F.2.1\n1.2.3.4:5 6.7.8.9:10 "
                                    "2b7e151628aed2a6abf7158809cf4f3c "
                                    "000102030405060708090a0b0c0d0e0f\n", OFL_CBC_AES128);
    CHECK(t && ofl_cbc_table_size(t) == 1, "AES key table of one flow");
    if (!t) return;
    struct ofl_cbc_flow *f = ofl_cbc_find(t, 0x01020304, 0x06070809, 5, 10);
    uint8_t buf[64], want[32];
    unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51", buf);
    unhex("7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2", want);
    long n = f ? ofl_cbc_encrypt(t, f, buf, 32, buf, sizeof buf) : -1;
    CHECK(n == 48 && !memcmp(buf, want, 32), "CBC-AES128 of SP 800-38A's first two blocks "
          "(and a block of padding): %ld bytes", n);
    n = f ? ofl_cbc_decrypt(t, f, buf, 48, buf) : -1;
    unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51", want);
    CHECK(n == 32 && !memcmp(buf, want, 32), "and back");
    CHECK(!ofl_cbc_find(t, 0x06070809, 0x01020304, 10, 5), "the reverse direction is no flow");
    ofl_cbc_table_close(t);

    t = parse("1.2.3.4:5 6.7.8.9:10 0123456789ABCDEFF0E1D2C3B4A59687 FEDCBA9876543210",
              OFL_CBC_BLOWFISH);
    CHECK(t && ofl_cbc_block(t) == 8, "Blowfish key table (no newline at the end)");
    if (!t) return;
    f = ofl_cbc_find(t, 0x01020304, 0x06070809, 5, 10);
    memcpy(buf, "7654321 Now is the time for ", 29); /* the vector's 29 bytes, NUL included */
    unhex("6b77b4d63006dee605b156e27403979358deb9e7154616d9", want);
    n = f ? ofl_cbc_encrypt(t, f, buf, 29, buf, sizeof buf) : -1;
    CHECK(n == 32 && !memcmp(buf, want, 24), "Blowfish-CBC of Schneier's vector: %ld bytes", n);
    ofl_cbc_table_close(t);
}

static void refusals(enum ofl_cbc_cipher c, const char *text)
{
    struct ofl_cbc_table *t = parse(text, c);
    if (!t) { CHECK(0, "table"); return; }
    struct ofl_cbc_flow *f = ofl_cbc_find(t, 0x0A000001, 0x0A000002, 1, 2);
    unsigned b = ofl_cbc_block(t);
    uint8_t in[400], ct[420], pt[420];
    int bad = 0;
    for (size_t len = 0; len <= 300; len++) {
        for (size_t i = 0; i < len; i++) in[i] = (uint8_t)(i * 7 + len);
        long n = ofl_cbc_encrypt(t, f, in, len, ct, sizeof ct);
        long m = n > 0 ? ofl_cbc_decrypt(t, f, ct, (size_t)n, pt) : -1;
        if (n != (long)((len / b + 1) * b) || m != (long)len || memcmp(pt, in, len)) bad++;
    }
    CHECK(!bad, "cipher %d: round trips of 0..300 bytes (%d bad)", c, bad);
    long n = ofl_cbc_encrypt(t, f, in, 40, ct, sizeof ct);
    CHECK(ofl_cbc_decrypt(t, f, ct, 0, pt) == OFL_CBC_EBLOCKS, "empty ciphertext refused");
    CHECK(ofl_cbc_decrypt(t, f, ct, (size_t)n - 1, pt) == OFL_CBC_EBLOCKS, "a partial block refused");
    ct[n - b - 1] ^= 0x20; /* flips the same bit of the last plaintext byte: pad 0x28 or so */
    CHECK(ofl_cbc_decrypt(t, f, ct, (size_t)n, pt) == OFL_CBC_EPADDING, "bad padding refused");
    CHECK(ofl_cbc_encrypt(t, f, in, 40, ct, 40) == OFL_CBC_ESPACE, "no room for the padding");
    ofl_cbc_table_close(t);
}

static void parser(void)
{
    static const struct { const char *text, *why; } bad[] = {
        { "10.0.0.1:1 10.0.0.2:2 00", "line 1: the key must be" },
        { "\n\n10.0.0.1:99999 10.0.0.2:2", "line 3: expected SRC:PORT" },
        { "10.0.0.1:1 10.0.0.256:2", "line 1: expected DST:PORT" },
        { "10.0.0.1:1", "line 1: expected DST:PORT" },
        { "10.0.0.1.5:1 10.0.0.2:2", "line 1: expected SRC:PORT" },
        { "010.0.0.1:1 10.0.0.2:2 0000000000000000000000000000000 0", "line 1: the key" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ofl_cbc_table *t = NULL;
        char err[256] = "";
        int rc = ofl_cbc_table_parse(&t, bad[i].text, strlen(bad[i].text), OFL_CBC_AES128, err);
        CHECK(rc == -EINVAL && !t && !strncmp(err, bad[i].why, strlen(bad[i].why)),
              "refused: \"%s\" -> %s", bad[i].text, err);
    }
    struct ofl_cbc_table *t = parse("  # nothing but a comment\n\n", OFL_CBC_AES128);
    CHECK(t && ofl_cbc_table_size(t) == 0 && !ofl_cbc_find(t, 1, 2, 3, 4), "an empty table");
    ofl_cbc_table_close(t);
}

#define THREADS 12
#define ROUNDS 300

struct job {
    struct ofl_cbc_table *t;
    struct ofl_cbc_flow *f;
    const uint8_t (*want)[80];
    int bad;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    for (int r = 0; r < ROUNDS; r++) {
        uint8_t in[64], ct[80], pt[80];
        size_t len = (size_t)(r % 64);
        for (int i = 0; i < 64; i++) in[i] = (uint8_t)(len + (size_t)i);
        long n = ofl_cbc_encrypt(j->t, j->f, in, len, ct, sizeof ct);
        long m = ofl_cbc_decrypt(j->t, j->f, ct, (size_t)n, pt);
        if (n < 0 || memcmp(ct, j->want[r % 64], (size_t)n) || m != (long)len || memcmp(pt, in, len))
            j->bad++;
    }
    return NULL;
}

static void threads(void)
{
    struct ofl_cbc_table *t = parse("10.0.0.1:1 10.0.0.2:2 000102030405060708090a0b0c0d0e0f "
                                    "0f0e0d0c0b0a09080706050403020100", OFL_CBC_AES128);
    if (!t) { CHECK(0, "table"); return; }
    struct ofl_cbc_flow *f = ofl_cbc_find(t, 0x0A000001, 0x0A000002, 1, 2);
    static uint8_t want[64][80];
    for (int len = 0; len < 64; len++) {
        uint8_t in[64];
        for (int i = 0; i < 64; i++) in[i] = (uint8_t)(len + i);
        ofl_cbc_encrypt(t, f, in, (size_t)len, want[len], 80);
    }
    pthread_t th[THREADS];
    struct job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct job){ t, f, (const uint8_t (*)[80])want, 0 };
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL), bad += jobs[i].bad;
    CHECK(!bad, "%d threads on one flow (more than its contexts): %d wrong", THREADS, bad);
    ofl_cbc_table_close(t);
}

int main(void)
{
    known_answers();
    refusals(OFL_CBC_AES128, "10.0.0.1:1 10.0.0.2:2 000102030405060708090a0b0c0d0e0f "
                             "0f0e0d0c0b0a09080706050403020100");
    refusals(OFL_CBC_BLOWFISH, "10.0.0.1:1 10.0.0.2:2 00010203 0f0e0d0c0b0a0908");
    parser();
    threads();
    return CHECK_DONE();
}
