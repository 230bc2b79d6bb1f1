/* CBC encryption and decryption per flow with PKCS#7 padding: AES-128 (OpenSSL's EVP,
 * AES-NI where the CPU has it) or Blowfish (OpenSSL's BF_* functions), keys and IVs per
 * IPv4/UDP flow from a table the user writes.
 *
 * The key table is text, one flow per line (`#` starts a comment):
 *     SRC:SPORT DST:DPORT KEY IV
 * IPv4 addresses and ports as the datagrams carry them, KEY and IV in hex: AES-128 a
 * 16-byte key and IV; Blowfish a key of 4..56 bytes and an 8-byte IV. A flow listed
 * twice is an error. Every packet of a flow is one CBC message that starts from the
 * flow's IV. The table is shared by all the cores of a device: a flow's keys are set
 * up once, and the cipher contexts a packet uses are taken from a small pool per flow
 * (AES) or need none (Blowfish's key schedule is read-only). */
#ifndef OFL_CBC_H
#define OFL_CBC_H

#include <stddef.h>
#include <stdint.h>

struct ofl_args;

enum ofl_cbc_cipher { OFL_CBC_AES128 = 1, OFL_CBC_BLOWFISH = 2 };

/* Errors of ofl_cbc_encrypt / ofl_cbc_decrypt besides -ENOMEM. */
#define OFL_CBC_ESPACE (-1001)   /* the padded ciphertext does not fit the output */
#define OFL_CBC_EBLOCKS (-1002)  /* ciphertext empty or not a whole number of blocks */
#define OFL_CBC_EPADDING (-1003) /* the decrypted padding is not PKCS#7's */
#define OFL_CBC_ECIPHER (-1004)  /* OpenSSL refused (it should not) */

struct ofl_cbc_table;
struct ofl_cbc_flow;

/* Parse a key table (text above, `len` bytes, need not end in NUL) for `cipher` into
 * *t. Returns 0, -EINVAL with the line and the reason in `errbuf` (256 bytes), or
 * -ENOMEM. An empty table is valid. */
int ofl_cbc_table_parse(struct ofl_cbc_table **t, const char *text, size_t len,
                        enum ofl_cbc_cipher cipher, char *errbuf);

/* A table object of a program: options NAME.path= (the key table's file) and
 * NAME.cipher=aes-128-cbc|bf-cbc. Returns 0 or a negative errno (said on stderr). */
int ofl_cbc_table_open_opts(struct ofl_cbc_table **t, const struct ofl_args *a,
                            const char *name);

/* Free a table (NULL: nothing). */
void ofl_cbc_table_close(struct ofl_cbc_table *t);

/* How many flows it has. */
size_t ofl_cbc_table_size(const struct ofl_cbc_table *t);

/* The cipher's block size in bytes (16 or 8). */
unsigned ofl_cbc_block(const struct ofl_cbc_table *t);

/* The flow with these addresses and ports (host byte order), or NULL. */
struct ofl_cbc_flow *ofl_cbc_find(const struct ofl_cbc_table *t, uint32_t src4, uint32_t dst4,
                                  uint16_t sport, uint16_t dport);

/* Encrypt `len` bytes at `in` (PKCS#7-padded to whole blocks) with flow `f`'s key and IV
 * into `out` (`cap` bytes; `out` may be `in`). Returns the ciphertext's length,
 * OFL_CBC_ESPACE (nothing written), OFL_CBC_ECIPHER or -ENOMEM. */
long ofl_cbc_encrypt(const struct ofl_cbc_table *t, struct ofl_cbc_flow *f, const uint8_t *in,
                     size_t len, uint8_t *out, size_t cap);

/* Decrypt `len` bytes at `in` into `out` (`len` bytes; may be `in`) and remove the
 * padding. Returns the plaintext's length, OFL_CBC_EBLOCKS (nothing written),
 * OFL_CBC_EPADDING (`out` holds garbage the caller must not pass on),
 * OFL_CBC_ECIPHER or -ENOMEM. */
long ofl_cbc_decrypt(const struct ofl_cbc_table *t, struct ofl_cbc_flow *f, const uint8_t *in,
                     size_t len, uint8_t *out);

#endif
