/* MD5, and MD5 over K interleaved chains (the active-NIC seed's scheme).
 *
 * The chained digest of a message: cut it into 64-byte blocks (the last may be
 * shorter); block i belongs to chain i mod K; each chain is the MD5 of its blocks
 * concatenated in order (an empty chain is the MD5 of nothing); the result is the MD5 of
 * the K chain digests concatenated (16K bytes: one MD5 block for K <= 3, two for K = 4).
 * K = 1 is MD5(MD5(message)), not plain MD5.
 *
 * The chains are independent, so one core runs them interleaved: each MD5 step is done
 * for several chains before the next, and their dependency chains overlap in the
 * pipeline (instruction-level parallelism), while several cores can each take chains of
 * their own. Hand-written here because that interleaving is the point; plain MD5 is the
 * one-chain path of the same code. */
#ifndef OFL_MD5X_H
#define OFL_MD5X_H

#include <stddef.h>
#include <stdint.h>

#define OFL_MD5_LEN 16
#define OFL_MD5X_MAX_K 16 /* chains per message */

/* The MD5 digest of `len` bytes at `msg` into `out`. */
void ofl_md5(const uint8_t *msg, size_t len, uint8_t out[OFL_MD5_LEN]);

/* The K-chain digest (above) of `len` bytes at `msg` into `out`. Returns 0, or -EINVAL
 * when k is 0 or over OFL_MD5X_MAX_K (nothing written). */
int ofl_md5_chains(const uint8_t *msg, size_t len, unsigned k, uint8_t out[OFL_MD5_LEN]);

/* The K chain digests alone (what each of K cores would send on), K * 16 bytes into
 * `out`; same arguments and errors as ofl_md5_chains. */
int ofl_md5_chain_digests(const uint8_t *msg, size_t len, unsigned k, uint8_t *out);

#endif
