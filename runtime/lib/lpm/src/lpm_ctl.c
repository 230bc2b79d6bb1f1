/* Control messages of the route tables (lpm_tables.h, runtime/core ctl.h): info, route
 * add and delete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "offlow/ctl.h"
#include "offlow/lpm_tables.h"

/* The route of an add or delete message: its length, hop (add) and address; any
 * other message (or a wrong size) is answered with the error here. */
static int route_of(const uint8_t *msg, size_t len, uint8_t *plen, uint16_t *hop,
                    const uint8_t **addr, struct ofl_ctl_reply *r)
{
    if (msg[0] != OFL_CTL_ROUTE_ADD && msg[0] != OFL_CTL_ROUTE_DEL) {
        ofl_ctl_fail(r, -EOPNOTSUPP, "a route table takes route add and delete, not '%c'",
                     msg[0] >= 32 && msg[0] < 127 ? msg[0] : '?');
        return -EOPNOTSUPP;
    }
    size_t want = msg[0] == OFL_CTL_ROUTE_ADD ? 20 : 18;
    if (len != want) {
        ofl_ctl_fail(r, -EINVAL, "route message of %zu bytes, want %zu", len, want);
        return -EINVAL;
    }
    *plen = msg[1];
    *hop = 0;
    if (msg[0] == OFL_CTL_ROUTE_ADD) memcpy(hop, msg + 2, 2);
    *addr = msg + want - 16;
    return 0;
}

void ofl_lpm4_ctl(struct ofl_lpm4 *t, const uint8_t *msg, size_t len, struct ofl_ctl_reply *r)
{
    if (len == 0) {
        ofl_ctl_fail(r, -EINVAL, "empty message");
        return;
    }
    if (msg[0] == OFL_CTL_INFO) {
        struct ofl_ctl_info in = {OFL_CTL_LPM4, 'u', 2, 0, ofl_lpm4_count(t), t->updates};
        ofl_ctl_ok(r, &in, sizeof in);
        return;
    }
    uint8_t plen;
    uint16_t hop;
    const uint8_t *a;
    if (route_of(msg, len, &plen, &hop, &a, r) < 0) return;
    uint32_t addr = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
    char err[256] = "";
    int rc = msg[0] == OFL_CTL_ROUTE_ADD ? ofl_lpm4_add(t, addr, plen, hop, err)
                                         : ofl_lpm4_del(t, addr, plen, err);
    if (rc < 0) ofl_ctl_fail(r, rc, "%s", err);
    else ofl_ctl_ok(r, NULL, 0);
}

void ofl_lpm6_ctl(struct ofl_lpm6 *t, const uint8_t *msg, size_t len, struct ofl_ctl_reply *r)
{
    if (len == 0) {
        ofl_ctl_fail(r, -EINVAL, "empty message");
        return;
    }
    if (msg[0] == OFL_CTL_INFO) {
        /* info, then lookups begun and lookups begun while a rebuild ran */
        uint64_t b[5] = {0, 0, 0, ofl_lpm6_entered(t), t->live ? t->live->during : 0};
        struct ofl_ctl_info in = {OFL_CTL_LPM6, 'u', 2, 0, ofl_lpm6_count(t),
                                  t->live ? t->live->updates : 0};
        _Static_assert(sizeof in == 3 * sizeof b[0], "info is three words");
        memcpy(b, &in, sizeof in);
        ofl_ctl_ok(r, b, sizeof b);
        return;
    }
    char err[256] = "";
    int rc;
    if (msg[0] == OFL_CTL_BATCH_BEGIN && len == 1) {
        ofl_lpm6_unstage(t);
        ofl_ctl_ok(r, NULL, 0);
        return;
    }
    if (msg[0] == OFL_CTL_BATCH_COMMIT && len == 1) {
        size_t n;
        if ((rc = ofl_lpm6_commit(t, &n, err)) < 0) {
            ofl_ctl_fail(r, rc, "%s", err);
        } else {
            uint64_t applied = n;
            ofl_ctl_ok(r, &applied, sizeof applied);
        }
        return;
    }
    /* A staged update is a route message under its capital letter. */
    int staged = msg[0] == OFL_CTL_STAGE_ADD || msg[0] == OFL_CTL_STAGE_DEL;
    uint8_t m[20];
    if (staged) {  /* (route_of refuses a wrong size before reading past m's 20 bytes) */
        memcpy(m, msg, len < sizeof m ? len : sizeof m);
        m[0] = msg[0] == OFL_CTL_STAGE_ADD ? OFL_CTL_ROUTE_ADD : OFL_CTL_ROUTE_DEL;
        msg = m;
    }
    uint8_t plen;
    uint16_t hop;
    const uint8_t *a;
    if (route_of(msg, len, &plen, &hop, &a, r) < 0) {
        if (staged) ofl_lpm6_refuse(t);  /* a batch missing an update is no batch */
        return;
    }
    if (staged) {
        struct ofl_lpm6_op op = {.hop = hop, .len = plen};
        memcpy(op.addr, a, 16);
        rc = ofl_lpm6_stage(t, &op, msg[0] == OFL_CTL_ROUTE_ADD, err);
    } else {
        rc = msg[0] == OFL_CTL_ROUTE_ADD ? ofl_lpm6_add(t, a, plen, hop, err)
                                         : ofl_lpm6_del(t, a, plen, err);
    }
    if (rc < 0) ofl_ctl_fail(r, rc, "%s", err);
    else ofl_ctl_ok(r, NULL, 0);
}
