/* Tests of md5x.h: MD5 against RFC 1321's test suite; the K-chain digest against the
 * scheme built from plain MD5 of each chain's blocks copied out (no interleaving), for
 * every length up to 9 blocks and K = 1..16; bad K refused. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "offlow/md5x.h"

static void hex(const uint8_t *d, char out[33])
{
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The scheme spelled out: chain j is blocks j, j+k, ... copied out, MD5-ed whole. */
static void slow_chains(const uint8_t *msg, size_t len, unsigned k, uint8_t out[16])
{
    static uint8_t chain[1024];
    uint8_t d[OFL_MD5X_MAX_K * 16];
    for (unsigned j = 0; j < k; j++) {
        size_t n = 0;
        for (size_t off = (size_t)j * 64; off < len; off += (size_t)k * 64) {
            size_t b = len - off < 64 ? len - off : 64;
            memcpy(chain + n, msg + off, b);
            n += b;
        }
        ofl_md5(chain, n, d + 16 * j);
    }
    ofl_md5(d, 16 * k, out);
}

int main(void)
{
    static const char *const rfc[][2] = {
        { "", "d41d8cd98f00b204e9800998ecf8427e" },
        { "a", "0cc175b9c0f1b6a831c399e269772661" },
        { "abc", "900150983cd24fb0d6963f7d28e17f72" },
        { "message digest", "f96b697d7cb7938d525a2f31aaf161d0" },
        { "abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b" },
        { "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
          "d174ab98d277d9f5a5611c2c9f419d9f" },
        { "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
          "57edf4a22be3c955ac49da2e2107b67a" },
    };
    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        uint8_t d[16];
        char h[33];
        ofl_md5((const uint8_t *)rfc[i][0], strlen(rfc[i][0]), d);
        hex(d, h);
        CHECK(!strcmp(h, rfc[i][1]), "MD5(\"%s\") = %s", rfc[i][0], h);
    }
    static uint8_t msg[9 * 64 + 1];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i * 131 + 7);
    int bad = 0;
    for (unsigned k = 1; k <= OFL_MD5X_MAX_K; k++)
        for (size_t len = 0; len <= sizeof msg; len++) {
            uint8_t a[16], b[16];
            if (ofl_md5_chains(msg, len, k, a) != 0) bad++;
            slow_chains(msg, len, k, b);
            if (memcmp(a, b, 16)) {
                if (bad++ < 5) printf("differs: k=%u len=%zu\n", k, len);
            }
        }
    CHECK(!bad, "K-chain digest = MD5 of the chains' MD5s, K 1..16, lengths 0..577 (%d differ)",
          bad);
    uint8_t d[16 * 3], keep[16 * 3];
    memset(d, 0xAA, sizeof d);
    memcpy(keep, d, sizeof d);
    CHECK(ofl_md5_chains(msg, 10, 0, d) == -EINVAL && !memcmp(d, keep, 16), "K = 0 refused");
    CHECK(ofl_md5_chains(msg, 10, OFL_MD5X_MAX_K + 1, d) == -EINVAL, "K = 17 refused");
    CHECK(ofl_md5_chain_digests(msg, 130, 3, d) == 0, "the chain digests alone");
    uint8_t c2[16];
    ofl_md5(msg + 128, 2, c2);
    CHECK(!memcmp(d + 32, c2, 16), "chain 2 of a 130-byte message is MD5 of its last 2 bytes");
    return CHECK_DONE();
}
