/* Error codes and their text.
 *
 * Runtime functions report errors as negative errno values (-EPIPE, -EINVAL, ...).
 * Packet parsers add their own reasons, negative and below -4096 so they never
 * collide with errno values; so do the core and the libraries beside it (runtime/lib),
 * each library with its own text function. Each family of codes has a range of its
 * own, reserved here so that no two families' codes can meet (one code, one reason,
 * whichever text function reads it): each family's header checks that its codes lie
 * in its range (OFL_ERR_IN), and the ranges are checked apart below. A new family
 * takes the next free range. */
#ifndef OFL_ERR_H
#define OFL_ERR_H

/* The reserved ranges, FIRST down to LAST (both included). */
#define OFL_ERR_PKT_FIRST (-5001)   /* packet parsers: enum ofl_pkt_err, below */
#define OFL_ERR_PKT_LAST (-5099)
#define OFL_ERR_CORE_FIRST (-5100)  /* the core's own: enum ofl_core_err, below */
#define OFL_ERR_CORE_LAST (-5199)
#define OFL_ERR_MC_FIRST (-5200)    /* the memcached parser (lib/kvs: mcproto.h) */
#define OFL_ERR_MC_LAST (-5299)
#define OFL_ERR_LSO_FIRST (-5300)   /* segmentation offload (lib/lso: lso.h) */
#define OFL_ERR_LSO_LAST (-5399)

/* Whether `code` lies in family FAM's range (FAM: PKT, CORE, MC, LSO). */
#define OFL_ERR_IN(code, FAM) ((code) <= OFL_ERR_##FAM##_FIRST && (code) >= OFL_ERR_##FAM##_LAST)

_Static_assert(OFL_ERR_PKT_FIRST < -4095 && OFL_ERR_PKT_FIRST >= OFL_ERR_PKT_LAST &&
                   OFL_ERR_PKT_LAST > OFL_ERR_CORE_FIRST &&
                   OFL_ERR_CORE_FIRST >= OFL_ERR_CORE_LAST &&
                   OFL_ERR_CORE_LAST > OFL_ERR_MC_FIRST &&
                   OFL_ERR_MC_FIRST >= OFL_ERR_MC_LAST &&
                   OFL_ERR_MC_LAST > OFL_ERR_LSO_FIRST &&
                   OFL_ERR_LSO_FIRST >= OFL_ERR_LSO_LAST,
               "the error code families' ranges overlap, or reach errno's");

/* Reasons a packet parser rejects a packet (returned as negative values). */
enum ofl_pkt_err {
    OFL_ETRUNC = -5001,    /* packet shorter than its headers say */
    OFL_EBADHDR = -5002,   /* a header field has an impossible value */
    OFL_ECSUM = -5003,     /* checksum mismatch */
    OFL_EVERSION = -5004,  /* unknown protocol version */
    OFL_EUNSUPP = -5005,   /* protocol or option the parser does not handle */
    OFL_ELENGTH = -5006,   /* a length field runs past the packet that holds it */
};
_Static_assert(OFL_ERR_IN(OFL_ETRUNC, PKT) && OFL_ERR_IN(OFL_ELENGTH, PKT),
               "a packet reason outside the parsers' range (ETRUNC down to ELENGTH)");

/* Why a core stopped with an error of offlow's own (a core's `err`: gen.h), besides
 * errno values and the sentinels of queue.h, src.h and ring.h. Not a packet error: no
 * parser returns these, so they are an enum of their own beside ofl_pkt_err. */
enum ofl_core_err {
    OFL_EFAIL = -5100,     /* an element's body failed the core (FAIL, FAIL_AT: body.h);
                              the core's text says why */
};
_Static_assert(OFL_ERR_IN(OFL_EFAIL, CORE), "a core error outside the core's range");

/* Text for `err`: a negative errno value, an OFL_E* reason or a runtime sentinel such
 * as OFL_Q_DONE ("unknown error" for others: a library's own codes have their own
 * function, such as mcproto.h's ofl_mc_strerror). Never NULL; the string is static
 * and thread-safe. */
const char *ofl_strerror(int err);

#endif
