/* CRC32C (Castagnoli, the iSCSI / ext4 / SCTP checksum): the end-to-end check of
 * bulk channel transfers. */
#ifndef OFL_CRC32C_H
#define OFL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C of `len` bytes at `buf`, continuing from `crc` (start with 0; feeding a
 * buffer in pieces gives the CRC of the whole). Buffers of 256 bytes and more fold
 * with VPCLMULQDQ on 512-bit (AVX-512) or 256-bit (AVX2) vectors as ofl_simd_level()
 * allows; otherwise the SSE4.2 crc32 instruction (three interleaved streams for large
 * buffers) when the CPU has it, a table without it. crc32c("123456789") == 0xE3069283. */
uint32_t ofl_crc32c(uint32_t crc, const void *buf, size_t len);

/* Copy `len` bytes from `src` to `dst` (not overlapping) and return the CRC32C of
 * the copied bytes continuing from `crc`, block by block while they are in cache. */
uint32_t ofl_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/* The path buffers of 256 bytes and more take now: "avx512+vpclmulqdq",
 * "avx2+vpclmulqdq", "sse4.2" or "table" (benchmarks print it; OFFLOW_SIMD caps it). */
const char *ofl_crc32c_path(void);

/* The same value computed with the portable table only (tests compare the two). */
uint32_t ofl_crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif
