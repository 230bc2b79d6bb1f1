/* Error text. */
#include "offlow/err.h"

#include <errno.h>
#include <string.h>

#include "offlow/queue.h"
#include "offlow/src.h"

/* The runtime's sentinels outside the errno range are told apart by their value. */
_Static_assert(OFL_RING_EBROKEN != OFL_Q_DONE && OFL_RING_EBROKEN != OFL_SRC_DONE &&
                   OFL_Q_DONE != OFL_SRC_DONE && OFL_EFAIL != OFL_RING_EBROKEN &&
                   OFL_EFAIL != OFL_Q_DONE && OFL_EFAIL != OFL_SRC_DONE,
               "sentinels collide");

const char *ofl_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case OFL_ETRUNC: return "truncated packet";
    case OFL_EBADHDR: return "bad header field";
    case OFL_ECSUM: return "bad checksum";
    case OFL_EVERSION: return "unsupported protocol version";
    case OFL_EUNSUPP: return "unsupported protocol";
    case OFL_ELENGTH: return "length field past the end of the packet";
    case OFL_EFAIL: return "failed by the element";
    case OFL_Q_DONE: return "queue finished";
    case OFL_RING_EBROKEN: return "ring broken: its other end stopped (a corrupt entry, or its "
                                  "own failure)";
    /* the only -EDEADLK the runtime makes: ofl_qout with fail_full */
    case -EDEADLK: return "ring full, and its consumer runs in this same thread (segments "
                          "sharing a core): place them on different cores or raise ring_size";
    default: break;
    }
    if (err < 0 && err > -4096) {
        /* strerrordesc_np returns static text, unlike strerror's shared buffer. */
        const char *s = strerrordesc_np(-err);
        if (s) return s;
    }
    return "unknown error";
}
