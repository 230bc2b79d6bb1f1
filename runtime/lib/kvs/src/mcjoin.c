/* Joining a memcached UDP reply's datagrams (mcjoin.h). */
#include "offlow/mcjoin.h"

#include <string.h>

#include "offlow/mcproto.h"

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

void ofl_mcjoin_start(struct ofl_mcjoin *j, uint16_t rid)
{
    j->rid = rid;
    j->total = j->got = 0;
    memset(j->plen, 0, sizeof j->plen);
}

int ofl_mcjoin_take(struct ofl_mcjoin *j, const uint8_t *d, size_t len)
{
    if (len < OFL_MC_UDP_HDR_LEN || len > OFL_MCJOIN_PART) return -1;
    unsigned rid = be16(d), seq = be16(d + 2), count = be16(d + 4);
    if (rid != j->rid || count > OFL_MCJOIN_PARTS || (j->total && count != j->total))
        return -1;
    if (count == 0) return j->total ? -1 : 1;   /* answered with nothing */
    if (seq >= count) return -1;
    j->total = count;
    if (!j->plen[seq]) j->got++;
    j->plen[seq] = (uint16_t)(len - OFL_MC_UDP_HDR_LEN + 1);
    memcpy(j->part[seq], d + OFL_MC_UDP_HDR_LEN, len - OFL_MC_UDP_HDR_LEN);
    return j->got == j->total;
}

int ofl_mcjoin_out(const struct ofl_mcjoin *j, struct ofl_mc_out *out)
{
    for (unsigned i = 0; i < j->total; i++) {
        size_t m = (size_t)j->plen[i] - 1;
        if (m == 0) continue;   /* (an empty output may have no buffer yet) */
        int rc = ofl_mc_out_reserve(out, m);
        if (rc) return rc;
        memcpy(out->buf + out->len, j->part[i], m);
        out->len += m;
    }
    return 0;
}
