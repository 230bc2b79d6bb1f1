/* The folding constants of CRC32C (crc32c.c): for a fold distance of D bits,
 * x^(63+D) mod P (LO, multiplies an accumulator's low 64 bits) and x^(D-1) mod P (HI,
 * its high 64 bits), P the Castagnoli polynomial 0x11EDC6F41. Each is the remainder
 * bit-reflected into the high 32 bits of a 64-bit carry-less multiply operand (bit i
 * holds the coefficient of x^(63-i)). Computed by polynomial arithmetic over GF(2);
 * tests/c/test_crc32c.c derives each one again in portable C and compares. */
#ifndef OFL_CRC32C_FOLD_H
#define OFL_CRC32C_FOLD_H

#define OFL_CRC_K_2048_LO 0xe9a5d8be00000000ull
#define OFL_CRC_K_2048_HI 0x1426a81500000000ull
#define OFL_CRC_K_1536_LO 0x7ccbbbf200000000ull
#define OFL_CRC_K_1536_HI 0x31c9460800000000ull
#define OFL_CRC_K_1024_LO 0x6577b24500000000ull
#define OFL_CRC_K_1024_HI 0x7417153f00000000ull
#define OFL_CRC_K_768_LO 0xc92f998d00000000ull
#define OFL_CRC_K_768_HI 0x3365346a00000000ull
#define OFL_CRC_K_512_LO 0x1c19243b00000000ull
#define OFL_CRC_K_512_HI 0x75bba45b00000000ull
#define OFL_CRC_K_256_LO 0x33ccbbbc00000000ull
#define OFL_CRC_K_256_HI 0xa2158b3400000000ull
#define OFL_CRC_K_128_LO 0x3743f7bd00000000ull
#define OFL_CRC_K_128_HI 0x3171d43000000000ull

#endif
