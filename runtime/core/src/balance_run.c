/* The balancer of a segment placed on two devices, as generated code uses it: options,
 * epochs timed by the clock, stats (see balance.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/balance.h"
#include "offlow/gen.h"
#include "offlow/stats.h"
#include "offlow/wait.h"

/* Option NAME.KEY as a number within [lo, hi]; says why on stderr when it is not. */
static int opt_f64(const struct ofl_args *a, const char *name, const char *key,
                   const char *dflt, double lo, double hi, double *v)
{
    const char *s = ofl_args_get(a, name, key, dflt);
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "offlow %s: balancer %s: %s=%s is not a number within %g..%g\n",
                a->device, name, key, s, lo, hi);
        return -EINVAL;
    }
    *v = x;
    return 0;
}

int ofl_balance_open(struct ofl_balance_run **r, const struct ofl_args *a, const char *name)
{
    double share, epoch_us, lo, hi;
    if (opt_f64(a, name, "share", "0.5", 0, 1, &share) ||
        opt_f64(a, name, "epoch_us", "10000", 1, 1e7, &epoch_us) ||
        opt_f64(a, name, "min_step", "0.00390625", 1.0 / OFL_BALANCE_ONE, 0.5, &lo) ||
        opt_f64(a, name, "max_step", "0.125", 1.0 / OFL_BALANCE_ONE, 0.5, &hi))
        return -EINVAL;
    const char *adapt = ofl_args_get(a, name, "adapt", "on");
    if (strcmp(adapt, "on") && strcmp(adapt, "off")) {
        fprintf(stderr, "offlow %s: balancer %s: adapt=%s: expected on or off\n", a->device,
                name, adapt);
        return -EINVAL;
    }
    const char *time = ofl_args_get(a, name, "time", "wall");
    if (strcmp(time, "cpu") && strcmp(time, "wall")) {
        fprintf(stderr, "offlow %s: balancer %s: time=%s: expected cpu or wall\n", a->device,
                name, time);
        return -EINVAL;
    }
    struct ofl_balance b;
    if (ofl_balance_init(&b, (uint32_t)(share * OFL_BALANCE_ONE + 0.5),
                         (uint32_t)(lo * OFL_BALANCE_ONE + 0.5),
                         (uint32_t)(hi * OFL_BALANCE_ONE + 0.5)) < 0) {
        fprintf(stderr, "offlow %s: balancer %s: min_step must not pass max_step\n",
                a->device, name);
        return -EINVAL;
    }
    struct ofl_balance_run *run = calloc(1, sizeof *run);
    if (!run) return -ENOMEM;
    run->b = b;
    run->adapt = !strcmp(adapt, "on");
    run->wall = !strcmp(time, "wall");
    run->epoch_ns = (uint64_t)(epoch_us * 1000.0);
    *r = run;
    return 0;
}

void ofl_balance_close(struct ofl_balance_run *r)
{
    free(r);
}

void ofl_balance_tick(struct ofl_balance_run *r)
{
    uint64_t now = ofl_now_ns();
    if (!r->epoch_start) {
        r->epoch_start = now;
        r->epoch_packets = 0;
        return;
    }
    if (now - r->epoch_start < r->epoch_ns) return;
    uint64_t pk[2] = {0, 0}, busy[2] = {0, 0};
    for (int i = 0; i < 2 && r->sides; i++) {
        uint64_t p = __atomic_load_n(&r->sides[i].packets, __ATOMIC_RELAXED);
        uint64_t t = r->wall ? __atomic_load_n(&r->sides[i].wall_ns, __ATOMIC_RELAXED)
                             : __atomic_load_n(&r->sides[i].busy_ns, __ATOMIC_RELAXED);
        pk[i] = p - r->seen_packets[i];
        busy[i] = t - r->seen_busy[i];
        r->seen_packets[i] = p;
        r->seen_busy[i] = t;
    }
    if (!r->adapt) {
        r->b.epochs++;
    } else if (r->seen_busy[0] || r->seen_busy[1]) {
        /* the meters count busy time: the sides' rates decide */
        ofl_balance_rates(&r->b, pk, busy);
        r->rate_epochs++;
    } else {
        ofl_balance_epoch(&r->b, r->epoch_packets, now - r->epoch_start);
    }
    r->share_sum += (double)r->b.share / OFL_BALANCE_ONE;
    r->ticks++;
    r->epoch_start = now;
    r->epoch_packets = 0;
}

void ofl_balance_stats(struct ofl_json *j, const char *name, const struct ofl_balance_run *r)
{
    ofl_json_begin_obj(j, name);
    ofl_json_str(j, "kind", "balance");
    ofl_json_u64(j, "adapt", (uint64_t)r->adapt);
    ofl_json_f64(j, "share", (double)r->b.share / OFL_BALANCE_ONE);
    ofl_json_f64(j, "mean_share", r->ticks ? r->share_sum / (double)r->ticks
                                           : (double)r->b.share / OFL_BALANCE_ONE);
    ofl_json_u64(j, "sent_0", r->sent[0]);
    ofl_json_u64(j, "sent_1", r->sent[1]);
    ofl_json_u64(j, "epochs", r->ticks);
    ofl_json_u64(j, "turns", r->b.turns);
    ofl_json_u64(j, "rate_epochs", r->rate_epochs);
    ofl_json_end_obj(j);
}
