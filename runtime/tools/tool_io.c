/* The drivers' helpers (see tool_io.h) over the runtime's file.h and wait.h. */
#include "tool_io.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>

#include "offlow/err.h"
#include "offlow/file.h"
#include "offlow/wait.h"

void *tool_read(const char *path, size_t *len)
{
    void *p;
    int rc = ofl_file_read(path, &p, len);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", path, ofl_strerror(rc));
        exit(1);
    }
    return p;
}

void tool_write(const char *dir, const char *name, const void *data, size_t len)
{
    int rc = ofl_file_write(dir, name, data, len);
    if (rc < 0) {
        fprintf(stderr, "%s/%s: %s\n", dir, name, ofl_strerror(rc));
        exit(1);
    }
}

double tool_now_s(void)
{
    return 1e-9 * (double)ofl_now_ns();
}

long tool_number(const char *tool, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: bad number '%s' (expected %ld..%ld)\n", tool, s, lo, hi);
        exit(2);
    }
    return v;
}

int tool_stop_signals(void)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    int rc = pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (rc) {
        errno = rc;
        return -1;
    }
    return signalfd(-1, &sigs, SFD_CLOEXEC);
}
