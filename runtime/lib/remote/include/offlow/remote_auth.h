/* The remote device's handshake proof: HMAC-SHA256 (OpenSSL) of a peer's random nonce
 * under the run's shared secret, so the secret itself never crosses the network.
 * Each side sends a fresh nonce and checks the other's proof of it (mutual). */
#ifndef OFL_REMOTE_AUTH_H
#define OFL_REMOTE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define OFL_AUTH_NONCE 32  /* bytes of a nonce */
#define OFL_AUTH_MAC 32    /* bytes of a proof (SHA-256) */
#define OFL_AUTH_SECRET_MIN 16  /* a shorter secret is refused */
#define OFL_AUTH_SECRET_MAX 4096

/* The proof domains: the client proves the server's nonce under "client", the server
 * the client's under "server", so one side's proof never answers the other's. */
enum ofl_auth_role { OFL_AUTH_CLIENT = 0, OFL_AUTH_SERVER = 1 };

/* Fill `nonce` with OFL_AUTH_NONCE random bytes (getrandom). Returns 0 or -errno. */
int ofl_auth_nonce(uint8_t nonce[OFL_AUTH_NONCE]);

/* The proof by `role` of `nonce` under `secret` (secret_len within
 * OFL_AUTH_SECRET_MIN..MAX). Returns 0, -EINVAL (secret length) or -EIO (OpenSSL). */
int ofl_auth_prove(const uint8_t *secret, size_t secret_len, enum ofl_auth_role role,
                   const uint8_t nonce[OFL_AUTH_NONCE], uint8_t mac[OFL_AUTH_MAC]);

/* Check `mac` as `role`'s proof of `nonce` (constant time). Returns 0, -EACCES (wrong
 * proof) or prove's errors. */
int ofl_auth_check(const uint8_t *secret, size_t secret_len, enum ofl_auth_role role,
                   const uint8_t nonce[OFL_AUTH_NONCE], const uint8_t mac[OFL_AUTH_MAC]);

#endif
