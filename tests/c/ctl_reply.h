/* Reading a control-message reply (offlow/ctl.h) in the C tests. */
#ifndef OFL_TEST_CTL_REPLY_H
#define OFL_TEST_CTL_REPLY_H

#include <stdint.h>
#include <string.h>

#include "offlow/ctl.h"

/* The reply's status: 0 or a negative errno (its first four bytes). */
static inline int32_t reply_status(const struct ofl_ctl_reply *r)
{
    int32_t st;
    memcpy(&st, r->b, 4);
    return st;
}

#endif
