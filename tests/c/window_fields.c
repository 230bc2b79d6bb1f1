/* The window header through the C struct, for tests/test_attach.py: `window_fields read
 * PATH` opens the window (ofl_window_open checks its magic, version and size) and prints
 * its fields; `window_fields write PATH` sets the words a host program reads. */
#include <stdio.h>
#include <string.h>

#include "offlow/err.h"
#include "offlow/window.h"

int main(int argc, char **argv)
{
    struct ofl_window w;
    if (argc != 3) return 2;
    int rc = ofl_window_open(&w, argv[2]);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", argv[2], ofl_strerror(rc));
        return 1;
    }
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)w.base;
    if (!strcmp(argv[1], "read")) {
        printf("size %llu chan_off %llu chan_size %llu abort %u stop %u drained %u runner %d\n",
               (unsigned long long)h->size, (unsigned long long)h->chan_off,
               (unsigned long long)h->chan_size, h->abort, h->stop, h->drained, h->runner);
    } else {
        h->abort = 7;
        h->stop = 11;
        h->drained = 13;
        h->runner = 1234567;
    }
    ofl_window_close(&w);
    return 0;
}
