/* CRC32C on each path: run as `test_crc32c LEVEL` (scalar, avx2 or avx512), it caps the
 * vector level with OFFLOW_SIMD=LEVEL, checks that ofl_crc32c_path() is the path that
 * level gives on this CPU (or prints "skipped: CPU lacks ..." and exits 0 when the CPU
 * has no such path), then checks ofl_crc32c, ofl_crc32c_copy (the copied bytes and the
 * bytes around them too) and the table path ofl_crc32c_sw against a bitwise reference:
 * the check value, random lengths up to 70,000 and a few MB at random source and
 * destination alignments, every length around the kernels' stripe sizes, and CRCs
 * continued across a split. It also derives every fold constant of crc32c_fold.h again
 * with a portable carry-less arithmetic and compares. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/core/src/crc32c_fold.h"
#include "check.h"
#include "offlow/crc32c.h"
#include "offlow/simd.h"
#include "offlow/synth.h"

static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

/* ---- the fold constants ---- */

/* x^n mod P, P = x^32 + 0x1EDC6F41 (not reflected: bit j is the coefficient of x^j). */
static uint32_t xpow_mod(unsigned n)
{
    uint32_t r = 1;
    while (n--) r = (r << 1) ^ ((r & 0x80000000u) ? 0x1EDC6F41u : 0u);
    return r;
}

/* The carry-less multiply operand of x^n mod P: bit-reflected into the high half. */
static uint64_t operand(unsigned n)
{
    uint32_t v = xpow_mod(n), f = 0;
    for (int j = 0; j < 32; j++) f |= ((v >> j) & 1u) << (31 - j);
    return (uint64_t)f << 32;
}

static void test_constants(void)
{
    static const struct {
        unsigned bits;
        uint64_t lo, hi;
    } k[] = {
        {2048, OFL_CRC_K_2048_LO, OFL_CRC_K_2048_HI}, {1536, OFL_CRC_K_1536_LO, OFL_CRC_K_1536_HI},
        {1024, OFL_CRC_K_1024_LO, OFL_CRC_K_1024_HI}, {768, OFL_CRC_K_768_LO, OFL_CRC_K_768_HI},
        {512, OFL_CRC_K_512_LO, OFL_CRC_K_512_HI},    {256, OFL_CRC_K_256_LO, OFL_CRC_K_256_HI},
        {128, OFL_CRC_K_128_LO, OFL_CRC_K_128_HI},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        CHECK(k[i].lo == operand(63 + k[i].bits) && k[i].hi == operand(k[i].bits - 1),
              "fold constants of %u bits are x^%u and x^%u mod P", k[i].bits, 63 + k[i].bits,
              k[i].bits - 1);
}

/* ---- the path a level gives ---- */

/* The path name `level` must give on this CPU into *want; NULL, or why it cannot. */
static const char *expected_path(enum ofl_simd level, const char **want)
{
    int hw = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
    int vclmul = hw && __builtin_cpu_supports("vpclmulqdq");
    if (level == OFL_SIMD_SCALAR) {
        *want = hw ? "sse4.2" : "table";
        return NULL;
    }
    if (ofl_simd_cpu() < level) return level == OFL_SIMD_AVX512 ? "avx512" : "avx2";
    if (!vclmul) return "vpclmulqdq";
    *want = level == OFL_SIMD_AVX512 ? "avx512+vpclmulqdq" : "avx2+vpclmulqdq";
    return NULL;
}

/* ---- the values ---- */

#define GUARD 64
#define BIG (6u << 20)

/* CRC, copy-and-CRC and the table over src[0..len) continuing from `seed_crc`,
 * the copy to dst (which has GUARD bytes of 0xA5 each side); 0 when all agree. */
static int check_one(uint32_t seed_crc, uint8_t *dst, const uint8_t *src, size_t len)
{
    uint32_t want = crc_bitwise(seed_crc, src, len);
    int bad = 0;
    if (ofl_crc32c(seed_crc, src, len) != want) bad |= 1;
    if (ofl_crc32c_sw(seed_crc, src, len) != want) bad |= 2;
    memset(dst - GUARD, 0xA5, len + 2 * GUARD);
    if (ofl_crc32c_copy(seed_crc, dst, src, len) != want) bad |= 4;
    if (memcmp(dst, src, len)) bad |= 8;
    for (size_t i = 0; i < GUARD; i++)
        if (dst[-1 - (long)i] != 0xA5 || dst[len + i] != 0xA5) bad |= 16;
    return bad;
}

static void test_values(const char *path)
{
    CHECK(ofl_crc32c(0, "123456789", 9) == 0xE3069283u, "%s: crc32c(123456789) = E3069283", path);
    CHECK(ofl_crc32c_sw(0, "123456789", 9) == 0xE3069283u, "table: crc32c(123456789)");
    uint8_t nine[9];
    CHECK(ofl_crc32c_copy(0, nine, "123456789", 9) == 0xE3069283u && !memcmp(nine, "123456789", 9),
          "%s: copy-and-CRC of 123456789 = E3069283", path);
    uint8_t *a = malloc(BIG + 2 * GUARD + 64), *b = malloc(BIG + 2 * GUARD + 64);
    if (!a || !b) {
        CHECK(0, "malloc");
        free(a);
        free(b);
        return;
    }
    struct ofl_rng s = {29};
    for (size_t i = 0; i < BIG + 64; i += 8) {
        uint64_t v = ofl_rng_next(&s);
        memcpy(a + i, &v, 8);
    }
    int bad = 0, bad_len = 0, bad_split = 0, bad_big = 0, kinds = 0;
    /* Random lengths 0..70,000 at random source and destination alignments. */
    for (int t = 0; t < 400; t++) {
        size_t len = ofl_rng_next(&s) % 70001, so = ofl_rng_next(&s) % 64,
               doff = ofl_rng_next(&s) % 64;
        uint32_t c0 = t % 2 ? (uint32_t)ofl_rng_next(&s) : 0;
        int r = check_one(c0, b + GUARD + doff, a + so, len);
        kinds |= r;
        bad += r != 0;
        size_t cut = len ? ofl_rng_next(&s) % len : 0;
        if (ofl_crc32c(ofl_crc32c(c0, a + so, cut), a + so + cut, len - cut) !=
            crc_bitwise(c0, a + so, len))
            bad_split++;
    }
    /* Every length around the stripes (128 and 256 bytes), 16-byte blocks and the
     * 256-byte minimum, from a nonzero CRC. */
    for (size_t len = 0; len < 1300; len++) {
        int r = check_one(0x12345678u, b + GUARD + len % 13, a + len % 11, len);
        kinds |= r;
        bad_len += r != 0;
    }
    /* A few MB, as bulk transfers move. */
    static const size_t mb[] = {1u << 20, (4u << 20) + 8, BIG - 3};
    for (size_t i = 0; i < sizeof mb / sizeof mb[0]; i++) {
        int r = check_one(0, b + GUARD + i, a + 5 * i, mb[i]);
        kinds |= r;
        bad_big += r != 0;
    }
    CHECK(bad == 0, "%s: 400 random lengths 0..70000, random alignments (%d bad)", path, bad);
    CHECK(bad_len == 0, "%s: every length 0..1299 (%d bad)", path, bad_len);
    CHECK(bad_big == 0, "%s: 1 MB, 4 MB + 8, 6 MB - 3 (%d bad)", path, bad_big);
    CHECK(bad_split == 0, "%s: CRC continued across a split equals the whole (%d bad)", path,
          bad_split);
    CHECK(kinds == 0, "%s: which disagreed: crc %d, table %d, copy-crc %d, copied bytes %d, "
          "guard bytes %d", path, kinds & 1, !!(kinds & 2), !!(kinds & 4), !!(kinds & 8),
          !!(kinds & 16));
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    enum ofl_simd level;
    if (argc != 2 || ofl_simd_parse(argv[1], &level) != 0) {
        fprintf(stderr, "usage: test_crc32c scalar|avx2|avx512\n");
        return 2;
    }
    test_constants();
    const char *want = NULL, *lacks = expected_path(level, &want);
    if (lacks) {
        printf("skipped: CPU lacks %s (OFFLOW_SIMD=%s); table path and constants checked\n",
               lacks, argv[1]);
        test_values("table");
        return CHECK_DONE();
    }
    CHECK(setenv("OFFLOW_SIMD", argv[1], 1) == 0, "OFFLOW_SIMD=%s", argv[1]);
    CHECK(strcmp(ofl_crc32c_path(), want) == 0, "OFFLOW_SIMD=%s runs %s (wanted %s)", argv[1],
          ofl_crc32c_path(), want);
    test_values(ofl_crc32c_path());
    return CHECK_DONE();
}
