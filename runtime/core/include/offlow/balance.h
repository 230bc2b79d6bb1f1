/* Run-time balance between two sides that run the same data-parallel segment (a device
 * and the host): NBA's adaptive load balancing, the active-NIC seed's key finding.
 *
 * The producer sends each packet to side 0 or side 1 (ofl_balance_pick), in the
 * proportion `share` (per OFL_BALANCE_ONE packets, to side 0), by a weighted round robin:
 * deterministic, no random numbers, exact over every OFL_BALANCE_ONE packets. At the end
 * of each epoch the producer reports the packets both sides finished in it and its
 * length (ofl_balance_epoch); the balancer climbs the hill of measured throughput: it
 * keeps moving `share` the way that raised the throughput, doubling its step once the
 * throughput rose three times in a row (so a changed mix is followed in a few epochs), and
 * turns back with half the step when it fell. Near the balance point it moves by `min_step` either
 * way. The state belongs to one producer thread; nothing in it is shared. */
#ifndef OFL_BALANCE_H
#define OFL_BALANCE_H

#include <stdint.h>

/* A share of all packets: OFL_BALANCE_ONE = every packet to side 0. */
#define OFL_BALANCE_ONE 65536u

/* One producer's balance state (see above). */
struct ofl_balance {
    uint32_t share;      /* packets to side 0, per OFL_BALANCE_ONE */
    uint32_t step;       /* the size of the next move of `share` */
    uint32_t min_step;   /* the smallest and largest move */
    uint32_t max_step;
    int32_t dir;         /* +1: the next move gives side 0 more; -1: less */
    uint32_t rises;      /* epochs in a row whose throughput did not fall */
    uint32_t acc;        /* the weighted round robin's credit */
    double last_rate;    /* packets per ns in the last epoch (< 0: none yet) */
    uint64_t epochs;     /* epochs reported with packets and time */
    uint64_t turns;      /* times the climb turned back */
};

/* Start `b` at `share` (0..OFL_BALANCE_ONE) with moves of `min_step`..`max_step`
 * (1 <= min_step <= max_step <= OFL_BALANCE_ONE / 2); the first move is max_step,
 * towards side 0 when share is below half, else towards side 1.
 * Returns 0, or -EINVAL (and leaves `b` untouched) when an argument is out of range. */
int ofl_balance_init(struct ofl_balance *b, uint32_t share, uint32_t min_step,
                     uint32_t max_step);

/* End an epoch in which both sides together finished `packets` in `ns` nanoseconds:
 * move `share` (see above) and return it. An epoch of no time or no packets (the
 * producer was idle: nothing was measured) leaves everything as it was. */
uint32_t ofl_balance_epoch(struct ofl_balance *b, uint64_t packets, uint64_t ns);

/* The side (0 or 1) the next packet goes to. */
static inline unsigned ofl_balance_pick(struct ofl_balance *b)
{
    b->acc += b->share;
    if (b->acc >= OFL_BALANCE_ONE) {
        b->acc -= OFL_BALANCE_ONE;
        return 0;
    }
    return 1;
}

#endif
