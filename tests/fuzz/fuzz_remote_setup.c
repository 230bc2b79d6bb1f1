/* libFuzzer target: a remote device's run setup (remote_setup.h, ofl_setup_parse),
 * what an authenticated host sends the device's server. The input is [header bytes]
 * [header][data]. Accepted: the limits hold, every direction is o, i or -, and the
 * arguments lie in the copy, each ending with its NUL, one after another, together
 * exactly the data after the directions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/remote_setup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ofl_setup s;
    if (size < 1) return 0;
    size_t hlen = data[0] < size - 1 ? data[0] : size - 1;
    size_t len = size - 1 - hlen;
    uint8_t *hdr = malloc(hlen ? hlen : 1), *body = malloc(len ? len : 1);   /* exact */
    memcpy(hdr, data + 1, hlen);
    memcpy(body, data + 1 + hlen, len);
    char err[160];
    if (ofl_setup_parse(&s, hdr, hlen, body, len, err, sizeof err) == 0) {
        if (hlen != sizeof s.hdr || s.hdr.nrings > OFL_SETUP_MAX_RINGS ||
            s.hdr.npeers > OFL_SETUP_MAX_PEERS || !s.hdr.exe_size ||
            s.hdr.exe_size > OFL_SETUP_MAX_EXE || s.argc > OFL_SETUP_MAX_ARGS ||
            s.argv[s.argc] != NULL)
            abort();
        for (uint32_t i = 0; i < s.hdr.nrings; i++)
            if (!strchr("oi-", s.dirs[i]) || !s.dirs[i]) abort();
        size_t at = s.hdr.nrings;
        for (uint32_t i = 0; i < s.argc; i++) {
            if (s.argv[i] != s.buf + at || memcmp(s.argv[i], body + at, strlen(s.argv[i])))
                abort();
            at += strlen(s.argv[i]) + 1;
        }
        if (at != len) abort();
    }
    free(hdr);
    free(body);
    return 0;
}
