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
