/* The send port's device side as a table object and its packet source kind "lso": their
 * options from the command line (the glue between gen.h's options and lso_nic.c and
 * lso_port.c, which need no program). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/gen.h"
#include "offlow/lso_nic.h"

/* A number option NAME.KEY (default `dflt`) within [lo, hi]. */
static int opt_num(const struct ofl_args *a, const char *name, const char *key,
                   const char *dflt, long lo, long hi, long *v)
{
    const char *s = ofl_args_get(a, name, key, dflt);
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end || x < lo || x > hi) {
        ofl_start_failf(a, "send port %s: %s=%s is not a number within %ld..%ld",
                        name, key, s, lo, hi);
        return -EINVAL;
    }
    *v = x;
    return 0;
}

int ofl_lso_nic_open_opts(struct ofl_lso_nic **n, const struct ofl_args *a, const char *name)
{
    struct ofl_lso_nic_opts o = { .path = ofl_args_get(a, name, "path", NULL) };
    long mtu, dma_min, cpu;
    const char *move = ofl_args_get(a, name, "move", "pio");
    if (opt_num(a, name, "mtu", "1500", 68, 9216, &mtu) ||
        opt_num(a, name, "dma_min", "1024", 0, 65535, &dma_min) ||
        opt_num(a, name, "dma_cpu", "-1", -1, 4095, &cpu))
        return -EINVAL;
    if (!strcmp(move, "pio")) o.move = OFL_LSO_PIO;
    else if (!strcmp(move, "dma")) o.move = OFL_LSO_DMA;
    else if (!strcmp(move, "auto")) o.move = OFL_LSO_AUTO;
    else if (!strcmp(move, "place")) o.move = OFL_LSO_PLACE;
    else {
        ofl_start_failf(a, "send port %s: move=%s: expected pio, dma, auto or place",
                        name, move);
        return -EINVAL;
    }
    o.mtu = (uint32_t)mtu;
    o.dma_min = (uint32_t)dma_min;
    o.dma_cpu = (int)cpu;
    char errbuf[256] = "";
    int rc = ofl_lso_nic_open(n, &o, errbuf);
    if (rc < 0) ofl_start_failf(a, "send port %s: %s", name, errbuf);
    return rc;
}

int ofl_lso_src_open_opts(struct ofl_src **s, const struct ofl_args *a, const char *name,
                          const struct ofl_src_opts *o, char *errbuf)
{
    const char *port = ofl_args_get(a, name, "port", NULL);
    if (!port) {
        snprintf(errbuf, 256, "kind=lso needs port=");
        return -EINVAL;
    }
    return ofl_lso_src_open(s, port, o, errbuf);
}
