/* The handshake proof: HMAC-SHA256 through OpenSSL. */
#include "offlow/remote_auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

int ofl_auth_nonce(uint8_t nonce[OFL_AUTH_NONCE])
{
    size_t got = 0;
    while (got < OFL_AUTH_NONCE) {
        ssize_t n = getrandom(nonce + got, OFL_AUTH_NONCE - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        got += (size_t)n;
    }
    return 0;
}

int ofl_auth_prove(const uint8_t *secret, size_t secret_len, enum ofl_auth_role role,
                   const uint8_t nonce[OFL_AUTH_NONCE], uint8_t mac[OFL_AUTH_MAC])
{
    if (!secret || secret_len < OFL_AUTH_SECRET_MIN || secret_len > OFL_AUTH_SECRET_MAX)
        return -EINVAL;
    uint8_t msg[OFL_AUTH_NONCE + 1];
    msg[0] = (uint8_t)role;
    for (size_t i = 0; i < OFL_AUTH_NONCE; i++) msg[1 + i] = nonce[i];
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), secret, (int)secret_len, msg, sizeof msg, mac, &len) ||
        len != OFL_AUTH_MAC)
        return -EIO;
    return 0;
}

int ofl_auth_check(const uint8_t *secret, size_t secret_len, enum ofl_auth_role role,
                   const uint8_t nonce[OFL_AUTH_NONCE], const uint8_t mac[OFL_AUTH_MAC])
{
    uint8_t want[OFL_AUTH_MAC];
    int rc = ofl_auth_prove(secret, secret_len, role, nonce, want);
    if (rc) return rc;
    return CRYPTO_memcmp(want, mac, OFL_AUTH_MAC) ? -EACCES : 0;
}
