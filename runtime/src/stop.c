/* Stop requests as pending, blocked signals (see stop.h). */
#include "offlow/stop.h"

#include <errno.h>
#include <signal.h>

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

int ofl_stop_signals_block(void)
{
    sigset_t set;
    stop_set(&set);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    return rc ? -rc : 0;
}

int ofl_stop_requested(void)
{
    sigset_t pending;
    if (sigpending(&pending) < 0) return 0;
    return sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1;
}
