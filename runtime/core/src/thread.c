/* CPUs and pinning. */
#include "offlow/thread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

int ofl_ncpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int ofl_pin_self(int cpu)
{
    if (cpu < 0) return -EINVAL;
    int n = ofl_ncpus();
    int c = cpu % n;
    if (c >= CPU_SETSIZE) return -EINVAL;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc) return -rc;
    return cpu >= n ? 1 : 0;
}
