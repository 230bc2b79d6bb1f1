/* The live copy of a stats file, written beside it and renamed over it (live_file.h). */
#include "offlow/live_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "offlow/wait.h"

int ofl_live_write(const char *stats, const char *device, uint32_t seq, bool final,
                   ofl_live_body_fn body, const void *arg)
{
    if (!stats) return 0;
    char path[4096], tmp[4096];
    if (snprintf(path, sizeof path, "%s.live", stats) >= (int)sizeof path ||
        snprintf(tmp, sizeof tmp, "%s.live.tmp", stats) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    struct ofl_json j;
    memset(&j, 0, sizeof j);
    j.f = fopen(tmp, "w");
    if (!j.f) return -errno;
    ofl_json_begin_obj(&j, NULL);
    ofl_json_str(&j, "device", device);
    ofl_json_u64(&j, "live_seq", seq);
    if (final) ofl_json_u64(&j, "live_final", 1);
    ofl_json_u64(&j, "now_ns", ofl_now_ns());
    body(&j, arg);
    ofl_json_end_obj(&j);
    fputc('\n', j.f);
    /* what is still buffered is written at the close: its failure counts too */
    int err = ferror(j.f) ? EIO : 0;
    errno = 0;
    if (fclose(j.f) != 0 && !err) err = errno ? errno : EIO;
    if (!err && rename(tmp, path) < 0) err = errno;
    if (err) {
        unlink(tmp);
        return -err;
    }
    return 0;
}
