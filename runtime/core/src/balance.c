/* Hill climbing of the share of packets each of two sides takes (see balance.h). */
#include "offlow/balance.h"

#include <errno.h>

int ofl_balance_init(struct ofl_balance *b, uint32_t share, uint32_t min_step,
                     uint32_t max_step)
{
    if (share > OFL_BALANCE_ONE || min_step < 1 || min_step > max_step ||
        max_step > OFL_BALANCE_ONE / 2)
        return -EINVAL;
    *b = (struct ofl_balance){
        .share = share, .step = max_step, .min_step = min_step, .max_step = max_step,
        .dir = share < OFL_BALANCE_ONE / 2 ? 1 : -1, .rises = 0, .acc = 0,
        .last_rate = -1.0,
    };
    return 0;
}

/* `share` moved by `step` in direction `dir`, kept within 0..OFL_BALANCE_ONE. */
static uint32_t moved(uint32_t share, uint32_t step, int32_t dir)
{
    if (dir > 0)
        return OFL_BALANCE_ONE - share < step ? OFL_BALANCE_ONE : share + step;
    return share < step ? 0 : share - step;
}

uint32_t ofl_balance_epoch(struct ofl_balance *b, uint64_t packets, uint64_t ns)
{
    if (!packets || !ns) return b->share;
    double rate = (double)packets / (double)ns;
    if (b->last_rate >= 0.0) {
        if (rate >= b->last_rate) {
            /* the last moves helped: go on, faster from the third on (the first after
             * turning back only retraces the last move) */
            if (++b->rises >= 3)
                b->step = b->step > b->max_step / 2 ? b->max_step : b->step * 2;
        } else {
            b->rises = 0;
            b->dir = -b->dir;
            b->turns++;
            b->step = b->step / 2 < b->min_step ? b->min_step : b->step / 2;
        }
    }
    b->last_rate = rate;
    b->epochs++;
    uint32_t next = moved(b->share, b->step, b->dir);
    if (next == b->share) {
        /* at an edge already: the only move is back */
        b->dir = -b->dir;
        next = moved(b->share, b->step, b->dir);
    }
    b->share = next;
    return b->share;
}

uint32_t ofl_balance_rates(struct ofl_balance *b, const uint64_t packets[2],
                           const uint64_t busy_ns[2])
{
    int measured = 0;
    for (int i = 0; i < 2; i++) {
        if (!packets[i] || !busy_ns[i]) continue;
        measured = 1;
        if (b->ns[i] > 0) {
            b->pk[i] += ((double)packets[i] - b->pk[i]) / OFL_BALANCE_SMOOTH;
            b->ns[i] += ((double)busy_ns[i] - b->ns[i]) / OFL_BALANCE_SMOOTH;
        } else {
            b->pk[i] = (double)packets[i];
            b->ns[i] = (double)busy_ns[i];
        }
    }
    if (!measured) return b->share;
    b->epochs++;
    double lo = b->min_step, hi = (double)OFL_BALANCE_ONE - b->min_step, want = b->share;
    if (b->ns[0] > 0 && b->ns[1] > 0) {
        double r0 = b->pk[0] / b->ns[0], r1 = b->pk[1] / b->ns[1];
        want = (double)OFL_BALANCE_ONE * r0 / (r0 + r1);
    }
    /* each side keeps some packets: an unmeasured side gets its first ones */
    want = want < lo ? lo : want > hi ? hi : want;
    double move = want - (double)b->share;
    if (move > b->max_step) move = b->max_step;
    if (move < -(double)b->max_step) move = -(double)b->max_step;
    b->share = (uint32_t)((double)b->share + move + 0.5);
    return b->share;
}
