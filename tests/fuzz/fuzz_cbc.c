/* libFuzzer target: the CBC key-table parser on arbitrary text, and decryption of
 * arbitrary ciphertexts.
 *
 * The first byte picks the cipher; the rest is a key table: it parses or is refused
 * with a reason, never anything else. The same bytes are then decrypted with a fixed
 * key: a length that is not whole blocks is refused; otherwise the result is refused
 * for its padding or is a plaintext whose encryption gives the ciphertext back. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/cbc.h"

static const char KEYS[2][128] = {
    "10.0.0.1:1 10.0.0.2:2 000102030405060708090a0b0c0d0e0f 0f0e0d0c0b0a09080706050403020100",
    "10.0.0.1:1 10.0.0.2:2 00010203040506070809 0f0e0d0c0b0a0908",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    enum ofl_cbc_cipher c = data[0] & 1 ? OFL_CBC_BLOWFISH : OFL_CBC_AES128;
    struct ofl_cbc_table *t = NULL;
    char err[256] = "";
    int rc = ofl_cbc_table_parse(&t, (const char *)data + 1, size - 1, c, err);
    if (rc == 0) {
        if (!t) abort();
        ofl_cbc_table_close(t);
    } else if (t || (rc != -EINVAL && rc != -ENOMEM) || !err[0]) {
        abort();
    }
    if (ofl_cbc_table_parse(&t, KEYS[c - 1], strlen(KEYS[c - 1]), c, err)) abort();
    struct ofl_cbc_flow *f = ofl_cbc_find(t, 0x0A000001, 0x0A000002, 1, 2);
    size_t b = ofl_cbc_block(t), n = size - 1;
    uint8_t *pt = malloc(n + 1), *ct = malloc(n + b);
    long m = ofl_cbc_decrypt(t, f, data + 1, n, pt);
    if (!n || n % b) {
        if (m != OFL_CBC_EBLOCKS) abort();
    } else if (m != OFL_CBC_EPADDING) {
        if (m < 0 || (size_t)m >= n || (size_t)m + b < n) abort();
        long e = ofl_cbc_encrypt(t, f, pt, (size_t)m, ct, n + b);
        if (e != (long)n || memcmp(ct, data + 1, n)) abort();
    }
    free(pt);
    free(ct);
    ofl_cbc_table_close(t);
    return 0;
}
