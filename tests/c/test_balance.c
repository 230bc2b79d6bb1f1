/* The run-time balancer (balance.h) against a simulated pair of servers whose speeds
 * the test sets: deterministic, no clock (the generated code's balancer, fed by
 * synthetic meters, waits for the clock to end each epoch but asserts no time). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "offlow/balance.h"
#include "offlow/wait.h"

#define EPOCH_NS 1e6
#define ONE ((double)OFL_BALANCE_ONE)

/* One epoch of a saturated producer in front of two servers: side i takes cost[i] ns a
 * packet; packets go out by ofl_balance_pick until the side picked would work past the
 * epoch (its queue is full: the producer waits for it). Returns the packets finished. */
static void sim_epoch_sides(struct ofl_balance *b, const double cost[2], uint64_t n[2],
                            uint64_t busy_ns[2]);
static uint64_t sim_epoch(struct ofl_balance *b, const double cost[2])
{
    uint64_t n[2], busy[2];
    sim_epoch_sides(b, cost, n, busy);
    return n[0] + n[1];
}

/* The same epoch, telling what each side finished and how long it was busy. */
static void sim_epoch_sides(struct ofl_balance *b, const double cost[2], uint64_t n[2],
                            uint64_t busy_ns[2])
{
    double busy[2] = {0, 0};
    n[0] = n[1] = 0;
    for (;;) {
        unsigned s = ofl_balance_pick(b);
        if (busy[s] + cost[s] > EPOCH_NS) break;
        busy[s] += cost[s];
        n[s]++;
    }
    busy_ns[0] = (uint64_t)busy[0];
    busy_ns[1] = (uint64_t)busy[1];
}

/* A uniform random number in [-1, 1] (a fixed-seed LCG: the runs repeat). */
static double noise(uint32_t *x)
{
    *x = *x * 1103515245u + 12345u;
    return ((*x >> 8) & 0xffffff) / (double)0xffffff * 2.0 - 1.0;
}

/* One epoch of the rate estimator: each side's service rate is its nominal one times
 * (1 + u), u uniform in [-amp, amp], drawn per side per epoch. Returns the packets. */
static uint64_t rates_epoch(struct ofl_balance *b, const double cost[2], double amp,
                            uint32_t *seed)
{
    double now[2];
    for (int i = 0; i < 2; i++) now[i] = cost[i] / (1.0 + amp * noise(seed));
    uint64_t n[2], busy[2];
    sim_epoch_sides(b, now, n, busy);
    ofl_balance_rates(b, n, busy);
    return n[0] + n[1];
}

/* `epochs` epochs of the rate estimator; returns the packets, and the mean share over
 * the last `tail` epochs in *mean_share (when not NULL). */
static uint64_t run_rates(struct ofl_balance *b, const double cost[2], double amp,
                          uint32_t *seed, int epochs, int tail, double *mean_share)
{
    uint64_t total = 0;
    double sum = 0;
    for (int i = 0; i < epochs; i++) {
        total += rates_epoch(b, cost, amp, seed);
        if (i >= epochs - tail) sum += b->share / ONE;
    }
    if (mean_share) *mean_share = sum / tail;
    return total;
}

/* The share of side 0 at which both sides finish together. */
static double balance_point(const double cost[2])
{
    return cost[1] / (cost[0] + cost[1]);
}

/* Run `epochs` epochs with the balancer; return the packets and the mean share (of
 * ONE) over the last `tail` epochs. */
static uint64_t run(struct ofl_balance *b, const double cost[2], int epochs, int tail,
                    double *mean_share)
{
    uint64_t total = 0;
    double sum = 0;
    for (int i = 0; i < epochs; i++) {
        uint64_t n = sim_epoch(b, cost);
        total += n;
        ofl_balance_epoch(b, n, (uint64_t)EPOCH_NS);
        if (i >= epochs - tail) sum += b->share / ONE;
    }
    if (mean_share) *mean_share = sum / tail;
    return total;
}

/* Packets a static split `share` finishes over the same run. */
static uint64_t run_static(uint32_t share, const double cost[2], int epochs)
{
    struct ofl_balance b;
    ofl_balance_init(&b, share, 1, 1);
    uint64_t total = 0;
    for (int i = 0; i < epochs; i++) total += sim_epoch(&b, cost);
    return total;
}

static void test_init_rejects_bad_arguments(void)
{
    struct ofl_balance b, before;
    memset(&b, 0x5a, sizeof b);
    before = b;
    CHECK(ofl_balance_init(&b, OFL_BALANCE_ONE + 1, 64, 4096) == -EINVAL, "share > one");
    CHECK(ofl_balance_init(&b, 100, 0, 4096) == -EINVAL, "min_step 0");
    CHECK(ofl_balance_init(&b, 100, 512, 256) == -EINVAL, "min_step > max_step");
    CHECK(ofl_balance_init(&b, 100, 64, OFL_BALANCE_ONE / 2 + 1) == -EINVAL, "max_step > half");
    CHECK(memcmp(&b, &before, sizeof b) == 0, "a refused init leaves the state untouched");
    CHECK(ofl_balance_init(&b, OFL_BALANCE_ONE, 1, OFL_BALANCE_ONE / 2) == 0, "edges accepted");
}

static void test_pick_gives_side_0_exactly_its_share(void)
{
    const uint32_t shares[] = {0, 1, 20000, 32768, 65535, OFL_BALANCE_ONE};
    for (unsigned k = 0; k < sizeof shares / sizeof shares[0]; k++) {
        struct ofl_balance b;
        ofl_balance_init(&b, shares[k], 1, 1);
        uint64_t zeros = 0, run0 = 0, longest = 0;
        for (uint32_t i = 0; i < 3 * OFL_BALANCE_ONE; i++) {
            unsigned s = ofl_balance_pick(&b);
            zeros += s == 0;
            run0 = s == 0 ? run0 + 1 : 0;
            if (run0 > longest) longest = run0;
        }
        CHECK(zeros == 3ull * shares[k], "share %u: side 0 took %llu of 3 x 65536", shares[k],
              (unsigned long long)zeros);
        if (shares[k] <= OFL_BALANCE_ONE / 2)
            CHECK(longest <= 1, "share %u: side 0 never gets two in a row (interleaved)",
                  shares[k]);
    }
}

static void test_an_idle_epoch_changes_nothing(void)
{
    struct ofl_balance b;
    ofl_balance_init(&b, 30000, 64, 4096);
    struct ofl_balance before = b;
    CHECK(ofl_balance_epoch(&b, 0, 1000) == 30000, "no packets: share kept");
    CHECK(ofl_balance_epoch(&b, 1000, 0) == 30000, "no time: share kept");
    CHECK(memcmp(&b, &before, sizeof b) == 0, "and nothing else moved");
}

/* From any start, the climb (rates 0) or the rate estimator (rates 1) settles near the
 * balance point and the last epoch finishes near the most two sides can. */
static void converges_from_every_start(int rates)
{
    /* side 0 a NIC core at 1/10, 1/5, equal to and 3x the host's speed */
    const double costs[][2] = {{1000, 100}, {500, 100}, {100, 100}, {100, 300}, {40, 900}};
    const uint32_t starts[] = {0, OFL_BALANCE_ONE / 2, OFL_BALANCE_ONE};
    const double tol = rates ? 0.01 : 0.02;
    for (unsigned c = 0; c < sizeof costs / sizeof costs[0]; c++) {
        for (unsigned s = 0; s < 3; s++) {
            struct ofl_balance b;
            ofl_balance_init(&b, starts[s], 256, 8192);
            uint32_t seed = 1;
            double mean;
            if (rates) run_rates(&b, costs[c], 0.0, &seed, 60, 20, &mean);
            else run(&b, costs[c], 120, 30, &mean);
            double want = balance_point(costs[c]);
            uint64_t last = sim_epoch(&b, costs[c]);
            double best = EPOCH_NS / costs[c][0] + EPOCH_NS / costs[c][1];
            CHECK(fabs(mean - want) < tol && last > 0.97 * best,
                  "%s, costs %g/%g from share %.2f: mean share %.4f (balance %.4f), last "
                  "epoch %llu packets of %.0f at best", rates ? "rates" : "climb",
                  costs[c][0], costs[c][1], starts[s] / ONE, mean, want,
                  (unsigned long long)last, best);
        }
    }
}

static void test_converges_to_the_balance_point(void)
{
    converges_from_every_start(0);
}

static void test_follows_a_change_of_mix(void)
{
    /* the work moves from the host's kind to the NIC's: the balance point jumps */
    const double before[2] = {1000, 100}, after[2] = {150, 300};
    struct ofl_balance b;
    ofl_balance_init(&b, OFL_BALANCE_ONE / 2, 256, 8192);
    run(&b, before, 100, 1, NULL);
    double mean;
    run(&b, after, 40, 10, &mean);
    CHECK(fabs(mean - balance_point(after)) < 0.02,
          "40 epochs after the change: mean share %.4f (balance %.4f)", mean,
          balance_point(after));
}

/* A run whose mix changes twice: the climb (rates 0) or the rate estimator (rates 1)
 * against the best of 257 static splits over the same run; it must beat it by `margin`. */
static void beats_the_best_static_split(int rates, double margin)
{
    const double phase[3][2] = {{1000, 100}, {150, 300}, {500, 100}};
    const int epochs = 100;
    struct ofl_balance b;
    ofl_balance_init(&b, OFL_BALANCE_ONE / 2, 256, 8192);
    uint32_t seed = 3;
    uint64_t adaptive = 0;
    for (int p = 0; p < 3; p++)
        adaptive += rates ? run_rates(&b, phase[p], 0.0, &seed, epochs, 1, NULL)
                          : run(&b, phase[p], epochs, 1, NULL);
    uint64_t best = 0;
    uint32_t best_share = 0;
    for (uint32_t share = 0; share <= OFL_BALANCE_ONE; share += OFL_BALANCE_ONE / 256) {
        uint64_t n = 0;
        for (int p = 0; p < 3; p++) n += run_static(share, phase[p], epochs);
        if (n > best) best = n, best_share = share;
    }
    CHECK(adaptive > margin * (double)best, "%s: adaptive %llu packets, best static split "
          "(%.4f) %llu: %.2fx", rates ? "rates" : "climb", (unsigned long long)adaptive,
          best_share / ONE, (unsigned long long)best, (double)adaptive / (double)best);
}

static void test_beats_the_best_static_split_when_the_mix_changes(void)
{
    beats_the_best_static_split(0, 1.0);
}

static void test_stays_near_balance_under_measurement_noise(void)
{
    const double cost[2] = {500, 100};
    struct ofl_balance b;
    ofl_balance_init(&b, 0, 256, 8192);
    uint32_t x = 12345;
    double sum = 0;
    for (int i = 0; i < 300; i++) {
        uint64_t n = sim_epoch(&b, cost);
        x = x * 1103515245u + 12345u;  /* +-1% noise, as a shared machine gives */
        double noisy = (double)n * (0.99 + 0.02 * ((x >> 16) & 0x7fff) / 32767.0);
        ofl_balance_epoch(&b, (uint64_t)noisy, (uint64_t)EPOCH_NS);
        if (i >= 200) sum += b.share / ONE;
    }
    CHECK(fabs(sum / 100 - balance_point(cost)) < 0.03, "noisy: mean share %.4f (balance %.4f)",
          sum / 100, balance_point(cost));
}

/* ---- the rate estimator (ofl_balance_rates) ---- */

static void test_rates_converge_to_the_balance_point(void)
{
    converges_from_every_start(1);
}

static void test_rates_hold_the_balance_point_under_50_percent_noise(void)
{
    /* each side's service rate moves by up to +-50% every epoch, independently */
    const double costs[][2] = {{1000, 100}, {500, 100}, {100, 100}, {100, 300}};
    for (unsigned c = 0; c < sizeof costs / sizeof costs[0]; c++) {
        double want = balance_point(costs[c]);
        struct ofl_balance b;
        ofl_balance_init(&b, OFL_BALANCE_ONE / 2, 256, 8192);
        uint32_t seed = 7 + c;
        double sum = 0, sq = 0;
        for (int i = 0; i < 400; i++) {
            rates_epoch(&b, costs[c], 0.5, &seed);
            double d = b.share / ONE - want;
            if (i >= 100) sum += d, sq += d * d;
        }
        /* the hill climber under the same noise, for the record (not checked) */
        struct ofl_balance h;
        ofl_balance_init(&h, OFL_BALANCE_ONE / 2, 256, 8192);
        double hsum = 0;
        for (int i = 0; i < 400; i++) {
            double now[2];
            for (int k = 0; k < 2; k++) now[k] = costs[c][k] / (1.0 + 0.5 * noise(&seed));
            ofl_balance_epoch(&h, sim_epoch(&h, now), (uint64_t)EPOCH_NS);
            if (i >= 100) hsum += h.share / ONE;
        }
        double rms = sqrt(sq / 300);
        CHECK(fabs(sum / 300) < 0.03 && rms < 0.15 * (want < 0.5 ? want : 1 - want) + 0.01,
              "rates, +-50%% noise, costs %g/%g: over 300 epochs the share is %.4f on "
              "average (balance %.4f), %.4f from it (rms; the hill climber under the same "
              "noise: %.4f on average)", costs[c][0], costs[c][1], want + sum / 300, want,
              rms, hsum / 300);
    }
}

/* Epochs after a change of side 0's rate until the share is within `tol` of the new
 * balance point and stays there for 20 epochs (-1: never within `limit`). */
static int epochs_to_follow(const double before[2], const double after[2], double amp,
                            double tol, int limit)
{
    struct ofl_balance b;
    ofl_balance_init(&b, OFL_BALANCE_ONE / 2, 256, 8192);
    uint32_t seed = 99;
    run_rates(&b, before, amp, &seed, 50, 1, NULL);
    int inside = 0;
    for (int i = 1; i <= limit + 20; i++) {
        rates_epoch(&b, after, amp, &seed);
        inside = fabs(b.share / ONE - balance_point(after)) < tol ? inside + 1 : 0;
        if (inside == 20) return i - 19 <= limit ? i - 19 : -1;
    }
    return -1;
}

static void test_rates_follow_a_step_change_within_a_few_epochs(void)
{
    /* side 0's rate jumps 6.7x (a NIC at 1/10 of the host's speed becomes one at 2x):
     * the balance point moves from 0.09 to 0.67 */
    const double before[2] = {1000, 100}, after[2] = {150, 300};
    int quiet = epochs_to_follow(before, after, 0.0, 0.02, 15);
    CHECK(quiet > 0, "a step change without noise: within 2%% of the new balance in %d epochs "
          "(at most 15)", quiet);
    int noisy = epochs_to_follow(before, after, 0.5, 0.06, 25);
    CHECK(noisy > 0, "the same with +-50%% noise: within 6%% in %d epochs (at most 25)",
          noisy);
    int back = epochs_to_follow(after, before, 0.0, 0.02, 15);
    CHECK(back > 0, "and back: within 2%% in %d epochs (at most 15)", back);
}

static void test_rates_beat_the_best_static_split_when_the_mix_changes(void)
{
    beats_the_best_static_split(1, 1.15);
}

static void test_rates_measure_both_sides_and_ignore_idle_epochs(void)
{
    struct ofl_balance b;
    ofl_balance_init(&b, 0, 256, 8192);
    const uint64_t none[2] = {0, 0}, t[2] = {1000, 1000};
    struct ofl_balance before = b;
    CHECK(ofl_balance_rates(&b, none, t) == 0 && memcmp(&b, &before, sizeof b) == 0,
          "an epoch with no packets changes nothing");
    const uint64_t only1[2] = {0, 500}, busy1[2] = {0, 100000};
    CHECK(ofl_balance_rates(&b, only1, busy1) == 256,
          "a side never measured (share 0) is given min_step of the packets: %u", b.share);
    const uint64_t both[2] = {100, 100}, busy[2] = {100000, 300000};
    uint32_t s = ofl_balance_rates(&b, both, busy);
    CHECK(s == 256 + 8192, "then the share moves towards r0/(r0+r1) by at most max_step: %u",
          s);
}

/* ofl_balance_run (time=wall when `wall`, else time=cpu) fed by synthetic meters for
 * `epochs` epochs of 1000 packets a side: side 0 is fast by its CPU time (1 ns a packet)
 * and slow by its wall time (9 ns: kept from a CPU 8 ns in 9), side 1 takes 3 ns a
 * packet by both. Returns the share it ends at. */
static double run_metered(int wall, int epochs)
{
    struct ofl_balance_side sides[2];
    memset(sides, 0, sizeof sides);
    struct ofl_balance_run r;
    memset(&r, 0, sizeof r);
    ofl_balance_init(&r.b, OFL_BALANCE_ONE / 2, 256, 8192);
    r.adapt = 1;
    r.wall = wall;
    r.sides = sides;
    r.epoch_ns = 1;
    const uint64_t cpu_ns[2] = {1, 3}, wall_ns[2] = {9, 3};
    ofl_balance_tick(&r);  /* the first epoch starts */
    for (int e = 1; e <= epochs; e++) {
        for (int i = 0; i < 2; i++)
            ofl_balance_meter(&sides[i], 1000u * (uint64_t)e, 1000u * cpu_ns[i] * (uint64_t)e,
                              1000u * wall_ns[i] * (uint64_t)e);
        /* (the epoch ends once the clock has moved on: waited for, not asserted) */
        const uint64_t t0 = ofl_now_ns();
        while (ofl_now_ns() - t0 < 2) {
        }
        ofl_balance_tick(&r);
    }
    CHECK(r.rate_epochs == (uint64_t)epochs, "every epoch was decided by the rates: %llu",
          (unsigned long long)r.rate_epochs);
    return (double)r.b.share / ONE;
}

static void test_the_run_balancer_reads_wall_or_cpu_time_as_told(void)
{
    /* wall: r0 = 1/9, r1 = 1/3 -> 0.25; cpu: r0 = 1, r1 = 1/3 -> 0.75 */
    double w = run_metered(1, 40), c = run_metered(0, 40);
    CHECK(fabs(w - 0.25) < 1.0 / ONE, "time=wall sets the share by the wall rates: %f", w);
    CHECK(fabs(c - 0.75) < 1.0 / ONE, "time=cpu sets the share by the CPU rates: %f", c);
}

int main(void)
{
    test_init_rejects_bad_arguments();
    test_pick_gives_side_0_exactly_its_share();
    test_an_idle_epoch_changes_nothing();
    test_converges_to_the_balance_point();
    test_follows_a_change_of_mix();
    test_beats_the_best_static_split_when_the_mix_changes();
    test_stays_near_balance_under_measurement_noise();
    test_rates_converge_to_the_balance_point();
    test_rates_hold_the_balance_point_under_50_percent_noise();
    test_rates_follow_a_step_change_within_a_few_epochs();
    test_rates_beat_the_best_static_split_when_the_mix_changes();
    test_rates_measure_both_sides_and_ignore_idle_epochs();
    test_the_run_balancer_reads_wall_or_cpu_time_as_told();
    return CHECK_DONE();
}
