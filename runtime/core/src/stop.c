/* Stop requests as pending, blocked signals (see stop.h). */
#include "offlow/stop.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

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
    if (rc) return -rc;
    /* A process started with SIGINT ignored (a background job of a shell script) would
     * otherwise drop the request; blocked now, the default action never runs. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    if (sigaction(SIGINT, &dfl, NULL) < 0 || sigaction(SIGTERM, &dfl, NULL) < 0) return -errno;
    /* Output to a reader that is gone (the runner's stderr pipe) fails with EPIPE
     * instead of killing the process before it has finished its captures. */
    struct sigaction ign = dfl;
    ign.sa_handler = SIG_IGN;
    if (sigaction(SIGPIPE, &ign, NULL) < 0) return -errno;
    return 0;
}

int ofl_stop_requested(void)
{
    sigset_t pending;
    if (sigpending(&pending) < 0) return 0;
    return sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1;
}
