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
 * way.
 *
 * Where each side's own busy time is known (ofl_balance_rates), the balancer instead sets
 * `share` from the two sides' service rates: r_i = packets side i finished per ns of its
 * own busy time, each smoothed over epochs (an exponential average of the packets and of
 * the busy time, weight 1/OFL_BALANCE_SMOOTH for the newest epoch), and share = r0 / (r0
 * + r1), the split at which both sides finish together, reached by moves of at most
 * `max_step` an epoch. Why: a climb judges each move by the sign of the difference of two
 * epochs' throughputs, which a noise of a few percent flips when neighbouring shares
 * differ by less; the ratio of two averaged rates is off by only as much as the averaged
 * noise, and a side's own busy time barely moves with other load on the machine. Each
 * side keeps at least `min_step` of the packets, so that its rate stays measured. The
 * state belongs to one producer thread; nothing in it is shared. */
#ifndef OFL_BALANCE_H
#define OFL_BALANCE_H

#include <stdint.h>

/* A share of all packets: OFL_BALANCE_ONE = every packet to side 0. */
#define OFL_BALANCE_ONE 65536u

/* The newest epoch's weight in the smoothed rates is 1/OFL_BALANCE_SMOOTH. */
#define OFL_BALANCE_SMOOTH 4.0

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
    double pk[2], ns[2]; /* the smoothed packets and busy ns of each side (ns 0: none yet) */
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

/* End an epoch in which side i finished packets[i] in busy_ns[i] ns of its own busy time:
 * set `share` from the two sides' smoothed service rates (see above) and return it. A
 * side with no packets or no time keeps its last rate. Until both sides have a rate,
 * `share` only moves to give each side at least `min_step`; an epoch where neither side
 * measured anything changes nothing. */
uint32_t ofl_balance_rates(struct ofl_balance *b, const uint64_t packets[2],
                           const uint64_t busy_ns[2]);

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

/* ---- the balancer of a segment placed on two devices (generated code) ------------ */

struct ofl_args;
struct ofl_json;

/* What one side's core has done so far, written by the meter at the head of its copy of
 * the segment and read by the balancer (the compiler's table NAME_rates, in the window:
 * the two sides may be different processes). One cache line per side. */
struct ofl_balance_side {
    uint64_t packets;  /* packets the side's core took in */
    uint64_t busy_ns;  /* its CPU time in turns that moved packets, less its waits
                          (struct ofl_core's busy_cpu_ns; 0 where it is not counted) */
    uint64_t wall_ns;  /* those turns' wall time, less the waits (busy_wall_ns): the CPU
                          time and the time the side was kept from a CPU meanwhile */
    uint8_t pad_[40];
};
_Static_assert(sizeof(struct ofl_balance_side) == 64, "one cache line a side");

/* The meter: publish a side's counts (a store each; the balancer reads them once an
 * epoch, so a torn pair costs one epoch's accuracy at most). */
static inline void ofl_balance_meter(struct ofl_balance_side *s, uint64_t packets,
                                     uint64_t busy_ns, uint64_t wall_ns)
{
    __atomic_store_n(&s->packets, packets, __ATOMIC_RELAXED);
    __atomic_store_n(&s->busy_ns, busy_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&s->wall_ns, wall_ns, __ATOMIC_RELAXED);
}

/* The compiler's split of a segment on two devices: a table object of the segment
 * feeding it, used by one core. It hands each packet to a side and ends an epoch when
 * `epoch_ns` have passed (the clock is read every 64 packets): where the sides' meters
 * report busy time it sets the share from their rates (ofl_balance_rates), else it
 * climbs (ofl_balance_epoch); with `adapt` off the share stays where it started (a
 * static split, for comparison). */
struct ofl_balance_run {
    struct ofl_balance b;
    int adapt;
    int wall;               /* the rates per busy wall ns (time=wall, the default), else
                               per busy CPU ns (time=cpu) */
    const struct ofl_balance_side *sides; /* the meters' counts (the window's table) */
    uint64_t seen_packets[2], seen_busy[2]; /* their values at the epoch's start */
    uint64_t rate_epochs;   /* epochs decided by the sides' rates */
    uint64_t epoch_ns;      /* an epoch's length */
    uint64_t epoch_start;   /* when the current epoch began (0: at the next packet) */
    uint64_t epoch_packets; /* packets handed out in it */
    uint64_t sent[2];       /* packets handed to each side in all */
    double share_sum;       /* the sum of the share over the epochs, for its mean */
    uint64_t ticks;         /* the epochs ended, for the mean */
};

/* Open the balancer `name` from the options NAME.share (side 0's share at the start,
 * 0..1, default 0.5), NAME.adapt (on|off, default on), NAME.time (cpu|wall: what the
 * sides' rates are per, default wall), NAME.epoch_us (1..10^7, default
 * 10000), NAME.min_step and NAME.max_step (fractions of all packets, default 1/256 and
 * 1/8). Returns 0, -EINVAL (a bad option, said on stderr) or -ENOMEM. */
int ofl_balance_open(struct ofl_balance_run **r, const struct ofl_args *a, const char *name);

/* Free a balancer (NULL: nothing). */
void ofl_balance_close(struct ofl_balance_run *r);

/* Write balancer `name`'s counters (final and mean share, packets per side, epochs,
 * turns) to the stats file. */
void ofl_balance_stats(struct ofl_json *j, const char *name, const struct ofl_balance_run *r);

/* End the epoch when its time is up (called every 64 packets). */
void ofl_balance_tick(struct ofl_balance_run *r);

/* The side (0 or 1) the next packet goes to, counted; `sides`: the meters' table. */
static inline unsigned ofl_balance_next(struct ofl_balance_run *r,
                                        const struct ofl_balance_side *sides)
{
    r->sides = sides;
    unsigned side = ofl_balance_pick(&r->b);
    r->sent[side]++;
    if ((++r->epoch_packets & 63) == 0) ofl_balance_tick(r);
    return side;
}

#endif
